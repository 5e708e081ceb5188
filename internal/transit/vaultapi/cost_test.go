package vaultapi_test

import (
	"encoding/base64"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/server"
	"github.com/keygate/keygate/internal/transit/vaultapi"
)

// startTransit starts a server with the transit section tc.
func startTransit(t *testing.T, tc config.Transit, observe func(http.ResponseWriter, *http.Request, vaultapi.Outcome) error) *env {
	gw := &config.Config{Transit: tc}
	gw.SetDefaults()
	return startConfig(t, server.Config{Gateway: gw, TransitObserve: observe})
}

// batchOf is a batch_input of n items with the given members.
func batchOf(n int, item string) string {
	return `{"batch_input":[` + strings.TrimSuffix(strings.Repeat(item+",", n), ",") + `]}`
}

// TestBatchCostLimit: a batch whose items cost more than
// transit.max_batch_cost is refused 413 in Vault's shape, saying what it
// costs, recorded with the reason over_budget, before any item is done;
// one within the budget is served, however many items it has.
func TestBatchCostLimit(t *testing.T) {
	var mu sync.Mutex
	var reasons []string
	e := startTransit(t, config.Transit{MaxBatchCost: 10_000}, func(_ http.ResponseWriter, _ *http.Request, o vaultapi.Outcome) error {
		mu.Lock()
		defer mu.Unlock()
		reasons = append(reasons, o.Reason)
		return nil
	})
	tok := e.token("default", allScopes...)
	e.must(tok, "POST", "/v1/transit/keys/aes", "")
	e.must(tok, "POST", "/v1/transit/keys/ec", `{"type":"ecdsa-p256"}`)
	in := `{"input":"` + base64.StdEncoding.EncodeToString([]byte("m")) + `"}`
	for _, tc := range []struct {
		name, path, body string
		status           int
		reason           string
	}{
		{"10,000 aes encryptions (cost 10,000)", "/v1/transit/encrypt/aes", batchOf(10_000, `{"plaintext":""}`), 200, ""},
		{"90 ecdsa-p256 signatures (cost 9,900)", "/v1/transit/sign/ec", batchOf(90, in), 200, ""},
		{"91 ecdsa-p256 signatures (cost 10,010)", "/v1/transit/sign/ec", batchOf(91, in), 413, "over_budget"},
		{"41 ecdsa-p256 verifications (cost 10,250)", "/v1/transit/verify/ec", batchOf(41, `{"input":"bQ==","signature":"vault:v1:AA=="}`), 413, "over_budget"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			reasons = reasons[:0]
			mu.Unlock()
			st, b := e.call(tok, "POST", tc.path, tc.body)
			if tc.status == 200 {
				if st != 200 {
					t.Fatalf("%d %.300s", st, b)
				}
				return
			}
			expect(t, tc.name, st, b, tc.status, "over the limit of 10000 per request")
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(reasons, []string{tc.reason}) {
				t.Errorf("recorded reasons %q, want %q", reasons, tc.reason)
			}
		})
	}
}
