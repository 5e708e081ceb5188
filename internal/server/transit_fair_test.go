package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/mint"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/transit"
	"github.com/keygate/keygate/internal/transitapi"
)

// probe is what one of beta's requests met in the server: how many
// private-key operations got a worker while it was there (its own
// included), and how long it took.
type probe struct {
	ops  uint64
	took time.Duration
}

// TestTransitFairSigning: tenant alpha floods the node's one private-key
// worker with twelve concurrent 50-item rsa-3072 sign batches, through the
// HTTP API; meanwhile every single rsa-2048 signature of tenant beta
// succeeds, and while each is in the server at most workers + 2 private-key
// operations get a worker: the one of alpha's that held it when beta's
// came, beta's own, and alpha's next, which starts as beta's ends. Beta's
// wait is thus counted in operations, what a fair queue decides, rather
// than in wall-clock time, which on a shared machine measures the machine
// as much as the queue (the times are logged): each of beta's signatures
// waits for at most one of alpha's operations per worker, then its own,
// whatever alpha has queued. First come first served, each would wait
// behind the dozen of alpha's items queued ahead of it (or be refused 503,
// as before the workers were shared fairly). Alpha's items cost more than
// the time beta's request takes to be read and queued, so that none starts
// in between.
func TestTransitFairSigning(t *testing.T) {
	const workers = 1
	gw := &config.Config{Transit: config.Transit{PrivateKeyWorkers: workers}}
	gw.SetDefaults()
	// A probe is timed from when the server has read the request's
	// headers to when the transit API has decided its answer (Observe).
	var (
		eng    *transit.Engine
		before atomic.Uint64
		start  atomic.Int64
	)
	probes := make(chan probe, 1)
	observe := func(_ http.ResponseWriter, _ *http.Request, o transitapi.Outcome) error {
		if o.Key == "probe" && o.Operation == "transit.sign" {
			probes <- probe{eng.PrivateKeyStats().Started - before.Load(), time.Since(time.Unix(0, start.Load()))}
		}
		return nil
	}
	s, err := New(t.Context(), Config{Gateway: gw, TransitObserve: observe,
		Node: &node.Config{DataDir: filepath.Join(t.TempDir(), "data"), Issuer: testIssuer, Audience: testAudience, Dev: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	eng = s.transitKeys.Engine()
	h := s.Handler()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/transit/sign/probe" {
			before.Store(eng.PrivateKeyStats().Started)
			start.Store(time.Now().UnixNano())
		}
		h.ServeHTTP(w, r)
	}))
	defer ts.Close()

	token := func(tenant string) string {
		if err := s.Node().Store().CreateTenant(t.Context(), store.Tenant{Name: tenant, CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		tok, err := s.Node().Mint(mint.Claims{Subject: tenant + "-app", Audience: []string{testAudience}, TTL: time.Hour,
			Scope: "transit:admin transit:sign:*", Extra: map[string]json.RawMessage{"tenant": json.RawMessage(strconv.Quote(tenant))}})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	send := func(ctx context.Context, tok, path, body string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, "POST", ts.URL+path, strings.NewReader(body))
		if err != nil {
			return 0, "", err
		}
		req.Header.Set("X-Vault-Token", tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	alpha, beta := token("alpha"), token("beta")
	for _, k := range []struct{ tok, path, typ string }{{alpha, "/v1/transit/keys/flood", "rsa-3072"}, {beta, "/v1/transit/keys/probe", "rsa-2048"}} {
		if st, b, err := send(t.Context(), k.tok, k.path, `{"type":"`+k.typ+`"}`); st != http.StatusOK || err != nil {
			t.Fatalf("%s: %d %s %v", k.path, st, b, err)
		}
	}
	one := `{"input":"` + base64.StdEncoding.EncodeToString([]byte("one signature")) + `"}`
	sign := func() probe {
		t.Helper()
		if st, b, err := send(t.Context(), beta, "/v1/transit/sign/probe", one); st != http.StatusOK || err != nil {
			t.Fatalf("beta's signature: %d %s %v", st, b, err)
		}
		return <-probes
	}
	var solo []time.Duration
	for range 8 {
		solo = append(solo, sign().took)
	}
	slices.Sort(solo)
	ref := solo[len(solo)/2]

	ctx, stop := context.WithCancel(t.Context())
	var (
		wg               sync.WaitGroup
		batches, refused atomic.Int64
	)
	flood := `{"batch_input":[` + strings.TrimSuffix(strings.Repeat(one+",", 50), ",") + `]}`
	for range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				st, _, err := send(ctx, alpha, "/v1/transit/sign/flood", flood)
				switch {
				case err != nil: // stopped
				case st == http.StatusOK:
					batches.Add(1)
				default:
					refused.Add(1)
				}
			}
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for eng.PrivateKeyStats().Waiting < 11 { // (nearly) every flooder's batch is in
		if time.Now().After(deadline) {
			t.Fatalf("alpha's flood never queued: %+v", eng.PrivateKeyStats())
		}
		time.Sleep(time.Millisecond)
	}
	var under []probe
	queued := 0
	for range 20 {
		queued = max(queued, eng.PrivateKeyStats().Waiting)
		under = append(under, sign())
	}
	stop()
	wg.Wait()

	var ops []uint64
	var took []time.Duration
	for _, p := range under {
		ops, took = append(ops, p.ops), append(took, p.took)
	}
	slices.Sort(took)
	t.Logf("beta's rsa-2048 signature alone: median %v; under alpha's flood (up to %d of alpha's operations waiting): "+
		"private-key operations started while each was in the server %v, times median %v (%.1f×), max %v (%.1f×); alpha: %d batches done, %d refused",
		ref, queued, ops, took[len(took)/2], float64(took[len(took)/2])/float64(ref), took[len(took)-1],
		float64(took[len(took)-1])/float64(ref), batches.Load(), refused.Load())
	for i, n := range ops {
		if n > workers+2 {
			t.Errorf("beta's signature %d waited while %d private-key operations got a worker (at most %d): %v", i, n, workers+2, ops)
		}
	}
	if refused.Load() != 0 {
		t.Errorf("alpha's batches were refused %d times: its twelve requests are within its queue", refused.Load())
	}
}

// TestTransitBusy: a client with transit.caller_queue requests with
// private-key work in progress is answered 429 with Retry-After and Vault's
// envelope for its next one; another client of its tenant, and another
// tenant, are served meanwhile.
func TestTransitBusy(t *testing.T) {
	gw := &config.Config{Transit: config.Transit{PrivateKeyWorkers: 1, CallerQueue: 1}}
	gw.SetDefaults()
	s, err := New(t.Context(), Config{Gateway: gw,
		Node: &node.Config{DataDir: filepath.Join(t.TempDir(), "data"), Issuer: testIssuer, Audience: testAudience, Dev: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	eng := s.transitKeys.Engine()
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	token := func(tenant, client string) string {
		tok, err := s.Node().Mint(mint.Claims{Subject: client, Audience: []string{testAudience}, TTL: time.Hour,
			Scope: "transit:admin transit:sign:*", Extra: map[string]json.RawMessage{"tenant": json.RawMessage(strconv.Quote(tenant)),
				"client_id": json.RawMessage(strconv.Quote(client))}})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	send := func(ctx context.Context, tok, path, body string) (*http.Response, string) {
		req, err := http.NewRequestWithContext(ctx, "POST", ts.URL+path, strings.NewReader(body))
		if err != nil {
			t.Error(err)
			return nil, ""
		}
		req.Header.Set("X-Vault-Token", tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	if err := s.Node().Store().CreateTenant(t.Context(), store.Tenant{Name: "beta", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	busy, other, beta := token("default", "busy-app"), token("default", "other-app"), token("beta", "beta-app")
	for _, tok := range []string{busy, beta} {
		if resp, b := send(t.Context(), tok, "/v1/transit/keys/sig", `{"type":"ecdsa-p256"}`); resp == nil || resp.StatusCode != 200 {
			t.Fatalf("key: %s", b)
		}
	}
	if resp, b := send(t.Context(), busy, "/v1/transit/keys/rsa", `{"type":"rsa-2048"}`); resp == nil || resp.StatusCode != 200 {
		t.Fatalf("key: %s", b)
	}
	one := `{"input":"` + base64.StdEncoding.EncodeToString([]byte("m")) + `"}`
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { // busy-app's batch holds its one place
		defer close(done)
		send(ctx, busy, "/v1/transit/sign/rsa", `{"batch_input":[`+strings.TrimSuffix(strings.Repeat(one+",", 200), ",")+`]}`)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for eng.PrivateKeyStats().Running == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the batch never started")
		}
		time.Sleep(time.Millisecond)
	}
	for _, tc := range []struct {
		name, tok string
		status    int
	}{
		{"the same client", busy, http.StatusTooManyRequests},
		{"another client of its tenant", other, http.StatusOK},
		{"another tenant", beta, http.StatusOK},
	} {
		resp, b := send(t.Context(), tc.tok, "/v1/transit/sign/sig", one)
		if resp == nil || resp.StatusCode != tc.status {
			t.Errorf("%s: %v %s, want %d", tc.name, resp, b, tc.status)
			continue
		}
		if tc.status == http.StatusTooManyRequests && (resp.Header.Get("Retry-After") != "1" ||
			b != `{"errors":["too many asymmetric-key operations of this client or tenant in progress; retry later"]}`+"\n") {
			t.Errorf("%s: Retry-After %q, body %s", tc.name, resp.Header.Get("Retry-After"), b)
		}
	}
	stop()
	<-done
}
