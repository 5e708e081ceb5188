package kvapi_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	vault "github.com/hashicorp/vault/api"

	"github.com/keygate/keygate/internal/rootkey"
	"github.com/keygate/keygate/internal/rootkey/tenantkey"
	"github.com/keygate/keygate/internal/secrets"
	"github.com/keygate/keygate/internal/secrets/kvapi"
	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/store/sqlite"
	"github.com/keygate/keygate/internal/vaultauth/vaultauthtest"
)

// newService is the engine the tests run against: the real one, on a
// SQLite store in a directory of the test's own, with the tenants the
// tests use.
var newService = func(t testing.TB) secrets.Service {
	t.Helper()
	return newServiceAt(t, filepath.Join(t.TempDir(), "keygate.db"))
}

// newServiceAt is newService on the SQLite file at path.
func newServiceAt(t testing.TB, path string) secrets.Service {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	root, err := rootkey.Generate(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ring, err := rootkey.New(rootkey.Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	tenants := []string{"alpha", "beta", "gamma"}
	for i := range 16 {
		tenants = append(tenants, fmt.Sprint("t", i))
	}
	for _, name := range tenants {
		if err := st.CreateTenant(ctx, store.Tenant{Name: name, CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	e, err := secrets.New(secrets.Options{Store: st, Keys: tenantkey.New(tenantkey.Config{Store: st, Root: ring})})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// allScopes grant every KV operation on every path.
var allScopes = []string{"secrets:read:*", "secrets:write:*", "secrets:delete:*", "secrets:list:*", "secrets:admin"}

// env is the API over newService's store on a loopback listener, with
// the tests' token service.
type env struct {
	t        testing.TB
	url      string
	tokens   *vaultauthtest.Service
	sealed   atomic.Bool
	mu       sync.Mutex
	outcomes []kvapi.Outcome
}

func start(t testing.TB) *env {
	t.Helper()
	return startWith(t, newService(t))
}

// startWith is start over svc.
func startWith(t testing.TB, svc secrets.Service) *env {
	t.Helper()
	e := &env{t: t, tokens: vaultauthtest.New(t)}
	h, err := kvapi.New(kvapi.Options{Secrets: svc, Verifier: e.tokens.Verifier, Sealed: e.sealed.Load,
		Observe: func(_ http.ResponseWriter, _ *http.Request, o kvapi.Outcome) error {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.outcomes = append(e.outcomes, o)
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	e.url = ts.URL
	return e
}

// last is the outcome of the last request.
func (e *env) last() kvapi.Outcome {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.outcomes) == 0 {
		return kvapi.Outcome{}
	}
	return e.outcomes[len(e.outcomes)-1]
}

// token mints a token of tenant with scopes.
func (e *env) token(tenant string, scopes ...string) string {
	e.t.Helper()
	return e.tokens.Token(e.t, tenant, "kgc_test", scopes...)
}

// client is Vault's Go client pointed at e with a token of tenant
// granting every scope.
func (e *env) client(tenant string) *vault.Client {
	e.t.Helper()
	cfg := vault.DefaultConfig()
	cfg.Address, cfg.MaxRetries = e.url, 0
	c, err := vault.NewClient(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	c.SetToken(e.token(tenant, allScopes...))
	return c
}

// call sends a request with tok as X-Vault-Token (none if empty) and
// returns the status and body.
func (e *env) call(tok, method, path, body string, hdr ...string) (int, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("X-Vault-Token", tok)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// errorsOf decodes Vault's error envelope.
func errorsOf(t testing.TB, body []byte) []string {
	t.Helper()
	var v struct {
		Errors []string `json:"errors"`
	}
	if err := json.Unmarshal(body, &v); err != nil || v.Errors == nil {
		t.Fatalf("not Vault's error envelope: %s (%v)", body, err)
	}
	return v.Errors
}

// statusOf is the HTTP status of a Vault client error.
func statusOf(err error) int {
	var re *vault.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode
	}
	return 0
}
