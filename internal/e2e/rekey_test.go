package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	vault "github.com/hashicorp/vault/api"

	"github.com/keygate/keygate/internal/audit"
	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/rootkey"
	"github.com/keygate/keygate/internal/server"
	"github.com/keygate/keygate/internal/store"
)

// TestRekeyUnderLoad: two nodes of a fleet (PostgreSQL, Redis) serve token
// issuance, transit and secrets without a pause while the root key is
// rotated through the admin API, with a hundred tenants' data keys to
// rewrap at 50 a second: not one request fails, a value written before is
// read after, and both nodes end holding the new key only. The rotation is
// audited with the new key's ID, never a key.
func TestRekeyUnderLoad(t *testing.T) {
	if os.Getenv("REDIS_URL") == "" || os.Getenv("DATABASE_URL") == "" {
		t.Skip("needs PostgreSQL and Redis: DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable REDIS_URL=redis://127.0.0.1:6379/0")
	}
	redisURL, prefix := redisPrefix(t)
	dbURL := newSchema(t)
	dir := t.TempDir()
	oldKey, newKey := filepath.Join(dir, "old.key"), filepath.Join(dir, "new.key")
	for _, f := range []string{oldKey, newKey} {
		if err := rootkey.GenerateKeyFile(f, rand.Reader); err != nil {
			t.Fatal(err)
		}
	}
	sink := &captureSink{}
	nodeCfg := func(name, key string) *node.Config {
		return &node.Config{DataDir: filepath.Join(dir, name), Issuer: "https://keygate.rekey.test", Audience: testAudience,
			Audit: config.Audit{File: config.AuditFile{Disabled: true}}, AuditSinks: []audit.Sink{sink},
			TokenService: config.TokenService{DatabaseURL: dbURL, RootKeyFile: key, RedisURL: redisURL, RedisPrefix: prefix}}
	}
	a := startLive(t, server.Config{AdminToken: auditAdminToken, Node: nodeCfg("a", oldKey)})
	b := startLive(t, server.Config{AdminToken: auditAdminToken, Node: nodeCfg("b", oldKey)})

	id, secret := newClient(t, a, "transit:admin", "transit:encrypt:*", "transit:decrypt:*", "secrets:read:*", "secrets:write:*")
	tok := clientToken(t, a.base, id, secret)
	ca, cb := strictVaultClient(t, a, tok), strictVaultClient(t, b, tok)
	ctx := t.Context()
	if _, err := ca.Logical().WriteWithContext(ctx, "transit/keys/app", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.KVv2("secret").Put(ctx, "before", map[string]any{"v": "written before"}); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		name := fmt.Sprintf("t%03d", i)
		if err := a.Node.Store().CreateTenant(ctx, store.Tenant{Name: name, CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Node.TenantKeys().Fresh(ctx, name); err != nil {
			t.Fatal(err)
		}
	}

	// The load: each worker issues a token at one node, encrypts there and
	// decrypts at the other, writes a secret there and reads it at the other.
	var ops, failed atomic.Int64
	var firstErr atomic.Value
	fail := func(err error) {
		failed.Add(1)
		firstErr.CompareAndSwap(nil, err)
	}
	lctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			from, cfrom, cto := a, ca, cb
			if w%2 == 1 {
				from, cfrom, cto = b, cb, ca
			}
			for i := 0; lctx.Err() == nil; i++ {
				if i%20 == 0 { // within the client's issuance limit
					if _, err := clientToken2(from.base, id, secret); err != nil {
						fail(fmt.Errorf("token at %s: %w", from.base, err))
					}
					ops.Add(1)
				}
				plain := base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "value %d", i))
				enc, err := cfrom.Logical().WriteWithContext(ctx, "transit/encrypt/app", map[string]any{"plaintext": plain})
				if err != nil {
					fail(fmt.Errorf("encrypt: %w", err))
				} else if dec, err := cto.Logical().WriteWithContext(ctx, "transit/decrypt/app",
					map[string]any{"ciphertext": enc.Data["ciphertext"]}); err != nil || dec.Data["plaintext"] != plain {
					fail(fmt.Errorf("decrypt: %v %v", dec, err))
				}
				path := fmt.Sprintf("w%d/s%d", w, i%5)
				if _, err := cfrom.KVv2("secret").Put(ctx, path, map[string]any{"i": fmt.Sprint(i)}); err != nil {
					fail(fmt.Errorf("kv put: %w", err))
				} else if s, err := cto.KVv2("secret").Get(ctx, path); err != nil || s.Data["i"] != fmt.Sprint(i) {
					fail(fmt.Errorf("kv get at the other node: %v %v", s, err))
				}
				ops.Add(4)
			}
		}()
	}

	time.Sleep(500 * time.Millisecond)
	text, err := os.ReadFile(newKey)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"key": strings.TrimSpace(string(text)), "current_key": readKey(t, oldKey), "rate": 50})
	if resp, out := do(t, http.MethodPost, a.admin+"/v1/sys/rekey", `{"key":"`+readKey(t, newKey)+`"}`, adminJSON(auditAdminToken)); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a rotation without the current key: %d %s, want 400", resp.StatusCode, out)
	}
	resp, out := do(t, http.MethodPost, a.admin+"/v1/sys/rekey", string(body), adminJSON(auditAdminToken))
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /v1/sys/rekey: %d %s", resp.StatusCode, out)
	}
	var st struct{ NewKeyID string }
	sawProgress := false
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, out = do(t, http.MethodGet, b.admin+"/v1/sys/rekey", "", adminJSON(auditAdminToken))
		var s map[string]any
		json.Unmarshal(out, &s)
		if s["state"] == "rewrapping" {
			sawProgress = true
		}
		if resp.StatusCode == http.StatusOK && s["state"] == "done" {
			st.NewKeyID = fmt.Sprint(s["new_key_id"])
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rotation did not finish: %d %s", resp.StatusCode, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second) // load on the finished rotation too
	stop()
	wg.Wait()
	t.Logf("%d requests during the rotation, %d failed", ops.Load(), failed.Load())
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d requests failed during the rotation; the first: %v", n, firstErr.Load())
	}
	if !sawProgress {
		t.Error("the rotation was never seen under way")
	}
	if ops.Load() < 50 {
		t.Fatalf("only %d requests ran during the rotation", ops.Load())
	}
	if s, err := cb.KVv2("secret").Get(ctx, "before"); err != nil || s.Data["v"] != "written before" {
		t.Errorf("the secret written before: %v, %v", s, err)
	}
	for _, l := range []*live{a, b} {
		if ids, _ := l.Node.Keyring().KeyIDs(); len(ids) != 1 || ids[0].String() != st.NewKeyID {
			t.Errorf("node %s holds %v, want only %s", l.base, ids, st.NewKeyID)
		}
	}

	raw := sink.All()
	var rekeys int
	for _, r := range sink.Take(t) {
		if r.Operation != "sys.rekey" || r.Result != audit.ResultOK {
			continue
		}
		rekeys++
		if r.Key.Name != st.NewKeyID || r.Principal.Kind != audit.PrincipalAdmin {
			t.Errorf("the rotation's record: %+v", r)
		}
	}
	if rekeys != 1 {
		t.Errorf("%d successful sys.rekey records, want 1", rekeys)
	}
	if strings.Contains(string(raw), strings.TrimSpace(string(text))) {
		t.Error("the new root key reached the audit log")
	}
}

