package vaultapi_test

import (
	"bytes"
	"context"
	"crypto/aes"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/mint"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/server"
	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/transit/vaultapi"
)

const audience = "https://api.kg.test"

// allScopes grant every transit operation.
var allScopes = []string{"transit:admin", "transit:encrypt:*", "transit:decrypt:*", "transit:rewrap:*", "transit:datakey:*",
	"transit:sign:*", "transit:verify:*", "transit:hmac:*", "transit:read:*", "transit:random", "transit:hash"}

// env is a keygate server in dev mode (SQLite, a generated root key) with
// its traffic handler on a loopback listener.
type env struct {
	t    testing.TB
	srv  *server.Server
	node *node.Node
	url  string
}

func start(t testing.TB) *env { return startWith(t, nil) }

// observedEnv is an env that keeps the outcome of its last request.
type observedEnv struct {
	*env
	mu   sync.Mutex
	last vaultapi.Outcome
}

// startObserved starts a server whose last transit outcome lastOutcome
// returns.
func startObserved(t testing.TB) *observedEnv {
	o := &observedEnv{}
	o.env = startWith(t, func(_ http.ResponseWriter, _ *http.Request, out vaultapi.Outcome) error {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.last = out
		return nil
	})
	return o
}

func (o *observedEnv) lastOutcome() vaultapi.Outcome {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.last
}

// startWith starts a server whose transit requests observe sees.
func startWith(t testing.TB, observe func(http.ResponseWriter, *http.Request, vaultapi.Outcome) error) *env {
	return startAudit(t, observe, config.Audit{})
}

// startAudit starts a server with the audit log a configures (the zero
// Audit: the default, the file sink in the data directory, fsynced once a
// second).
func startAudit(t testing.TB, observe func(http.ResponseWriter, *http.Request, vaultapi.Outcome) error, a config.Audit) *env {
	return startConfig(t, server.Config{Node: &node.Config{Audit: a}, TransitObserve: observe})
}

// startConfig starts a dev-mode server of cfg, its node's data directory,
// issuer and audience filled in.
func startConfig(t testing.TB, cfg server.Config) *env {
	t.Helper()
	if cfg.Node == nil {
		cfg.Node = &node.Config{}
	}
	cfg.Node.DataDir, cfg.Node.Issuer, cfg.Node.Audience, cfg.Node.Dev = filepath.Join(t.TempDir(), "data"), "https://kg.test", audience, true
	s, err := server.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return &env{t: t, srv: s, node: s.Node(), url: ts.URL}
}

// tenant makes a tenant.
func (e *env) tenant(name string) {
	e.t.Helper()
	if err := e.node.Store().CreateTenant(context.Background(), store.Tenant{Name: name, CreatedAt: time.Now()}); err != nil {
		e.t.Fatal(err)
	}
}

// token mints a token of the node for tenant with scopes. (A token
// without a tenant claim, which transit refuses, is made with mint.Sign:
// node.Mint adds the default tenant's.)
func (e *env) token(tenant string, scopes ...string) string {
	e.t.Helper()
	extra := map[string]json.RawMessage{"client_id": json.RawMessage(`"kgc_test"`), "tenant": json.RawMessage(strconv.Quote(tenant))}
	tok, err := e.node.Mint(mint.Claims{Subject: "kgc_test", Audience: []string{audience}, Scope: strings.Join(scopes, " "),
		TTL: time.Hour, Extra: extra})
	if err != nil {
		e.t.Fatal(err)
	}
	return tok
}

// call sends a request with tok as X-Vault-Token and returns the status
// and body.
func (e *env) call(tok, method, path, body string) (int, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("X-Vault-Token", tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// data decodes the envelope's data.
func data(t testing.TB, body []byte) map[string]any {
	t.Helper()
	var env struct {
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return env.Data
}

// kwpWrap is RFC 5649's AES key wrap with padding, written from the RFC
// for the tests (independent of package kwp).
func kwpWrap(kek, p []byte) []byte {
	block, err := aes.NewCipher(kek)
	if err != nil {
		panic(err)
	}
	var aiv [8]byte
	copy(aiv[:], []byte{0xA6, 0x59, 0x59, 0xA6})
	binary.BigEndian.PutUint32(aiv[4:], uint32(len(p)))
	padded := append(bytes.Clone(p), make([]byte, (8-len(p)%8)%8)...)
	if len(padded) == 8 {
		out := make([]byte, 16)
		block.Encrypt(out, append(aiv[:], padded...))
		return out
	}
	n := len(padded) / 8
	a := aiv
	r := make([][8]byte, n)
	for i := range r {
		copy(r[i][:], padded[8*i:])
	}
	var b [16]byte
	for j := range 6 {
		for i := range n {
			copy(b[:8], a[:])
			copy(b[8:], r[i][:])
			block.Encrypt(b[:], b[:])
			t := uint64(n*j + i + 1)
			binary.BigEndian.PutUint64(a[:], binary.BigEndian.Uint64(b[:8])^t)
			copy(r[i][:], b[8:])
		}
	}
	out := append([]byte{}, a[:]...)
	for i := range r {
		out = append(out, r[i][:]...)
	}
	return out
}
