package e2e

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/audit"
	"github.com/keygate/keygate/internal/audit/httpaudit"
	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/server"
	"github.com/keygate/keygate/internal/telemetry"
	"github.com/keygate/keygate/jose"
)

const auditAdminToken = "admin-token-0123456789abcdef0123456789"

// failSink is an audit sink that fails while fail is set.
type failSink struct{ fail atomic.Bool }

func (s *failSink) Name() string { return "failing" }
func (s *failSink) Close() error { return nil }
func (s *failSink) Write(context.Context, []audit.Line) error {
	if s.fail.Load() {
		return errors.New("injected failure")
	}
	return nil
}

func auditNode(dir string, a config.Audit, sinks ...audit.Sink) *node.Config {
	return &node.Config{DataDir: dir, Issuer: testIssuer, Audience: testAudience, Audit: a, AuditSinks: sinks}
}

// TestAuditFailClosed: when no audit sink takes a record, a token request
// and an admin write are answered 503 "audit log unavailable" in the OAuth
// envelope, the admin write is not made, /readyz names the sinks, and all
// of it comes back once a sink works again. With one of two sinks failing,
// requests succeed and the failures are counted.
func TestAuditFailClosed(t *testing.T) {
	sink := &failSink{}
	l := startLive(t, server.Config{AdminToken: auditAdminToken, Metrics: telemetry.New(),
		Node: auditNode(filepath.Join(t.TempDir(), "data"), config.Audit{File: config.AuditFile{Disabled: true}}, sink)})
	secret := addClient(t, l, "svc")
	if code, body := tokenStatus(t, l, "svc", secret); code != 200 {
		t.Fatalf("token: %d %s", code, body)
	}

	sink.fail.Store(true)
	h := form()
	h.Set("Authorization", basicAuth("svc", secret))
	resp, body := do(t, http.MethodPost, l.base+"/oauth2/token", "grant_type=client_credentials", h)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" || !strings.Contains(string(body), `"error":"temporarily_unavailable"`) ||
		!strings.Contains(string(body), "audit log unavailable") || strings.Contains(string(body), "access_token") {
		t.Errorf("token with every sink failing: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	for _, c := range []struct{ path, body string }{
		{"/v1/admin/clients", `{"name":"ghost","scopes":["x"]}`},
		{"/v1/admin/users", `{"username":"ghost","password":"correct horse battery","scopes":["x"]}`},
	} {
		resp, body := do(t, http.MethodPost, l.admin+c.path, c.body, adminJSON(auditAdminToken))
		if resp.StatusCode != 503 || !strings.Contains(string(body), "audit log unavailable") || resp.Header.Get(httpaudit.RequestIDHeader) == "" {
			t.Errorf("POST %s with every sink failing: %d %s", c.path, resp.StatusCode, body)
		}
	}
	cs, _ := l.Store().ListClients(t.Context())
	us, _ := l.Store().ListUsers(t.Context())
	for _, c := range cs {
		if c.Name == "ghost" {
			t.Error("the client was created although its record was not written")
		}
	}
	if len(us) != 0 {
		t.Errorf("the user was created although its record was not written: %v", us)
	}
	resp, body = do(t, http.MethodGet, l.admin+"/readyz", "", nil)
	if resp.StatusCode != 503 || !strings.Contains(string(body), `"reasons":["audit_sink_failing"]`) || !strings.Contains(string(body), `"name":"failing"`) {
		t.Errorf("readyz with every sink failing: %d %s", resp.StatusCode, body)
	}

	sink.fail.Store(false)
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, body := do(t, http.MethodGet, l.admin+"/readyz", "", nil)
		if resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("readyz did not recover without traffic: %d %s", resp.StatusCode, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, body := tokenStatus(t, l, "svc", secret); code != 200 {
		t.Errorf("token after the sink recovered: %d %s", code, body)
	}

	// Two sinks, one failing: the file sink takes every record.
	bad := &failSink{}
	bad.fail.Store(true)
	l2 := startLive(t, server.Config{AdminToken: auditAdminToken, Metrics: telemetry.New(),
		Node: auditNode(filepath.Join(t.TempDir(), "data"), config.Audit{}, bad)})
	secret = addClient(t, l2, "svc")
	for range 3 {
		if code, body := tokenStatus(t, l2, "svc", secret); code != 200 {
			t.Fatalf("token with one of two sinks failing: %d %s", code, body)
		}
	}
	resp, body = do(t, http.MethodPost, l2.admin+"/v1/admin/clients", `{"name":"real","scopes":["x"]}`, adminJSON(auditAdminToken))
	if resp.StatusCode != 201 {
		t.Errorf("admin write with one of two sinks failing: %d %s", resp.StatusCode, body)
	}
	_, metrics := do(t, http.MethodGet, l2.admin+"/metrics", "", nil)
	for _, m := range []string{`keygate_audit_sink_failures_total{sink="failing"}`, `keygate_audit_records_total{result="written"}`,
		`keygate_audit_sink_up{sink="file"} 1`, `keygate_audit_sink_up{sink="failing"} 0`, `keygate_audit_batch_records_count`} {
		if !strings.Contains(string(metrics), m) {
			t.Errorf("metrics lack %s", m)
		}
	}
	if strings.Contains(string(metrics), `keygate_audit_sink_failures_total{sink="failing"} 0`) {
		t.Error("no sink failure counted")
	}
	if resp, _ := do(t, http.MethodGet, l2.admin+"/readyz", "", nil); resp.StatusCode != 200 {
		t.Errorf("readyz with one sink working: %d", resp.StatusCode)
	}
}

func basicAuth(id, secret string) string {
	req, _ := http.NewRequest(http.MethodPost, "/", nil)
	req.SetBasicAuth(id, secret)
	return req.Header.Get("Authorization")
}

// TestAuditStatusSignsTheLog: GET /v1/admin/audit signs every line written
// before it and answers that checkpoint, and its own record is signed
// before the answer: the files of the running node verify with no
// unsigned line, against the anchor it gave.
func TestAuditStatusSignsTheLog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	l := startLive(t, server.Config{AdminToken: auditAdminToken, Node: auditNode(dir, config.Audit{CheckpointEvery: 1000, CheckpointInterval: time.Hour})})
	for i := range 3 {
		if resp, body := do(t, http.MethodPost, l.admin+"/v1/admin/clients", fmt.Sprintf(`{"name":"svc-%d","scopes":["read"]}`, i), adminJSON(auditAdminToken)); resp.StatusCode != 201 {
			t.Fatalf("create client: %d %s", resp.StatusCode, body)
		}
	}
	resp, body := do(t, http.MethodGet, l.admin+"/v1/admin/audit", "", http.Header{"Authorization": {"Bearer " + auditAdminToken}})
	var st struct {
		PublicKey      string `json:"public_key"`
		LastCheckpoint struct {
			Seq  uint64 `json:"seq"`
			Hash string `json:"hash"`
		} `json:"last_checkpoint"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(body, &st) != nil {
		t.Fatalf("GET /v1/admin/audit: %d %s", resp.StatusCode, body)
	}
	pub, err := jose.ParsePublicPEM([]byte(st.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	hash, err := audit.ParseHash(st.LastCheckpoint.Hash)
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "audit", "audit-*.jsonl"))
	sum, err := audit.Verify(audit.VerifyOptions{Keys: []ed25519.PublicKey{pub.(ed25519.PublicKey)},
		Anchor: &audit.Anchor{Seq: st.LastCheckpoint.Seq, Hash: hash}}, files...)
	if err != nil {
		t.Fatalf("Verify of the running node's files: %v", err)
	}
	// ... the anchor, the request's record, the checkpoint that signs it.
	if sum.Signed != sum.Records || sum.LastSeq != st.LastCheckpoint.Seq+2 || sum.LastCheckpoint.Seq != sum.LastSeq {
		t.Errorf("summary %+v, anchor %+v", sum, st.LastCheckpoint)
	}
}

// TestAuditRun: a run with rotation by size and a seal in the middle. A
// token issued and an admin change each leave their records; requests made
// while sealed are recorded too (no hashed values) and signed by the first
// checkpoint after the unseal; the files verify as one chain with the key
// GET /v1/admin/audit serves, from the anchor it gives; and no file holds
// a secret or a token.
func TestAuditRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	l := startLive(t, server.Config{AdminToken: auditAdminToken,
		Node: auditNode(dir, config.Audit{File: config.AuditFile{MaxSize: 2048}, CheckpointEvery: 7})})
	status := func() map[string]any {
		t.Helper()
		resp, body := do(t, http.MethodGet, l.admin+"/v1/admin/audit", "", http.Header{"Authorization": {"Bearer " + auditAdminToken}})
		var m map[string]any
		if resp.StatusCode != 200 || json.Unmarshal(body, &m) != nil {
			t.Fatalf("GET /v1/admin/audit: %d %s", resp.StatusCode, body)
		}
		return m
	}
	st := status()
	if st["enabled"] != true || st["signing"] != true || !strings.HasPrefix(fmt.Sprint(st["node"]), "kgn_") {
		t.Fatalf("audit status %v", st)
	}
	pub, err := jose.ParsePublicPEM([]byte(st["public_key"].(string)))
	if err != nil {
		t.Fatal(err)
	}
	if resp, _ := do(t, http.MethodGet, l.admin+"/v1/admin/audit", "", nil); resp.StatusCode != 401 {
		t.Errorf("GET /v1/admin/audit without the admin token: %d", resp.StatusCode)
	}

	var secrets []string
	resp, body := do(t, http.MethodPost, l.admin+"/v1/admin/clients", `{"name":"svc","scopes":["read"]}`, adminJSON(auditAdminToken))
	var created struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	if resp.StatusCode != 201 || json.Unmarshal(body, &created) != nil {
		t.Fatalf("create client: %d %s", resp.StatusCode, body)
	}
	if resp.Header.Get(httpaudit.RequestIDHeader) == "" {
		t.Error("no X-Request-Id")
	}
	secrets = append(secrets, created.ClientSecret, auditAdminToken, "correct horse battery")
	if resp, body := do(t, http.MethodPost, l.admin+"/v1/admin/users", `{"username":"alice","password":"correct horse battery","scopes":["read"]}`,
		adminJSON(auditAdminToken)); resp.StatusCode != 201 {
		t.Fatalf("create user: %d %s", resp.StatusCode, body)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range 4 {
		wg.Go(func() {
			for range 10 {
				tok := clientToken(t, l.base, created.ClientID, created.ClientSecret)
				mu.Lock()
				secrets = append(secrets, tok, signature(tok))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	h := form()
	h.Set("Authorization", basicAuth(created.ClientID, created.ClientSecret))
	resp, body = do(t, http.MethodPost, l.base+"/v1/login", "username=alice&password=correct+horse+battery", h)
	var login struct {
		AccessToken  string `json:"access_token"`
		RefreshToken string `json:"refresh_token"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(body, &login) != nil {
		t.Fatalf("login: %d %s", resp.StatusCode, body)
	}
	secrets = append(secrets, login.AccessToken, login.RefreshToken)

	// Sealed: requests are still recorded, without hashed values.
	if resp, body := do(t, http.MethodPost, l.admin+"/v1/sys/seal", "{}", adminJSON(auditAdminToken)); resp.StatusCode != 200 {
		t.Fatalf("seal: %d %s", resp.StatusCode, body)
	}
	if st := status(); st["signing"] != false || st["public_key"] == nil {
		t.Errorf("sealed audit status %v: want the kept key, not signing", st)
	}
	for range 5 {
		if code, _ := tokenStatus(t, l, created.ClientID, created.ClientSecret); code != 503 {
			t.Fatalf("token while sealed: %d", code)
		}
	}
	if resp, _ := do(t, http.MethodGet, l.admin+"/v1/admin/clients", "", http.Header{"Authorization": {"Bearer " + auditAdminToken}}); resp.StatusCode != 200 {
		t.Fatal("list clients while sealed")
	}
	rootKey, err := os.ReadFile(filepath.Join(dir, node.RootKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	secrets = append(secrets, strings.TrimSpace(string(rootKey)))
	if resp, body := do(t, http.MethodPost, l.admin+"/v1/sys/unseal", `{"key":"`+strings.TrimSpace(string(rootKey))+`"}`,
		http.Header{"Content-Type": {"application/json"}}); resp.StatusCode != 200 {
		t.Fatalf("unseal: %d %s", resp.StatusCode, body)
	}
	clientToken(t, l.base, created.ClientID, created.ClientSecret)
	anchor := status()["last_checkpoint"].(map[string]any)
	if err := l.stop(); err != nil { // the final checkpoint
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "audit", "audit-*.jsonl"))
	if len(files) < 3 {
		t.Fatalf("%d audit files, want rotations", len(files))
	}
	hash, _ := audit.ParseHash(anchor["hash"].(string))
	sum, err := audit.Verify(audit.VerifyOptions{Keys: []ed25519.PublicKey{pub.(ed25519.PublicKey)},
		Anchor: &audit.Anchor{Seq: uint64(anchor["seq"].(float64)), Hash: hash}}, files...)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if sum.Rotations != len(files)-1 || sum.Unsigned != 0 {
		t.Errorf("summary %+v", sum)
	}

	var all []byte
	ops := map[audit.Operation]int{}
	sealedPlain := 0
	for _, f := range files {
		b, _ := os.ReadFile(f)
		all = append(all, b...)
		for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
			e, err := audit.ParseLine(line)
			if err != nil {
				t.Fatal(err)
			}
			if e.Type != audit.TypeRecord {
				continue
			}
			ops[e.Record.Operation]++
			// Sealed, the token endpoint refuses before it reads the
			// request: the records say so, with nothing hashed.
			if e.Record.Operation == "oauth2.token" && e.Record.Status == 503 && e.Record.Reason == "temporarily_unavailable" && len(e.Record.Hashed) == 0 {
				sealedPlain++
			}
		}
	}
	for op, n := range map[audit.Operation]int{"admin.clients.create": 2, "admin.users.create": 2, "oauth2.token.client_credentials": 41, "oauth2.token": 5,
		"login.password": 2, "sys.seal": 2, "sys.unseal": 2, "admin.clients.list": 1, "admin.audit.read": 4} {
		if ops[op] != n {
			t.Errorf("%d records of %s, want %d (all: %v)", ops[op], op, n, ops)
		}
	}
	if sealedPlain != 5 {
		t.Errorf("%d records of sealed token requests without hashed values, want 5", sealedPlain)
	}
	for _, s := range secrets {
		if s != "" && bytes.Contains(all, []byte(s)) {
			t.Errorf("an audit file holds a secret or token: %.12s…", s)
		}
	}
}