// strictVaultClient is a Vault client of l with the token tok that does
// not retry: a failure must show, not be retried away.
func strictVaultClient(t *testing.T, l *live, tok string) *vault.Client {
	t.Helper()
	cfg := vault.DefaultConfig()
	cfg.Address = l.base
	cfg.MaxRetries = 0
	c, err := vault.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.SetToken(tok)
	return c
}

// newClient creates a client with scopes at l and returns its id and secret.
func newClient(t *testing.T, l *live, scopes ...string) (id, secret string) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"name": "app", "scopes": scopes})
	resp, body := do(t, http.MethodPost, l.admin+"/v1/admin/clients", string(b), adminJSON(auditAdminToken))
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create client: %d %s", resp.StatusCode, body)
	}
	var c struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatal(err)
	}
	return c.ClientID, c.ClientSecret
}

// TestRekeyEndpoint: POST and GET /v1/sys/rekey take the admin token only,
// refuse what a browser page could send and every malformed body with a
// clear answer and nothing started, refuse a second rotation while one
// runs and any on a sealed node; a dev node's generated key file follows
// the rotation.
func TestRekeyEndpoint(t *testing.T) {
	const admin = "admin-token-0123456789abcdef0123456789"
	dir := filepath.Join(t.TempDir(), "data")
	l := startLive(t, server.Config{AdminToken: admin, Node: &node.Config{DataDir: dir, Issuer: testIssuer, Audience: testAudience, Dev: true}})
	next := randomKey(t)
	good := `{"key":"` + next + `"}`
	jh := http.Header{"Content-Type": {"application/json"}}
	browser := adminJSON(admin)
	browser.Set("Origin", "https://evil.example")
	plain := bearer(admin)
	plain.Set("Content-Type", "text/plain")
	for _, c := range []struct {
		name   string
		method string
		body   string
		h      http.Header
		want   int
	}{
		{"status without the admin token", http.MethodGet, "", nil, http.StatusUnauthorized},
		{"a lowercase method", "post", good, adminJSON(admin), http.StatusMethodNotAllowed},
		{"another method", http.MethodPut, good, adminJSON(admin), http.StatusMethodNotAllowed},
		{"start without the admin token", http.MethodPost, good, jh, http.StatusUnauthorized},
		{"a wrong admin token", http.MethodPost, good, adminJSON(admin + "x"), http.StatusUnauthorized},
		{"from a browser page", http.MethodPost, good, browser, http.StatusForbidden},
		{"not JSON", http.MethodPost, good, plain, http.StatusUnsupportedMediaType},
		{"an empty body", http.MethodPost, "", adminJSON(admin), http.StatusBadRequest},
		{"an unknown field", http.MethodPost, `{"key":"` + next + `","force":true}`, adminJSON(admin), http.StatusBadRequest},
		{"trailing data", http.MethodPost, good + `{}`, adminJSON(admin), http.StatusBadRequest},
		{"a key that is not base64", http.MethodPost, `{"key":"not a key"}`, adminJSON(admin), http.StatusBadRequest},
		{"a short key", http.MethodPost, `{"key":"AAAA"}`, adminJSON(admin), http.StatusBadRequest},
		{"a negative rate", http.MethodPost, `{"key":"` + next + `","rate":-1}`, adminJSON(admin), http.StatusBadRequest},
		{"no key", http.MethodPost, `{}`, adminJSON(admin), http.StatusBadRequest},
		{"the current key", http.MethodPost, `{"key":"` + readKey(t, filepath.Join(dir, node.RootKeyFile)) + `"}`, adminJSON(admin), http.StatusBadRequest},
		{"a passphrase on a key node", http.MethodPost, `{"passphrase":"` + testPassphrase + `"}`, adminJSON(admin), http.StatusBadRequest},
		// The last "key" is one a rotation would start with.
		{"a field twice", http.MethodPost, `{"key":"` + randomKey(t) + `","key":"` + next + `"}`, adminJSON(admin), http.StatusBadRequest},
		{"a field twice, a rate", http.MethodPost, `{"key":"` + next + `","rate":5,"rate":0}`, adminJSON(admin), http.StatusBadRequest},
		{"a field twice in two cases", http.MethodPost, `{"key":"` + randomKey(t) + `","KEY":"` + next + `"}`, adminJSON(admin), http.StatusBadRequest},
		{"a field in another case", http.MethodPost, `{"Key":"` + next + `"}`, adminJSON(admin), http.StatusBadRequest},
	} {
		resp, body := do(t, c.method, l.admin+"/v1/sys/rekey", c.body, c.h)
		if resp.StatusCode != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, resp.StatusCode, body, c.want)
		}
		if c.want == http.StatusBadRequest && !strings.Contains(string(body), "error_description") {
			t.Errorf("%s: %s, want a described error", c.name, body)
		}
	}
	// A field given twice is named in the refusal; its values are not.
	other := randomKey(t)
	if resp, body := do(t, http.MethodPost, l.admin+"/v1/sys/rekey", `{"key":"`+other+`","key":"`+next+`"}`, adminJSON(admin)); resp.StatusCode != http.StatusBadRequest ||
		!strings.Contains(string(body), `key \"key\" appears twice`) || strings.Contains(string(body), next) || strings.Contains(string(body), other) {
		t.Errorf("a key given twice: %d %s, want 400 naming the field and no key", resp.StatusCode, body)
	}
	resp, body := do(t, http.MethodGet, l.admin+"/v1/sys/rekey", "", bearer(admin))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"state":"none"`) {
		t.Fatalf("status before any rotation: %d %s", resp.StatusCode, body)
	}

	if resp, body := do(t, http.MethodPost, l.admin+"/v1/sys/rekey", good, adminJSON(admin)); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("start: %d %s", resp.StatusCode, body)
	}
	if resp, body := do(t, http.MethodPost, l.admin+"/v1/sys/rekey", `{"key":"`+randomKey(t)+`"}`, adminJSON(admin)); resp.StatusCode != http.StatusConflict {
		t.Errorf("a second rotation meanwhile: %d %s, want 409", resp.StatusCode, body)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, body = do(t, http.MethodGet, l.admin+"/v1/sys/rekey", "", bearer(admin))
		if strings.Contains(string(body), `"state":"done"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rotation did not finish: %s", body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := readKey(t, filepath.Join(dir, node.RootKeyFile)); got != next {
		t.Error("the dev root key file does not hold the new key")
	}
	if resp, _ := do(t, http.MethodPost, l.admin+"/v1/sys/seal", "", adminJSON(admin)); resp.StatusCode != http.StatusOK {
		t.Fatal("seal")
	}
	if resp, body := do(t, http.MethodPost, l.admin+"/v1/sys/rekey", `{"key":"`+randomKey(t)+`"}`, adminJSON(admin)); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a rotation on a sealed node: %d %s, want 503", resp.StatusCode, body)
	}
}

// readKey reads a root key file and returns its base64 text.
func readKey(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	k, err := rootkey.ParseKey(b)
	if err != nil {
		t.Fatal(err)
	}
	k.Destroy()
	return strings.TrimSpace(string(b))
}
