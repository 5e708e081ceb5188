package testnet

import (
	"context"
	"crypto/tls"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisTLS starts a redis-server on 127.0.0.1 that speaks TLS only, with
// the certificate in certFile and keyFile, and requires a client
// certificate from the CAs in caFile (Redis's default, tls-auth-clients
// yes). client must be a config that Redis accepts; RedisTLS waits until a
// PING with it is answered and returns the server's host:port. The server
// is stopped when the test ends. Like RedisCluster it skips without
// redis-server on PATH unless KEYGATE_REQUIRE_REDIS_CLUSTER is set.
func RedisTLS(t testing.TB, certFile, keyFile, caFile string, client *tls.Config) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("KEYGATE_REQUIRE_REDIS_CLUSTER") != "" {
			t.Fatalf("KEYGATE_REQUIRE_REDIS_CLUSTER is set but redis-server is not on PATH: %v", err)
		}
		t.Skip("Redis TLS tests skipped: no redis-server on PATH")
	}
	dir := t.TempDir()
	port := strconv.Itoa(clusterPort(t))
	cmd := exec.Command(bin, "--port", "0", "--tls-port", port, "--bind", "127.0.0.1",
		"--tls-cert-file", certFile, "--tls-key-file", keyFile, "--tls-ca-cert-file", caFile,
		"--tls-auth-clients", "yes", "--dir", dir, "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		t.Fatalf("redis-server: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := "127.0.0.1:" + port
	c := redis.NewClient(&redis.Options{Addr: addr, TLSConfig: client, DialTimeout: time.Second, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		err := c.Ping(ctx).Err()
		if err == nil {
			return addr
		}
		if ctx.Err() != nil {
			t.Fatalf("redis-server with TLS on %s did not answer: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
