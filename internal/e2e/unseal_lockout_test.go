package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/ratelimit"
)

// TestUnsealNotLockedOutByOtherRefusals: a node restarted sealed keeps
// refusing its clients' requests before authentication (it cannot
// authenticate them), and those refusals are limited per address. The
// operator's unseal, from an address those clients share (the host behind
// a local reverse proxy without trusted_proxies, a NAT), must not be
// refused because of them: clients that keep retrying, or anyone sending
// a request a second, would keep the node sealed.
func TestUnsealNotLockedOutByOtherRefusals(t *testing.T) {
	cfg, _, keyFile := rotatingConfig(t)
	cfg.Node.RefusalLimit = ratelimit.Limit{}
	l := startLive(t, cfg)
	if resp, body := do(t, http.MethodPost, l.admin+"/v1/sys/seal", "{}", adminJSON(cfg.AdminToken)); resp.StatusCode != http.StatusOK {
		t.Fatalf("seal: %d %s", resp.StatusCode, body)
	}
	// Clients of the traffic listener, from the operator's address.
	unknown := form()
	unknown.Set("Authorization", basicAuth("kgc_app", "secret"))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			resp, _ := do(t, http.MethodPost, l.base+"/oauth2/token", "grant_type=client_credentials", unknown)
			mu.Lock()
			codes[resp.StatusCode]++
			mu.Unlock()
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	waitUntil(t, "the clients' refusals reach their address's limit", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return codes[http.StatusTooManyRequests] > 0
	})
	key, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	right, _ := json.Marshal(map[string]string{"key": strings.TrimSpace(string(key))})
	resp, body := do(t, http.MethodPost, l.admin+"/v1/sys/unseal", string(right), jsonHeader)
	if resp.StatusCode != http.StatusOK || l.Sealed() {
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("the operator's unseal with the right key while the clients are refused (%v): %d %s", codes, resp.StatusCode, body)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
