package testnet

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisCluster starts a three-master Redis Cluster on loopback from the
// redis-server on PATH, stopped when the test ends, and returns its URL
// in the form keygate takes (redis://first?addr=second&addr=third). Without
// redis-server the test skips, unless KEYGATE_REQUIRE_REDIS_CLUSTER is set,
// which .ci/run does so that the cluster tests cannot skip there.
func RedisCluster(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	var addrs []string
	for i := range 3 {
		port := strconv.Itoa(clusterPort(t))
		addr := "127.0.0.1:" + port
		startRedisServer(t, "Redis Cluster", &redis.Options{Addr: addr}, "--port", port, "--bind", "127.0.0.1", "--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(dir, fmt.Sprintf("nodes-%d.conf", i)), "--dir", dir,
			"--save", "", "--appendonly", "no", "--cluster-node-timeout", "2000")
		addrs = append(addrs, addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const slots = 16384
	for i, addr := range addrs {
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		lo, hi := i*slots/len(addrs), (i+1)*slots/len(addrs)-1
		if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			t.Fatalf("CLUSTER ADDSLOTSRANGE on %s: %v", addr, err)
		}
		if i > 0 {
			host, port, _ := net.SplitHostPort(addr)
			first := redis.NewClient(&redis.Options{Addr: addrs[0]})
			err := first.Do(ctx, "CLUSTER", "MEET", host, port).Err()
			first.Close()
			if err != nil {
				t.Fatalf("CLUSTER MEET %s: %v", addr, err)
			}
		}
	}
	for _, addr := range addrs {
		c := redis.NewClient(&redis.Options{Addr: addr})
		for {
			info, err := c.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:3") {
				break
			}
			if ctx.Err() != nil {
				c.Close()
				t.Fatalf("Redis Cluster on %v not ready: %s %v", addrs, info, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		c.Close()
	}
	return "redis://" + addrs[0] + "?addr=" + addrs[1] + "&addr=" + addrs[2]
}

// clusterPort picks a port that is free, and whose cluster bus port (port
// + 10000) is free too.
func clusterPort(t testing.TB) int {
	t.Helper()
	for range 100 {
		p := 20000 + rand.IntN(20000)
		ok := true
		for _, q := range []int{p, p + 10000} {
			ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(q))
			if err != nil {
				ok = false
				break
			}
			ln.Close()
		}
		if ok {
			return p
		}
	}
	t.Fatal("no free port pair for a Redis Cluster node")
	return 0
}

// startRedisServer starts the redis-server on PATH with args, stopped when
// the test ends, and waits until a PING with opts is answered. Without
// redis-server the test skips (what names the tests skipped), unless
// KEYGATE_REQUIRE_REDIS_CLUSTER is set, which .ci/run does; under -short
// it skips whatever is installed.
func startRedisServer(t testing.TB, what string, opts *redis.Options, args ...string) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration: " + what + " from redis-server; run without -short")
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("KEYGATE_REQUIRE_REDIS_CLUSTER") != "" {
			t.Fatalf("KEYGATE_REQUIRE_REDIS_CLUSTER is set but redis-server is not on PATH: %v", err)
		}
		t.Skip(what + " tests skipped: no redis-server on PATH")
	}
	cmd := exec.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("redis-server: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	c := redis.NewClient(opts)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		err := c.Ping(ctx).Err()
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("redis-server on %s did not answer: %v", opts.Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
