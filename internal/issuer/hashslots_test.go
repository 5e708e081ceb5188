package issuer

import (
	"fmt"
	"io/fs"
	"math"
	"net/url"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// TestLoginHashSlots: with every password-hash slot taken, a login waits
// PasswordHashWait and is answered 503 temporarily_unavailable with
// Retry-After: 1, having been charged to its address and account first (so
// an attempt over its limits is 429 at once, never waiting for a slot);
// once a slot is free, logins work again.
func TestLoginHashSlots(t *testing.T) {
	f, us := newLoginFixture(t, 100)
	lim := &fixedLimiter{n: 1, seen: map[string]int{}}
	svc, err := New(Config{Issuer: testIssuer, Store: us, Keys: f.keys, Now: func() time.Time { return f.clockNow },
		Limiter: lim, PasswordHashes: 1, PasswordHashWait: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	f.srv.Config.Handler = svc.Handler()
	cl := [2]string{"svc-a", f.secrets["svc-a"]}
	login := url.Values{"username": {"alice"}, "password": {"correct horse battery"}}

	svc.hashes.sem <- struct{}{} // another request's hash holds the one slot
	start := time.Now()
	r := f.post(t, "/v1/login", login, cl, "")
	if r.status != 503 || r.body["error"] != "temporarily_unavailable" || r.header.Get("Retry-After") != "1" {
		t.Fatalf("login with every hash slot busy: %d %v Retry-After %q, want 503 temporarily_unavailable, 1",
			r.status, r.body, r.header.Get("Retry-After"))
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Errorf("refused after %v, before PasswordHashWait", d)
	}
	if len(lim.seen) != 2 {
		t.Errorf("limiter keys charged before the wait: %v, want the address's and the account's", lim.seen)
	}
	// Out of attempts: refused by the limit, not by the busy slots.
	if r := f.post(t, "/v1/login", login, cl, ""); r.status != 429 {
		t.Errorf("an attempt over its limits: %d %v, want 429", r.status, r.body)
	}
	<-svc.hashes.sem
	clear(lim.seen)
	if r := f.post(t, "/v1/login", login, cl, ""); r.status != 200 {
		t.Errorf("login with a free slot: %d %v", r.status, r.body)
	}
}

// TestDefaultPasswordHashes: one slot per GOMAXPROCS, fewer under a memory
// limit that a quarter of would not hold them, never none.
func TestDefaultPasswordHashes(t *testing.T) {
	if n := DefaultPasswordHashes(); n != max(1, runtime.GOMAXPROCS(0)) {
		t.Errorf("DefaultPasswordHashes() = %d without a memory limit, want GOMAXPROCS %d", n, runtime.GOMAXPROCS(0))
	}
	prev := debug.SetMemoryLimit(4 * argonMemory * 1024) // a quarter holds one hash
	defer debug.SetMemoryLimit(prev)
	if n := DefaultPasswordHashes(); n != 1 {
		t.Errorf("DefaultPasswordHashes() = %d under a tight memory limit, want 1", n)
	}
	debug.SetMemoryLimit(1 << 20)
	if n := DefaultPasswordHashes(); n != 1 {
		t.Errorf("DefaultPasswordHashes() = %d under a tiny memory limit, want 1", n)
	}
}

// TestPasswordHashesMemoryLimit: without GOMEMLIMIT, the slots fit within a
// quarter of the container's memory limit, read from cgroup v2's
// memory.max ("max": none) or, where there is none, cgroup v1's
// memory.limit_in_bytes (an unlimited one is about 2^63); GOMEMLIMIT, when
// set, decides alone.
func TestPasswordHashesMemoryLimit(t *testing.T) {
	const (
		v2    = "/sys/fs/cgroup/memory.max"
		v1    = "/sys/fs/cgroup/memory/memory.limit_in_bytes"
		slot  = 4 * argonMemory * 1024 // the memory limit that holds one slot
		unset = math.MaxInt64
	)
	for _, tc := range []struct {
		name    string
		goLimit int64
		files   map[string]string
		want    int
	}{
		{"no limit anywhere", unset, nil, 8},
		{"cgroup v2 max", unset, map[string]string{v2: "max\n"}, 8},
		{"cgroup v2 limit", unset, map[string]string{v2: fmt.Sprintf("%d\n", 3*slot)}, 3},
		{"cgroup v2 tiny limit", unset, map[string]string{v2: "1048576\n"}, 1},
		{"cgroup v2 large limit", unset, map[string]string{v2: fmt.Sprintf("%d\n", 100*slot)}, 8},
		{"cgroup v2 decides over v1", unset, map[string]string{v2: "max\n", v1: fmt.Sprint(2 * slot)}, 8},
		{"cgroup v1 limit", unset, map[string]string{v1: fmt.Sprintf("%d\n", 2*slot)}, 2},
		{"cgroup v1 unlimited", unset, map[string]string{v1: "9223372036854771712\n"}, 8},
		{"cgroup v2 unreadable, v1 limit", unset, map[string]string{v2: "garbage", v1: fmt.Sprint(5 * slot)}, 5},
		{"GOMEMLIMIT decides alone", 2 * slot, map[string]string{v2: fmt.Sprint(100 * slot)}, 2},
		{"GOMEMLIMIT above the cgroup's", 100 * slot, map[string]string{v2: fmt.Sprint(slot)}, 8},
	} {
		read := func(name string) ([]byte, error) {
			if v, ok := tc.files[name]; ok {
				return []byte(v), nil
			}
			return nil, fs.ErrNotExist
		}
		if got := passwordHashes(8, tc.goLimit, read); got != tc.want {
			t.Errorf("%s: %d slots, want %d", tc.name, got, tc.want)
		}
	}
}
