package issuer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/store/sqlite"
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

// TestAdminHashSlots: the admin API's password hashing (a new user, a new
// password) takes a hash slot too, and answers 503 with Retry-After when
// none frees up in time; a password too short is still 400 without one.
func TestAdminHashSlots(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "keygate.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	km := NewKeyManager(st, newSealer(t), KeyPolicy{}, time.Now)
	if err := km.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	svc, err := New(Config{Issuer: testIssuer, Store: st, Keys: km, PasswordHashes: 1, PasswordHashWait: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := NewAdmin(svc, NewBearer(adminToken))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(admin.Handler())
	t.Cleanup(srv.Close)
	call := func(method, path string, body map[string]any) (int, http.Header, map[string]any) {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, srv.URL+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m) //nolint:errcheck // checked through m
		return resp.StatusCode, resp.Header, m
	}
	code, _, u := call("POST", "/v1/admin/users", map[string]any{"username": "alice", "password": "a long password"})
	if code != 201 {
		t.Fatalf("create user: %d %v", code, u)
	}
	svc.hashes.sem <- struct{}{}
	for _, c := range []struct {
		method, path string
		body         map[string]any
	}{
		{"POST", "/v1/admin/users", map[string]any{"username": "bob", "password": "a long password"}},
		{"PATCH", "/v1/admin/users/" + u["id"].(string), map[string]any{"password": "another long password"}},
	} {
		code, h, m := call(c.method, c.path, c.body)
		if code != 503 || m["error"] != "temporarily_unavailable" || h.Get("Retry-After") != "1" {
			t.Errorf("%s %s with every hash slot busy: %d %v, want 503 with Retry-After", c.method, c.path, code, m)
		}
	}
	if code, _, m := call("POST", "/v1/admin/users", map[string]any{"username": "carol", "password": "short"}); code != 400 {
		t.Errorf("a short password with every slot busy: %d %v, want 400", code, m)
	}
	<-svc.hashes.sem
	if code, _, m := call("POST", "/v1/admin/users", map[string]any{"username": "bob", "password": "a long password"}); code != 201 {
		t.Errorf("create user with a free slot: %d %v", code, m)
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
