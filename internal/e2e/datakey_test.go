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
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/audit"
	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/rootkey"
	"github.com/keygate/keygate/internal/rootkey/tenantkey"
	"github.com/keygate/keygate/internal/server"
	"github.com/keygate/keygate/internal/store"
)

// dataKeyState is GET /v1/admin/tenants/{name}/data-key's answer.
type dataKeyState struct {
	Tenant   string   `json:"tenant"`
	Current  uint32   `json:"current_version"`
	Versions []uint32 `json:"versions"`
	Rotation struct {
		State   string `json:"state"`
		ID      string `json:"id"`
		Version int    `json:"version"`
		Done    int64  `json:"done"`
		Total   int64  `json:"total"`
		Failed  string `json:"failed"`
	} `json:"rotation"`
}

func getDataKey(t *testing.T, admin, tenant string) (int, dataKeyState) {
	t.Helper()
	return getDataKeyWith(t, admin, auditAdminToken, tenant)
}

// TestDataKeyRotationUnderLoad: two nodes of a fleet (PostgreSQL, Redis)
// serve transit and secrets without a pause while the default tenant's
// data key is rotated through the admin API and its records — secrets'
// metadata and versions, transit key versions — are rewrapped at 100 a
// second: not one request fails, every ciphertext and secret written
// before is read after, every record ends under the new version with the
// old one retired at both nodes, and the rotation is audited.
func TestDataKeyRotationUnderLoad(t *testing.T) {
	if os.Getenv("REDIS_URL") == "" || os.Getenv("DATABASE_URL") == "" {
		t.Skip("needs PostgreSQL and Redis: DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable REDIS_URL=redis://127.0.0.1:6379/0")
	}
	redisURL, prefix := redisPrefix(t)
	dbURL := newSchema(t)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "root.key")
	if err := rootkey.GenerateKeyFile(keyFile, rand.Reader); err != nil {
		t.Fatal(err)
	}
	sink := &captureSink{}
	nodeCfg := func(name string) *node.Config {
		return &node.Config{DataDir: filepath.Join(dir, name), Issuer: "https://keygate.datakey.test", Audience: testAudience,
			Audit: config.Audit{File: config.AuditFile{Disabled: true}}, AuditSinks: []audit.Sink{sink},
			TokenService: config.TokenService{DatabaseURL: dbURL, RootKeyFile: keyFile, RedisURL: redisURL, RedisPrefix: prefix}}
	}
	a := startLive(t, server.Config{AdminToken: auditAdminToken, Node: nodeCfg("a")})
	b := startLive(t, server.Config{AdminToken: auditAdminToken, Node: nodeCfg("b")})
	id, secret := newClient(t, a, "transit:admin", "transit:encrypt:*", "transit:decrypt:*", "secrets:read:*", "secrets:write:*")
	tok := clientToken(t, a.base, id, secret)
	ca, cb := strictVaultClient(t, a, tok), strictVaultClient(t, b, tok)
	ctx := t.Context()

	// Before: secrets with two versions each, and transit keys with two
	// versions, with a ciphertext under each.
	before := map[string]string{}
	for i := range 3 {
		key := fmt.Sprintf("app%d", i)
		if _, err := ca.Logical().WriteWithContext(ctx, "transit/keys/"+key, nil); err != nil {
			t.Fatal(err)
		}
		for v := range 2 {
			if v == 1 {
				if _, err := ca.Logical().WriteWithContext(ctx, "transit/keys/"+key+"/rotate", nil); err != nil {
					t.Fatal(err)
				}
			}
			plain := base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "%s v%d", key, v))
			enc, err := ca.Logical().WriteWithContext(ctx, "transit/encrypt/"+key, map[string]any{"plaintext": plain})
			if err != nil {
				t.Fatal(err)
			}
			before[key+" "+fmt.Sprint(enc.Data["ciphertext"])] = plain
		}
	}
	for i := range 60 {
		for v := range 2 {
			if _, err := ca.KVv2("secret").Put(ctx, fmt.Sprintf("before/s%02d", i), map[string]any{"v": fmt.Sprintf("%d.%d", i, v)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if code, st := getDataKey(t, b.admin, store.DefaultTenant); code != http.StatusOK || st.Current != 1 || st.Rotation.State != "none" {
		t.Fatalf("before the rotation: %d %+v", code, st)
	}

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
			cfrom, cto := ca, cb
			if w%2 == 1 {
				cfrom, cto = cb, ca
			}
			for i := 0; lctx.Err() == nil; i++ {
				key := fmt.Sprintf("app%d", i%3)
				plain := base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "value %d", i))
				enc, err := cfrom.Logical().WriteWithContext(ctx, "transit/encrypt/"+key, map[string]any{"plaintext": plain})
				if err != nil {
					fail(fmt.Errorf("encrypt: %w", err))
				} else if dec, err := cto.Logical().WriteWithContext(ctx, "transit/decrypt/"+key,
					map[string]any{"ciphertext": enc.Data["ciphertext"]}); err != nil || dec.Data["plaintext"] != plain {
					fail(fmt.Errorf("decrypt: %v %v", dec, err))
				}
				path := fmt.Sprintf("w%d/s%d", w, i%5)
				if _, err := cfrom.KVv2("secret").Put(ctx, path, map[string]any{"i": fmt.Sprint(i)}); err != nil {
					fail(fmt.Errorf("kv put: %w", err))
				} else if s, err := cto.KVv2("secret").Get(ctx, path); err != nil || s.Data["i"] != fmt.Sprint(i) {
					fail(fmt.Errorf("kv get at the other node: %v %v", s, err))
				}
				old := fmt.Sprintf("before/s%02d", i%60)
				if s, err := cto.KVv2("secret").Get(ctx, old); err != nil || s.Data["v"] != fmt.Sprintf("%d.1", i%60) {
					fail(fmt.Errorf("kv get of %s: %v %v", old, s, err))
				}
				ops.Add(5)
			}
		}()
	}

	time.Sleep(300 * time.Millisecond)
	resp, out := do(t, http.MethodPost, a.admin+"/v1/admin/tenants/default/data-key/rotate", `{"rate":100}`, adminJSON(auditAdminToken))
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("rotate: %d %s", resp.StatusCode, out)
	}
	var started dataKeyState
	json.Unmarshal(out, &started)
	if started.Current != 2 || !slices.Equal(started.Versions, []uint32{1, 2}) || started.Rotation.State != "rewrapping" {
		t.Errorf("the rotation's answer: %s", out)
	}
	if resp, out := do(t, http.MethodPost, b.admin+"/v1/admin/tenants/default/data-key/rotate", "", adminJSON(auditAdminToken)); resp.StatusCode != http.StatusConflict {
		t.Errorf("a second rotation while one runs: %d %s, want 409", resp.StatusCode, out)
	}
	sawProgress := false
	var done dataKeyState
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		code, st := getDataKey(t, b.admin, store.DefaultTenant)
		if st.Rotation.State == "rewrapping" && st.Rotation.Done > 0 && st.Rotation.Done < st.Rotation.Total {
			sawProgress = true
		}
		if code == http.StatusOK && st.Rotation.State == "done" {
			done = st
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rotation did not finish: %d %+v", code, st)
		}
	}
	time.Sleep(time.Second) // load on the finished rotation too
	stop()
	wg.Wait()
	t.Logf("%d requests during the rotation, %d failed; %d records rewrapped", ops.Load(), failed.Load(), done.Rotation.Total)
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d requests failed during the rotation; the first: %v", n, firstErr.Load())
	}
	if !sawProgress {
		t.Error("the rotation's progress was never seen partway")
	}
	if done.Current != 2 || !slices.Equal(done.Versions, []uint32{2}) || done.Rotation.Failed != "" || done.Rotation.Done != done.Rotation.Total {
		t.Errorf("after the rotation: %+v", done)
	}
	for k, plain := range before {
		key, ct, _ := strings.Cut(k, " ")
		if dec, err := cb.Logical().WriteWithContext(ctx, "transit/decrypt/"+key, map[string]any{"ciphertext": ct}); err != nil || dec.Data["plaintext"] != plain {
			t.Errorf("a ciphertext made before the rotation: %v, %v", dec, err)
		}
	}
	for i := range 60 {
		p := fmt.Sprintf("before/s%02d", i)
		if s, err := ca.KVv2("secret").GetVersion(ctx, p, 1); err != nil || s.Data["v"] != fmt.Sprintf("%d.0", i) {
			t.Errorf("%s version 1 after the rotation: %v, %v", p, s, err)
		}
	}
	recs, err := a.Node.Store().TenantSealed(ctx, store.DefaultTenant, store.SealedRef{}, store.MaxSealedPage)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[store.SealedKind]int{}
	for _, rec := range recs {
		kinds[rec.Kind]++
		if v, _ := tenantkey.SealedVersion(rec.Sealed); v != 2 {
			t.Errorf("%s %s version %d is under data key version %d", rec.Kind, rec.Name, rec.Version, v)
		}
	}
	if kinds[store.SealedTransitVersion] < 6 || kinds[store.SealedSecretMeta] < 60 || kinds[store.SealedSecretValue] < 120 {
		t.Errorf("records of each kind: %v", kinds)
	}
	for _, l := range []*live{a, b} {
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			k, err := l.Node.TenantKeys().Get(ctx, store.DefaultTenant)
			if err == nil && slices.Equal(k.Versions(), []uint32{2}) {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("node %s still holds %v", l.base, k.Versions())
				break
			}
		}
	}
	var rotations int
	for _, r := range sink.Take(t) {
		if r.Operation == "admin.tenants.data_key.rotate" && r.Result == audit.ResultOK {
			rotations++
			if r.Tenant != store.DefaultTenant || r.Principal.Kind != audit.PrincipalAdmin || r.Key.Version != 2 {
				t.Errorf("the rotation's record: %+v", r)
			}
		}
	}
	if rotations != 1 {
		t.Errorf("%d successful rotation records, want 1", rotations)
	}
}

