package ratelimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"github.com/keygate/keygate/internal/testnet"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The Redis tests need a server: REDIS_URL=redis://127.0.0.1:6379/0. With
// REDIS_URL set they never skip; a server that does not answer fails them.

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// fleet returns n clients of REDIS_URL (n "nodes") and a key prefix of the
// test's own, whose keys are deleted when the test ends. It fails the test
// if Redis does not answer.
func fleet(t testing.TB, n int) (string, []*redis.Client) {
	t.Helper()
	var cs []*redis.Client
	for range n {
		cs = append(cs, testnet.RedisClient(t, nil))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := cs[0].Ping(ctx).Err(); err != nil {
		t.Fatalf("REDIS_URL is set but Redis does not answer: %v", err)
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	prefix := "keygate-test:rl:" + hex.EncodeToString(b) + ":"
	admin := cs[0]
	t.Cleanup(func() {
		ctx := context.Background()
		iter := admin.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			_ = admin.Del(ctx, iter.Val()).Err()
		}
	})
	return prefix, cs
}

func newRedisLimiter(t testing.TB, cfg RedisConfig) *Redis {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	r, err := NewRedis(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// within checks a retry-after against the ideal, less the time the calls
// themselves took.
func within(t testing.TB, got, ideal, slack time.Duration) {
	t.Helper()
	if got > ideal || got < ideal-slack {
		t.Errorf("retryAfter = %v, want within %v below %v", got, slack, ideal)
	}
}

// The tests give Redis a Timeout of seconds, so that a loaded machine
// does not turn a slow answer into a fallback; only the fallback tests
// use short ones.
const testTimeout = 3 * time.Second

func TestRedisBurstThenRate(t *testing.T) {
	prefix, cs := fleet(t, 1)
	r := newRedisLimiter(t, RedisConfig{Client: cs[0], Prefix: prefix, Limit: Limit{Rate: 10, Burst: 5}, Timeout: testTimeout})
	start := time.Now()
	for range 5 {
		mustAllow(t, r, "k")
	}
	denyStart := time.Now()
	wait := mustDeny(t, r, "k")
	within(t, wait, 100*time.Millisecond, time.Since(start)+2*time.Millisecond)
	ttl, err := cs[0].PTTL(context.Background(), prefix+"k").Result()
	if err != nil || ttl <= 0 || ttl > 500*time.Millisecond {
		t.Errorf("bucket key TTL = %v, %v; want (0, 500ms]: it expires when the bucket is full again", ttl, err)
	}
	mustAllow(t, r, "other")

	// One interval after the burst, one more passes, and the next waits
	// an interval less however late we came. By the GCRA arithmetic the
	// second denial's wait is 100ms + wait - (d1 - d0), where d0 and d1
	// are the instants Redis decided the two denials; every call between
	// them (the TTL probe, "other", the sleep, the allow) makes us later,
	// so the slack is everything from before the first denial to after
	// the second, less the wait we were told to sleep.
	time.Sleep(wait + time.Millisecond)
	mustAllow(t, r, "k")
	denied := mustDeny(t, r, "k")
	late := time.Since(denyStart) - wait
	within(t, denied, 100*time.Millisecond, late+time.Millisecond)
	if st := r.Stats(); st.Degraded || st.FallbackDecisions != 0 || st.RedisDecisions != 9 {
		t.Errorf("Stats = %+v", st)
	}
}

// TestRedisRate checks the refill: at 5/s with burst 2, whenever a denial
// says wait d, one request passes after d; and however the requests come,
// no more than 2 + 5/s pass.
func TestRedisRate(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: times a Redis limiter's refill; run without -short")
	}
	prefix, cs := fleet(t, 1)
	r := newRedisLimiter(t, RedisConfig{Client: cs[0], Prefix: prefix, Limit: Limit{Rate: 5, Burst: 2}, Timeout: testTimeout})
	ctx := context.Background()
	start := time.Now()
	passed := 0
	for range 5 {
		for {
			ok, wait, err := r.Allow(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				passed++
				continue
			}
			if wait > 200*time.Millisecond {
				t.Fatalf("retryAfter %v exceeds the interval, 200ms", wait)
			}
			time.Sleep(wait)
			break
		}
		mustAllow(t, r, "k")
		passed++
	}
	elapsed := time.Since(start)
	if most := 2 + int(elapsed.Seconds()*5) + 1; passed > most {
		t.Errorf("%d passed in %v at 5/s burst 2, at most %d may", passed, elapsed, most)
	}
	if st := r.Stats(); st.FallbackDecisions != 0 {
		t.Errorf("Stats = %+v", st)
	}
}

// TestRedisShared: two nodes, each with its own client and limiter, share
// the bucket of a key.
func TestRedisShared(t *testing.T) {
	prefix, cs := fleet(t, 2)
	lim := Limit{Rate: 0.5, Burst: 4}
	a := newRedisLimiter(t, RedisConfig{Client: cs[0], Prefix: prefix, Limit: lim, Timeout: testTimeout})
	b := newRedisLimiter(t, RedisConfig{Client: cs[1], Prefix: prefix, Limit: lim, Timeout: testTimeout})
	start := time.Now()
	mustAllow(t, a, "client-1")
	mustAllow(t, b, "client-1")
	mustAllow(t, a, "client-1")
	mustAllow(t, b, "client-1")
	within(t, mustDeny(t, a, "client-1"), 2*time.Second, time.Since(start)+2*time.Millisecond)
	within(t, mustDeny(t, b, "client-1"), 2*time.Second, time.Since(start)+2*time.Millisecond)
	mustAllow(t, b, "client-2")

	// Concurrently, from both nodes: exactly the burst passes.
	var passed atomic.Int64
	var wg sync.WaitGroup
	for i := range 8 {
		l := []*Redis{a, b}[i%2]
		wg.Go(func() {
			for range 25 {
				if ok, _, err := l.Allow(context.Background(), "client-3"); err != nil {
					t.Error(err)
				} else if ok {
					passed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if passed.Load() != 4 {
		t.Errorf("%d of 200 concurrent requests from two nodes passed, want the burst, 4", passed.Load())
	}
}

// TestRedisScriptNotCached runs a script Redis has never seen: EVALSHA
// fails with NOSCRIPT, EVAL runs it, and it is cached after.
func TestRedisScriptNotCached(t *testing.T) {
	prefix, cs := fleet(t, 1)
	r := newRedisLimiter(t, RedisConfig{Client: cs[0], Prefix: prefix, Limit: Limit{Rate: 1, Burst: 1}, Timeout: testTimeout})
	r.script = redis.NewScript(gcraSource + "-- " + prefix + "\n")
	ctx := context.Background()
	if ok, err := cs[0].ScriptExists(ctx, r.script.Hash()).Result(); err != nil || ok[0] {
		t.Fatalf("SCRIPT EXISTS before = %v, %v", ok, err)
	}
	mustAllow(t, r, "k")
	mustDeny(t, r, "k")
	if ok, err := cs[0].ScriptExists(ctx, r.script.Hash()).Result(); err != nil || !ok[0] {
		t.Errorf("SCRIPT EXISTS after = %v, %v", ok, err)
	}
}

func TestRedisLongKey(t *testing.T) {
	prefix, cs := fleet(t, 1)
	r := newRedisLimiter(t, RedisConfig{Client: cs[0], Prefix: prefix, Limit: Limit{Rate: 1, Burst: 1}, Timeout: testTimeout})
	long := strings.Repeat("x", 1000)
	mustAllow(t, r, long)
	mustDeny(t, r, long)
	mustAllow(t, r, long[:999])
	if n, err := cs[0].Exists(context.Background(), r.key(long)).Result(); err != nil || n != 1 || len(r.key(long)) > len(prefix)+80 {
		t.Errorf("long key stored as %q: %v %v", r.key(long), n, err)
	}
}

// TestRedisDownFallsBack: against a port nothing listens on, decisions come
// from the local fallback bucket, with a nil error, and during the
// cooldown without waiting for Redis.
func TestRedisDownFallsBack(t *testing.T) {
	testnet.RedisOptions(t) // skip without REDIS_URL, like the others
	var dials atomic.Int64
	addr := testnet.ClosedAddr(t)
	client := redis.NewClient(&redis.Options{Addr: addr, DialerRetries: 1, MaxRetries: -1, ContextTimeoutEnabled: true,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}})
	defer client.Close()
	r := newRedisLimiter(t, RedisConfig{Client: client, Limit: Limit{Rate: 1, Burst: 3}, Cooldown: time.Hour})
	start := time.Now()
	for range 3 {
		mustAllow(t, r, "k")
	}
	within(t, mustDeny(t, r, "k"), time.Second, time.Since(start)+2*time.Millisecond)
	mustAllow(t, r, "other")
	st := r.Stats()
	if !st.Degraded || st.LastError == nil || st.RedisDecisions != 0 || st.FallbackDecisions != 5 {
		t.Errorf("Stats = %+v", st)
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("%d dials for 5 decisions: only the first should try Redis", n)
	}
	t.Logf("Redis down: first decision after one failed dial, the rest from the fallback (last error: %v)", st.LastError)
	for range 1000 {
		_, _, _ = r.Allow(context.Background(), "k")
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("Redis was tried %d more times during the cooldown", n-1)
	}
}

// TestRedisRecovers cuts the network and restores it: the limiter falls
// back, then after the cooldown uses Redis again.
func TestRedisRecovers(t *testing.T) {
	prefix, _ := fleet(t, 1)
	sw := new(testnet.Switch)
	client := testnet.RedisClient(t, func(o *redis.Options) { o.Dialer = sw.Dial; o.MaxRetries = -1 })
	r := newRedisLimiter(t, RedisConfig{Client: client, Prefix: prefix, Limit: Limit{Rate: 1, Burst: 2},
		Cooldown: 100 * time.Millisecond, Timeout: testTimeout})
	mustAllow(t, r, "k")

	sw.Down()
	mustAllow(t, r, "k") // the fallback's bucket is its own, and full
	mustAllow(t, r, "k")
	mustDeny(t, r, "k")
	if st := r.Stats(); !st.Degraded || st.FallbackDecisions != 3 {
		t.Fatalf("Stats while down = %+v", st)
	}

	sw.Up()
	time.Sleep(150 * time.Millisecond)
	// Redis's bucket still holds the one request it counted: one more passes.
	mustAllow(t, r, "k")
	mustDeny(t, r, "k")
	if st := r.Stats(); st.Degraded || st.LastError != nil || st.RedisDecisions != 3 {
		t.Errorf("Stats after recovery = %+v", st)
	}
}

// TestRedisCallerGone: a cancelled caller's context is the caller's error,
// not a Redis failure.
func TestRedisCallerGone(t *testing.T) {
	prefix, cs := fleet(t, 1)
	r := newRedisLimiter(t, RedisConfig{Client: cs[0], Prefix: prefix, Limit: Limit{Rate: 1, Burst: 1}, Timeout: testTimeout})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ok, _, err := r.Allow(ctx, "k")
	if ok || !errors.Is(err, context.Canceled) {
		t.Errorf("Allow with a cancelled context = %v, %v", ok, err)
	}
	if st := r.Stats(); st.Degraded {
		t.Error("a cancelled caller tripped the fallback")
	}
}

func TestRedisConfig(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	if _, err := NewRedis(RedisConfig{Limit: Limit{Rate: 1, Burst: 1}}); err == nil {
		t.Error("no client accepted")
	}
	if _, err := NewRedis(RedisConfig{Client: c}); !errors.Is(err, ErrInvalidLimit) {
		t.Errorf("zero limit: %v", err)
	}
	if _, err := NewRedis(RedisConfig{Client: c, Limit: Limit{Rate: 1, Burst: 1}, Cooldown: -1, Logger: quiet}); err == nil {
		t.Error("negative cooldown accepted")
	}
}

func BenchmarkRedisAllow(b *testing.B) {
	prefix, cs := fleet(b, 1)
	r := newRedisLimiter(b, RedisConfig{Client: cs[0], Prefix: prefix, Limit: Limit{Rate: 1e6, Burst: 1000}, Timeout: testTimeout})
	ctx := context.Background()
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	b.ReportAllocs()
	var seq atomic.Uint64
	b.RunParallel(func(pb *testing.PB) {
		i := seq.Add(1)
		for pb.Next() {
			if _, _, err := r.Allow(ctx, keys[i%uint64(len(keys))]); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
	if st := r.Stats(); st.FallbackDecisions != 0 {
		b.Errorf("%d decisions fell back", st.FallbackDecisions)
	}
}

// TestRedisCluster: two limiters on a three-master Redis Cluster share each
// key's bucket, whichever shard the key's slot lands on.
func TestRedisCluster(t *testing.T) {
	opt, err := redis.ParseClusterURL(testnet.RedisCluster(t))
	if err != nil {
		t.Fatal(err)
	}
	opt.ContextTimeoutEnabled = true
	var ls []*Redis
	for range 2 {
		c := redis.NewClusterClient(opt)
		t.Cleanup(func() { c.Close() })
		ls = append(ls, newRedisLimiter(t, RedisConfig{Client: c, Prefix: "rl:", Limit: Limit{Rate: 0.5, Burst: 3}, Timeout: testTimeout}))
	}
	shards := map[string]bool{}
	probe := redis.NewClusterClient(opt)
	defer probe.Close()
	for i := range 12 {
		key := "client-" + string(rune('a'+i))
		for j := range 3 {
			mustAllow(t, ls[j%2], key)
		}
		mustDeny(t, ls[0], key)
		mustDeny(t, ls[1], key)
		if err := probe.ForEachMaster(context.Background(), func(ctx context.Context, c *redis.Client) error {
			if n, _ := c.Exists(ctx, "rl:"+key).Result(); n == 1 {
				shards[c.Options().Addr] = true
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if len(shards) < 2 {
		t.Errorf("12 keys landed on %d shard(s); the test meant to span the cluster", len(shards))
	}
	if st := ls[0].Stats(); st.Degraded || st.FallbackDecisions != 0 {
		t.Errorf("Stats = %+v: a cluster decision fell back", st)
	}
}
