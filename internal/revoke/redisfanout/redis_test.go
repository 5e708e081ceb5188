package redisfanout

import (
	"context"
	"errors"
	"fmt"
	"github.com/keygate/keygate/internal/revoke"
	"github.com/keygate/keygate/internal/testnet"
	"io"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// node is one Fanout of a test fleet with the client it uses.
type node struct {
	*Fanout
	client *redis.Client
	mem    *revoke.Memory
	name   string          // the client's CLIENT SETNAME
	net    *testnet.Switch // nil unless the node's network can be cut
}

// fleetConfig is the configuration a test node starts from: timers fast
// enough for tests.
func fleetConfig(prefix string) FanoutConfig {
	return FanoutConfig{
		Prefix:         prefix,
		ResyncInterval: 5 * time.Second,
		PingInterval:   50 * time.Millisecond,
		Timeout:        time.Second,
		Logger:         quiet,
	}
}

// startNode starts a Fanout on its own client. With cut, the client's
// network can be cut.
func startNode(t *testing.T, cfg FanoutConfig, cut bool) *node {
	t.Helper()
	n := &node{mem: revoke.NewMemory(), name: "keygate-test-" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	if cut {
		n.net = new(testnet.Switch)
	}
	n.client = testnet.RedisClient(t, func(o *redis.Options) {
		o.ClientName = n.name
		if n.net != nil {
			o.Dialer = n.net.Dial
		}
	})
	mustPing(t, n.client)
	cfg.Client, cfg.Memory = n.client, n.mem
	f, err := NewFanout(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.Fanout = f
	t.Cleanup(func() { _ = f.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := f.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	eventually(t, 5*time.Second, "subscription", func() bool { return f.Status().Subscribed })
	return n
}

// startFleet starts n nodes sharing one prefix.
func startFleet(t *testing.T, n int, mod func(*FanoutConfig)) (prefix string, nodes []*node) {
	t.Helper()
	admin := testnet.RedisClient(t, nil)
	mustPing(t, admin)
	prefix = testPrefix(t, admin)
	cfg := fleetConfig(prefix)
	if mod != nil {
		mod(&cfg)
	}
	for range n {
		nodes = append(nodes, startNode(t, cfg, false))
	}
	return prefix, nodes
}

// TestFanoutPropagation makes revocations at node B, half by jti and half
// by subject, and measures how long each takes to be seen at node C.
func TestFanoutPropagation(t *testing.T) {
	testnet.RedisOptions(t) // skip here, not in each subtest
	for _, sharded := range []bool{false, true} {
		t.Run(fmt.Sprintf("sharded=%v", sharded), func(t *testing.T) {
			_, nodes := startFleet(t, 3, func(c *FanoutConfig) { c.Sharded = sharded })
			a, b, c := nodes[0], nodes[1], nodes[2]
			ctx := context.Background()
			now := time.Now().Truncate(time.Second) // as iat is
			const n = 200
			lat := make([]time.Duration, 0, n)
			for i := range n {
				var check func(*node) bool
				start := time.Now()
				if i%2 == 0 {
					jti := fmt.Sprint("jti-", i)
					if err := b.RevokeID(ctx, "iss", jti, now.Add(time.Hour)); err != nil {
						t.Fatalf("RevokeID: %v", err)
					}
					check = func(x *node) bool { return x.Revoked("iss", jti, "", time.Time{}) }
				} else {
					sub := fmt.Sprint("sub-", i)
					if err := b.RevokeSubject(ctx, "iss", sub, now); err != nil {
						t.Fatalf("RevokeSubject: %v", err)
					}
					check = func(x *node) bool { return x.Revoked("iss", "", sub, now.Add(-time.Second)) }
				}
				for !check(c) {
					if time.Since(start) > time.Second {
						t.Fatalf("revocation %d made at B not seen at C within 1 s", i)
					}
					time.Sleep(20 * time.Microsecond)
				}
				lat = append(lat, time.Since(start))
			}
			t.Logf("B→C propagation over %d revocations (write + publish + apply): p50 %v, p99 %v, max %v",
				n, percentile(lat, 0.50), percentile(lat, 0.99), percentile(lat, 1))

			// Every node holds all of them, with the subject semantics intact.
			for name, x := range map[string]*node{"A": a, "B": b, "C": c} {
				eventually(t, time.Second, "node "+name+" complete", func() bool {
					ids, subs := x.mem.Len()
					return ids == n/2 && subs == n/2
				})
				if x.Revoked("iss", "", "sub-1", now) || x.Revoked("iss", "", "sub-1", now.Add(time.Second)) {
					t.Errorf("node %s: token issued at or after the subject revocation is revoked", name)
				}
				if x.Revoked("other-iss", "jti-0", "", time.Time{}) {
					t.Errorf("node %s: revocation leaked to another issuer", name)
				}
			}
		})
	}
	checkNoFanoutGoroutines(t)
}

// TestFanoutBurst: a burst of revocations (a mass logout) reaches a node
// holding a large set quickly, because queued messages are applied in
// batches rather than with one copy of the set each (one copy each took
// 5 s here under -race; batched, half a second).
func TestFanoutBurst(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: a burst of revocations through Redis into a 50,000-entry set; run without -short")
	}
	_, nodes := startFleet(t, 2, nil)
	b, c := nodes[0], nodes[1]
	c.mem.Update(func(batch *revoke.Batch) {
		for i := range 50_000 {
			batch.RevokeID("bulk", fmt.Sprint("old-", i), time.Now().Add(time.Hour))
		}
	})
	const writers, each = 8, 250
	start := time.Now()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if err := b.RevokeID(context.Background(), "iss", fmt.Sprint(w, "-", i), time.Now().Add(time.Hour)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	eventually(t, 3*time.Second, "burst at C", func() bool {
		ids, _ := c.mem.Len()
		return ids == 50_000+writers*each
	})
	t.Logf("%d revocations written at B and applied at C (holding 50,000) in %v", writers*each, time.Since(start))
}

// TestFanoutResyncRepairsLostMessage writes a revocation to Redis without
// publishing it, as if the message were lost: the periodic resync finds it.
func TestFanoutResyncRepairsLostMessage(t *testing.T) {
	prefix, nodes := startFleet(t, 1, func(c *FanoutConfig) { c.ResyncInterval = 200 * time.Millisecond })
	admin := testnet.RedisClient(t, nil)
	key := "{" + prefix + "}:jti"
	until := time.Now().Add(time.Hour)
	if err := admin.ZAdd(context.Background(), key, redis.Z{
		Score: float64(ceilMicros(until)), Member: encodeMember("iss", "lost"),
	}).Err(); err != nil {
		t.Fatal(err)
	}
	took := eventually(t, 2*time.Second, "resync", func() bool { return nodes[0].Revoked("iss", "lost", "", time.Time{}) })
	t.Logf("unpublished revocation found by resync after %v (ResyncInterval 200ms)", took)
	if st := nodes[0].Status(); st.LastResync.IsZero() || st.LastError != nil {
		t.Errorf("Status after resyncs: %+v", st)
	}
}

// TestFanoutDisconnectedNodeCatchesUp cuts node C off Redis, makes
// revocations at B that C cannot hear of, and reconnects C: its
// resubscription triggers a resync that brings them in.
func TestFanoutDisconnectedNodeCatchesUp(t *testing.T) {
	admin := testnet.RedisClient(t, nil)
	mustPing(t, admin)
	cfg := fleetConfig(testPrefix(t, admin))
	b := startNode(t, cfg, false)
	c := startNode(t, cfg, true)
	ctx := context.Background()
	now := time.Now()

	c.net.Down()
	eventually(t, 2*time.Second, "C notices the outage", func() bool { return !c.Status().Subscribed })
	if err := b.RevokeID(ctx, "iss", "while-down", now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := b.RevokeSubject(ctx, "iss", "mallory", now); err != nil {
		t.Fatal(err)
	}
	// C's own revocation: applied locally, refused by Redis.
	err := c.RevokeID(ctx, "iss", "local-only", now.Add(time.Hour))
	if !errors.Is(err, ErrNotShared) {
		t.Fatalf("RevokeID while cut off: err = %v, want ErrNotShared", err)
	}
	if !c.Revoked("iss", "local-only", "", time.Time{}) {
		t.Error("a revocation Redis refused was not applied locally")
	}
	time.Sleep(200 * time.Millisecond)
	if c.Revoked("iss", "while-down", "", time.Time{}) {
		t.Fatal("C saw a revocation while cut off: the outage is not real")
	}
	if b.Revoked("iss", "local-only", "", time.Time{}) {
		t.Error("a revocation Redis refused reached B")
	}

	c.net.Up()
	took := eventually(t, 3*time.Second, "C catches up", func() bool {
		return c.Revoked("iss", "while-down", "", time.Time{}) && c.Revoked("iss", "", "mallory", now.Add(-time.Minute))
	})
	t.Logf("C caught up %v after the network came back", took)
	eventually(t, 2*time.Second, "C subscribed again", func() bool { return c.Status().Subscribed })
	if !c.Revoked("iss", "local-only", "", time.Time{}) {
		t.Error("C lost its local revocation on resync")
	}

	// And when its connections are killed (CLIENT KILL), C resubscribes
	// and resyncs at once, long before the periodic resync (5 s) is due.
	killedAt := time.Now()
	list, err := admin.ClientList(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	killed := 0
	for line := range strings.SplitSeq(list, "\n") {
		if name, _ := fieldOf(line, "name"); name != c.name {
			continue
		}
		if id, ok := fieldOf(line, "id"); ok && admin.ClientKillByFilter(ctx, "ID", id).Err() == nil {
			killed++
		}
	}
	if killed == 0 {
		t.Fatalf("no connection of C (%s) to kill", c.name)
	}
	if err := b.RevokeID(ctx, "iss", "after-kill", now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Second, "C after CLIENT KILL", func() bool { return c.Revoked("iss", "after-kill", "", time.Time{}) })
	eventually(t, 3*time.Second, "C resyncs after CLIENT KILL", func() bool {
		st := c.Status()
		return st.Subscribed && st.LastResync.After(killedAt)
	})
	t.Logf("killed %d connections of C; resubscribed and resynced within %v", killed, time.Since(killedAt))
}

// TestFanoutUnsubscribed: when the subscription ends without the
// connection failing (Redis Cluster drops a shard channel's subscribers
// when its slot moves), the node subscribes again and resyncs.
func TestFanoutUnsubscribed(t *testing.T) {
	for _, sharded := range []bool{false, true} {
		t.Run(fmt.Sprintf("sharded=%v", sharded), func(t *testing.T) {
			_, nodes := startFleet(t, 2, func(c *FanoutConfig) { c.Sharded = sharded })
			b, c := nodes[0], nodes[1]
			ctx := context.Background()
			c.mu.Lock()
			ps := c.ps
			c.mu.Unlock()
			dropped := time.Now()
			var err error
			if sharded {
				err = ps.SUnsubscribe(ctx, c.channel)
			} else {
				err = ps.Unsubscribe(ctx, c.channel)
			}
			if err != nil {
				t.Fatal(err)
			}
			eventually(t, 3*time.Second, "resubscribed and resynced", func() bool {
				st := c.Status()
				return st.Subscribed && st.LastResync.After(dropped)
			})
			if err := b.RevokeID(ctx, "iss", "after", time.Now().Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			eventually(t, time.Second, "message after resubscription", func() bool { return c.Revoked("iss", "after", "", time.Time{}) })
		})
	}
}

func fieldOf(line, name string) (string, bool) {
	for f := range strings.FieldsSeq(line) {
		if v, ok := strings.CutPrefix(f, name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// TestFanoutStalenessFailClosed cuts a node off Redis: its staleness grows,
// it serves the last known set until MaxStaleness, then refuses every
// token, and recovers when Redis is back.
func TestFanoutStalenessFailClosed(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: cuts a node off Redis and waits out its staleness; run without -short")
	}
	admin := testnet.RedisClient(t, nil)
	mustPing(t, admin)
	cfg := fleetConfig(testPrefix(t, admin))
	cfg.MaxStaleness = 600 * time.Millisecond
	c := startNode(t, cfg, true)
	if err := c.RevokeID(context.Background(), "iss", "known", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}

	// Healthy: pings keep the set fresh well inside MaxStaleness.
	time.Sleep(300 * time.Millisecond)
	if s := c.Staleness(); s > 250*time.Millisecond {
		t.Errorf("healthy staleness %v, want about PingInterval (50ms)", s)
	}
	if c.Revoked("iss", "fine", "", time.Time{}) || !c.Revoked("iss", "known", "", time.Time{}) {
		t.Fatal("healthy node answers wrongly")
	}

	c.net.Down()
	downAt := time.Now()
	time.Sleep(250 * time.Millisecond)
	s1 := c.Staleness()
	time.Sleep(150 * time.Millisecond)
	s2 := c.Staleness()
	if s2 <= s1 || s1 < 200*time.Millisecond {
		t.Errorf("staleness while cut off: %v then %v; want it growing", s1, s2)
	}
	// Judged by the node's own staleness, read after the calls: it only
	// grows while cut off, so below MaxStaleness then means below it during
	// them (the wall clock since the cut says nothing of when the last ping
	// landed on a loaded machine).
	fine, known := c.Revoked("iss", "fine", "", time.Time{}), c.Revoked("iss", "known", "", time.Time{})
	if s := c.Staleness(); s < cfg.MaxStaleness && (fine || !known) {
		t.Errorf("inside MaxStaleness (staleness %v) the node does not serve its last known set", s)
	}
	took := eventually(t, 2*time.Second, "fail closed", func() bool { return c.Revoked("iss", "fine", "", time.Time{}) })
	t.Logf("failed closed %v after the cut (MaxStaleness %v, staleness %v)", time.Since(downAt), cfg.MaxStaleness, c.Staleness())
	_ = took
	if st := c.Status(); !st.FailClosed || st.Ready() || st.Subscribed {
		t.Errorf("Status while failing closed: %+v", st)
	}

	c.net.Up()
	took = eventually(t, 3*time.Second, "recover", func() bool { return !c.Revoked("iss", "fine", "", time.Time{}) })
	t.Logf("verifying again %v after the network came back", took)
	if st := c.Status(); st.FailClosed || !st.Ready() {
		t.Errorf("Status after recovery: %+v", st)
	}
	if !c.Revoked("iss", "known", "", time.Time{}) {
		t.Error("revocation lost across the outage")
	}
}

// TestFanoutUnreachable starts a node against a port nothing listens on.
func TestFanoutUnreachable(t *testing.T) {
	testnet.RedisOptions(t) // skip without REDIS_URL, like the others
	mem := revoke.NewMemory()
	client := redis.NewClient(&redis.Options{Addr: testnet.ClosedAddr(t), DialTimeout: 200 * time.Millisecond,
		DialerRetries: 1, MaxRetries: -1, ContextTimeoutEnabled: true})
	defer client.Close()
	f, err := NewFanout(FanoutConfig{Client: client, Prefix: "keygate-test:unreachable", Memory: mem,
		PingInterval: 50 * time.Millisecond, MaxStaleness: time.Second, Timeout: 200 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err = f.Start(ctx)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Start = %v, want the deadline with the last error", err)
	}
	t.Logf("Start: %v", err)
	if s := f.Staleness(); s != math.MaxInt64 {
		t.Errorf("Staleness before any sync = %v", s)
	}
	if !f.Revoked("iss", "anything", "", time.Time{}) {
		t.Error("never-synced node with MaxStaleness did not fail closed")
	}
	err = f.RevokeSubject(context.Background(), "iss", "eve", time.Now())
	if !errors.Is(err, ErrNotShared) {
		t.Errorf("RevokeSubject = %v, want ErrNotShared", err)
	}
	if !mem.Revoked("iss", "", "eve", time.Now().Add(-time.Second)) {
		t.Error("unshared revocation not applied to memory")
	}
	if st := f.Status(); st.Ready() || st.LastError == nil {
		t.Errorf("Status = %+v", st)
	}
	start := time.Now()
	_ = f.Close()
	if d := time.Since(start); d > time.Second {
		t.Errorf("Close took %v", d)
	}
	checkNoFanoutGoroutines(t)
	if err := f.Start(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Close = %v", err)
	}
}

// TestFanoutCloseDuringOutage closes a node that is cut off Redis, its
// reader backing off and its controller retrying: Close is prompt and
// leaves no goroutine behind.
func TestFanoutCloseDuringOutage(t *testing.T) {
	admin := testnet.RedisClient(t, nil)
	mustPing(t, admin)
	cfg := fleetConfig(testPrefix(t, admin))
	cfg.ResyncInterval = 100 * time.Millisecond
	c := startNode(t, cfg, true)
	c.net.Down()
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Close took %v", d)
	}
	checkNoFanoutGoroutines(t)
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestFanoutRedisState checks what lands in Redis: scores in µs rounded
// up, expiry Grace past the latest jti, expired entries pruned, and
// subject retention.
func TestFanoutRedisState(t *testing.T) {
	prefix, nodes := startFleet(t, 1, func(c *FanoutConfig) {
		c.Grace = 100 * time.Millisecond
		c.SubjectRetention = time.Hour
	})
	f := nodes[0]
	admin := testnet.RedisClient(t, nil)
	ctx := context.Background()
	tag := "{" + prefix + "}"

	soon := time.Now().Add(50*time.Millisecond + 1) // +1ns: rounded up to the µs
	if err := f.RevokeID(ctx, "iss", "short", soon); err != nil {
		t.Fatal(err)
	}
	score, err := admin.ZScore(ctx, tag+":jti", encodeMember("iss", "short")).Result()
	if err != nil {
		t.Fatal(err)
	}
	if want := ceilMicros(soon); int64(score) != want || time.UnixMicro(want).Before(soon) {
		t.Errorf("score %v, want %d", score, want)
	}
	time.Sleep(200 * time.Millisecond) // past soon + Grace
	late := time.Now().Add(time.Hour)
	if err := f.RevokeID(ctx, "iss", "long", late); err != nil {
		t.Fatal(err)
	}
	if err := admin.ZScore(ctx, tag+":jti", encodeMember("iss", "short")).Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("expired entry not pruned: %v", err)
	}
	ttl, err := admin.PTTL(ctx, tag+":jti").Result()
	if err != nil {
		t.Fatal(err)
	}
	if ttl < 59*time.Minute || ttl > time.Hour+time.Second {
		t.Errorf("jti key TTL %v, want about 1h + Grace", ttl)
	}
	// An earlier expiry never shortens the key's life or the entry's.
	if err := f.RevokeID(ctx, "iss", "long", time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if s, _ := admin.ZScore(ctx, tag+":jti", encodeMember("iss", "long")).Result(); int64(s) != ceilMicros(late) {
		t.Errorf("a later revocation with an earlier exp narrowed the entry: %v", s)
	}
	if ttl2, _ := admin.PTTL(ctx, tag+":jti").Result(); ttl2 < 59*time.Minute {
		t.Errorf("key TTL shrank to %v", ttl2)
	}
	// Already expired past Grace: applied locally, nothing written.
	if err := f.RevokeID(ctx, "iss", "dead", time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := admin.ZScore(ctx, tag+":jti", encodeMember("iss", "dead")).Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("long-expired revocation written: %v", err)
	}

	if err := f.RevokeSubject(ctx, "iss", "bob", time.Now()); err != nil {
		t.Fatal(err)
	}
	if ttl, _ := admin.PTTL(ctx, tag+":sub").Result(); ttl < 59*time.Minute || ttl > time.Hour+time.Second {
		t.Errorf("subject key TTL %v, want SubjectRetention", ttl)
	}

	if err := f.RevokeID(ctx, "iss", "", late); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty jti: %v", err)
	}
	if err := f.RevokeSubject(ctx, "iss", "", late); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty subject: %v", err)
	}
}

// TestFanoutSubjectUntil: a subject revocation kept until a time (tokens
// of an identity provider that live longer than SubjectRetention) reaches
// the other nodes, by message and by resync, and outlives the retention
// there and in Redis until then; a plain one as old is dropped.
func TestFanoutSubjectUntil(t *testing.T) {
	prefix, nodes := startFleet(t, 2, func(c *FanoutConfig) {
		c.SubjectRetention = time.Hour
		c.Grace = 100 * time.Millisecond
	})
	a, b := nodes[0], nodes[1]
	admin := testnet.RedisClient(t, nil)
	ctx := context.Background()
	tag := "{" + prefix + "}"
	old := time.Now().Add(-2 * time.Hour) // past the retention already
	until := time.Now().Add(time.Hour)
	issued := old.Add(-time.Minute)
	if err := a.RevokeSubjectUntil(ctx, "https://idp.example/", "bob", old, until); err != nil {
		t.Fatal(err)
	}
	if err := a.RevokeSubject(ctx, "https://idp.example/", "carol", old); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the kept revocation at B by message", func() bool {
		return b.Revoked("https://idp.example/", "", "bob", issued)
	})
	for _, n := range nodes {
		if err := n.Resync(ctx); err != nil {
			t.Fatal(err)
		}
		if !n.Revoked("https://idp.example/", "", "bob", issued) {
			t.Error("a subject revocation kept until later was swept at a resync")
		}
		if n.Revoked("https://idp.example/", "", "carol", issued) {
			t.Error("a plain subject revocation past the retention was kept")
		}
		if n.Revoked("https://other.example/", "", "bob", issued) {
			t.Error("the revocation reached another issuer's subject")
		}
	}
	member := strconv.FormatInt(ceilMicros(old), 10) + " " + encodeMember("https://idp.example/", "bob")
	score, err := admin.ZScore(ctx, tag+":subkeep", member).Result()
	if err != nil {
		t.Fatal(err)
	}
	if int64(score) != ceilMicros(until) {
		t.Errorf("subkeep score %v, want %d", score, ceilMicros(until))
	}
	if ttl, _ := admin.PTTL(ctx, tag+":subkeep").Result(); ttl < 59*time.Minute || ttl > time.Hour+time.Second {
		t.Errorf("subkeep key TTL %v, want about until + Grace", ttl)
	}
	// A node that starts now loads it.
	c := startNode(t, func() FanoutConfig {
		cfg := fleetConfig(prefix)
		cfg.SubjectRetention, cfg.Grace = time.Hour, 100*time.Millisecond
		return cfg
	}(), false)
	if !c.Revoked("https://idp.example/", "", "bob", issued) {
		t.Error("a node started later did not load the kept revocation")
	}
	// An until within the retention is a plain subject revocation.
	if err := a.RevokeSubjectUntil(ctx, "https://idp.example/", "dave", time.Now(), time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := admin.ZScore(ctx, tag+":sub", encodeMember("https://idp.example/", "dave")).Err(); err != nil {
		t.Errorf("an until within the retention: not in the subject set: %v", err)
	}
}

// TestFanoutMalformed feeds garbage through the channel and the sets: it
// is ignored, and the node keeps working.
func TestFanoutMalformed(t *testing.T) {
	prefix, nodes := startFleet(t, 2, nil)
	admin := testnet.RedisClient(t, nil)
	ctx := context.Background()
	tag := "{" + prefix + "}"
	for _, p := range []string{"", "x", "j", "j 12", "j abc 3:issid", "j 1 99:x", "q 1 3:issid", "j 1 3:iss"} {
		if err := admin.Publish(ctx, tag+":events", p).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := admin.ZAdd(ctx, tag+":sub", redis.Z{Score: 1, Member: "garbage"}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := nodes[0].Resync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := nodes[0].RevokeID(ctx, "iss", "ok", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Second, "propagation after garbage", func() bool { return nodes[1].Revoked("iss", "ok", "", time.Time{}) })
	if ids, subs := nodes[1].mem.Len(); ids != 1 || subs != 0 {
		t.Errorf("garbage reached memory: %d ids, %d subjects", ids, subs)
	}
}

func TestFanoutConfig(t *testing.T) {
	if _, err := NewFanout(FanoutConfig{}); err == nil {
		t.Error("no client accepted")
	}
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	if _, err := NewFanout(FanoutConfig{Client: c, MaxStaleness: time.Second, PingInterval: time.Second}); err == nil {
		t.Error("MaxStaleness ≤ PingInterval accepted")
	}
	if _, err := NewFanout(FanoutConfig{Client: c, Grace: -1}); err == nil {
		t.Error("negative duration accepted")
	}
	f, err := NewFanout(FanoutConfig{Client: c})
	if err != nil {
		t.Fatal(err)
	}
	if f.keyIDs != "{keygate:revoke}:jti" || f.keySubjects != "{keygate:revoke}:sub" || f.channel != "{keygate:revoke}:events" {
		t.Errorf("default layout: %s %s %s", f.keyIDs, f.keySubjects, f.channel)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Start(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Close = %v", err)
	}
}

func TestMemberEncoding(t *testing.T) {
	for _, tc := range []struct{ iss, id string }{
		{"iss", "jti"}, {"", "jti"}, {"a:b", "c:d"}, {"12:", "3:x"}, {"https://idp.example/", "ü"},
	} {
		m := encodeMember(tc.iss, tc.id)
		iss, id, ok := decodeMember(m)
		if !ok || iss != tc.iss || id != tc.id {
			t.Errorf("%q → %q → %q %q %v", tc.iss+"|"+tc.id, m, iss, id, ok)
		}
		got, ok := decodeMessage(encodeMessage(kindSubject, 1_800_000_000_000_001, m))
		if want := (message{kind: kindSubject, us: 1_800_000_000_000_001, issuer: tc.iss, id: tc.id}); !ok || got != want {
			t.Errorf("message round trip of %q failed: %+v %v", m, got, ok)
		}
	}
	for _, m := range []string{"", ":", "x:", "-1:a", "3:ab", "3:abc", "99999999999999999999:a"} {
		if _, _, ok := decodeMember(m); ok {
			t.Errorf("decodeMember(%q) accepted", m)
		}
		if _, _, _, ok := decodeKeepMember("1 " + m); ok {
			t.Errorf("decodeKeepMember(%q) accepted", "1 "+m)
		}
	}
	km := encodeKeepMember(1_800_000_000_000_000, "a b", "c d")
	if km != "1800000000000000 "+encodeMember("a b", "c d") {
		t.Errorf("encodeKeepMember = %q", km)
	}
	got, ok := decodeMessage(encodeMessage(kindSubjectUntil, 1_900_000_000_000_000, km))
	if want := (message{kind: kindSubjectUntil, us: 1_900_000_000_000_000, before: 1_800_000_000_000_000, issuer: "a b", id: "c d"}); !ok || got != want {
		t.Errorf("keep message round trip: %+v %v", got, ok)
	}
	for _, p := range []string{"k 1 3:abcd", "k x 1 3:abcd", "s 1 1 3:abcd", "k 1", "k 1 x 3:abcd", "x 1 3:abcd", "j 1 3:abc"} {
		if m, ok := decodeMessage(p); ok {
			t.Errorf("decodeMessage(%q) accepted: %+v", p, m)
		}
	}
}

func FuzzDecodeMessage(f *testing.F) {
	f.Add("j 1800000000000000 3:issjti")
	f.Add("s 0 0:sub")
	f.Add("j 1 99:x")
	f.Add("k 1900000000000000 1800000000000000 3:isssub")
	f.Add("k 1 -1 0:s")
	f.Fuzz(func(t *testing.T, p string) {
		m, ok := decodeMessage(p)
		if !ok {
			return
		}
		if m.id == "" {
			t.Fatal("accepted an empty id")
		}
		member := encodeMember(m.issuer, m.id)
		switch m.kind {
		case kindID, kindSubject:
			if m.before != 0 {
				t.Fatalf("%q: a before in a %q message", p, m.kind)
			}
		case kindSubjectUntil:
			member = encodeKeepMember(m.before, m.issuer, m.id)
		default:
			t.Fatalf("%q: accepted kind %q", p, m.kind)
		}
		if again := encodeMessage(m.kind, m.us, member); again != p {
			// Only non-canonical numbers ("+1", "01") may differ.
			if m2, ok2 := decodeMessage(again); !ok2 || m2 != m {
				t.Fatalf("%q re-encodes to %q, which decodes differently", p, again)
			}
		}
	})
}

func TestCeilMicros(t *testing.T) {
	base := time.Unix(1_800_000_000, 0)
	if got := ceilMicros(base); got != base.UnixMicro() {
		t.Errorf("whole µs changed: %d", got)
	}
	if got := ceilMicros(base.Add(1)); got != base.UnixMicro()+1 {
		t.Errorf("1ns past not rounded up: %d", got)
	}
	if got := ceilMicros(base.Add(-1)); got != base.UnixMicro() {
		t.Errorf("1ns before: %d", got)
	}
}

// staleFanout returns a Fanout that was never started, over a memory with
// some revocations, marked current now.
func staleFanout(tb testing.TB, maxStale time.Duration) *Fanout {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	tb.Cleanup(func() { _ = c.Close() })
	mem := revoke.NewMemory()
	mem.Update(func(b *revoke.Batch) {
		for i := range 10000 {
			b.RevokeID("iss", fmt.Sprint("jti-", i), t0.Add(time.Hour))
			b.RevokeSubject("iss", fmt.Sprint("sub-", i), t0)
		}
	})
	f, err := NewFanout(FanoutConfig{Client: c, Memory: mem, MaxStaleness: maxStale, Logger: quiet})
	if err != nil {
		tb.Fatal(err)
	}
	f.markFresh(time.Now())
	return f
}

func TestFanoutRevokedAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	for _, maxStale := range []time.Duration{0, time.Hour} {
		f := staleFanout(t, maxStale)
		allocs := testing.AllocsPerRun(1000, func() {
			if f.Revoked("iss", "jti-x", "sub-x", t0) || !f.Revoked("iss", "jti-7", "", t0) {
				t.Fatal("wrong answer")
			}
		})
		if allocs != 0 {
			t.Errorf("MaxStaleness %v: Revoked allocates %v times per call", maxStale, allocs)
		}
	}
}

func BenchmarkFanoutRevoked(b *testing.B) {
	for _, maxStale := range []time.Duration{0, time.Hour} {
		b.Run(fmt.Sprintf("MaxStaleness=%v", maxStale), func(b *testing.B) {
			f := staleFanout(b, maxStale)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					f.Revoked("iss", "jti-x", "sub-x", t0)
				}
			})
		})
	}
}