// TestDataKeyEndpoint: the data-key endpoints take the admin token only,
// refuse what a browser page could send and every malformed body with a
// clear answer and nothing started, answer 404 for a tenant that does not
// exist, and report a tenant that never sealed anything without making it
// a key.
func TestDataKeyEndpoint(t *testing.T) {
	const admin = "admin-token-0123456789abcdef0123456789"
	l := startLive(t, server.Config{AdminToken: admin, Node: &node.Config{DataDir: filepath.Join(t.TempDir(), "data"),
		Issuer: testIssuer, Audience: testAudience, Dev: true}})
	if err := l.Node.Store().CreateTenant(t.Context(), store.Tenant{Name: "acme", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	rotate := l.admin + "/v1/admin/tenants/acme/data-key/rotate"
	browser := adminJSON(admin)
	browser.Set("Origin", "https://evil.example")
	plain := bearer(admin)
	plain.Set("Content-Type", "text/plain")
	for _, c := range []struct {
		name, method, url, body string
		h                       http.Header
		want                    int
	}{
		{"status without the admin token", http.MethodGet, l.admin + "/v1/admin/tenants/acme/data-key", "", nil, http.StatusUnauthorized},
		{"rotate without the admin token", http.MethodPost, rotate, "", http.Header{"Content-Type": {"application/json"}}, http.StatusUnauthorized},
		{"a wrong admin token", http.MethodPost, rotate, "", adminJSON(admin + "x"), http.StatusUnauthorized},
		{"a lowercase method", "post", rotate, "", adminJSON(admin), http.StatusMethodNotAllowed},
		{"another method", http.MethodPut, rotate, "", adminJSON(admin), http.StatusMethodNotAllowed},
		{"from a browser page", http.MethodPost, rotate, "", browser, http.StatusForbidden},
		{"not JSON", http.MethodPost, rotate, `{"rate":1}`, plain, http.StatusUnsupportedMediaType},
		{"an unknown field", http.MethodPost, rotate, `{"rate":1,"force":true}`, adminJSON(admin), http.StatusBadRequest},
		{"a repeated field", http.MethodPost, rotate, `{"rate":1,"rate":0}`, adminJSON(admin), http.StatusBadRequest},
		{"a field in another case", http.MethodPost, rotate, `{"Rate":1}`, adminJSON(admin), http.StatusBadRequest},
		{"trailing data", http.MethodPost, rotate, `{"rate":1}{}`, adminJSON(admin), http.StatusBadRequest},
		{"a negative rate", http.MethodPost, rotate, `{"rate":-1}`, adminJSON(admin), http.StatusBadRequest},
		{"a rate that is not a number", http.MethodPost, rotate, `{"rate":"1"}`, adminJSON(admin), http.StatusBadRequest},
		{"an unknown tenant", http.MethodPost, l.admin + "/v1/admin/tenants/zeta/data-key/rotate", "", adminJSON(admin), http.StatusNotFound},
		{"an invalid tenant name", http.MethodPost, l.admin + "/v1/admin/tenants/Acme/data-key/rotate", "", adminJSON(admin), http.StatusBadRequest},
		{"the status of an unknown tenant", http.MethodGet, l.admin + "/v1/admin/tenants/zeta/data-key", "", adminJSON(admin), http.StatusNotFound},
	} {
		resp, out := do(t, c.method, c.url, c.body, c.h)
		if resp.StatusCode != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, resp.StatusCode, out, c.want)
		}
	}
	code, st := getDataKeyWith(t, l.admin, admin, "acme")
	if code != http.StatusOK || st.Rotation.State != "none" || len(st.Versions) != 0 || st.Current != 0 {
		t.Fatalf("a tenant never rotated, with no key: %d %+v", code, st)
	}
	if tn, _ := l.Node.Store().GetTenant(t.Context(), "acme"); tn.DataKey != nil {
		t.Error("reading the status made the tenant a data key")
	}
	resp, out := do(t, http.MethodPost, rotate, `{"rate":5}`, adminJSON(admin))
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("rotate: %d %s", resp.StatusCode, out)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, st = getDataKeyWith(t, l.admin, admin, "acme"); st.Rotation.State == "done" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rotation of an empty tenant did not finish: %+v", st)
		}
	}
	if st.Current != 2 || !slices.Equal(st.Versions, []uint32{2}) || st.Rotation.Total != 0 {
		t.Errorf("an empty tenant rotated: %+v", st)
	}
}

func getDataKeyWith(t *testing.T, adminURL, token, tenant string) (int, dataKeyState) {
	t.Helper()
	resp, out := do(t, http.MethodGet, adminURL+"/v1/admin/tenants/"+tenant+"/data-key", "", adminJSON(token))
	var st dataKeyState
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(out, &st); err != nil {
			t.Fatalf("data key state: %v: %s", err, out)
		}
	}
	return resp.StatusCode, st
}
