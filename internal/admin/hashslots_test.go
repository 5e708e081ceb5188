package admin

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/issuer"
)

// TestAdminHashSlots: the admin API's password hashing (a new user, a new
// password) takes a hash slot too, and answers 503 with Retry-After when
// none frees up in time; a password too short is still 400 without one.
func TestAdminHashSlots(t *testing.T) {
	st := openStore(t)
	held := newHeldRand()
	svc, _, srv, _ := newService(t, st, issuer.Config{Issuer: testIssuer, Keys: newKeys(t, st, time.Now), Rand: held,
		PasswordHashes: 1, PasswordHashWait: 10 * time.Millisecond})
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
	// The only slot taken: a hash that holds it while it reads its salt.
	held.arm()
	holder := make(chan error, 1)
	go func() { _, err := svc.HashPassword(context.Background(), "a password held"); holder <- err }()
	<-held.holding
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
	close(held.release)
	if err := <-holder; err != nil {
		t.Fatalf("the hash holding the slot: %v", err)
	}
	if code, _, m := call("POST", "/v1/admin/users", map[string]any{"username": "bob", "password": "a long password"}); code != 201 {
		t.Errorf("create user with a free slot: %d %v", code, m)
	}
}

// heldRand is crypto/rand whose next read once armed waits for release: a
// password hash reading its salt from it holds its hash slot until then.
type heldRand struct {
	mu      sync.Mutex
	armed   bool
	holding chan struct{} // closed when the armed read has begun
	release chan struct{}
}

func newHeldRand() *heldRand {
	return &heldRand{holding: make(chan struct{}), release: make(chan struct{})}
}

func (h *heldRand) arm() {
	h.mu.Lock()
	h.armed = true
	h.mu.Unlock()
}

func (h *heldRand) Read(p []byte) (int, error) {
	h.mu.Lock()
	armed := h.armed
	h.armed = false
	h.mu.Unlock()
	if armed {
		close(h.holding)
		<-h.release
	}
	return rand.Read(p)
}
