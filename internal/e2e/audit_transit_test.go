package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keygate/keygate/internal/audit"
	"github.com/keygate/keygate/internal/audit/audittest"
	"github.com/keygate/keygate/internal/audit/httpaudit"
	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/server"
	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/telemetry"
)

// captureSink is audittest's memory sink that fails while fail is set.
type captureSink struct {
	failSink
	audittest.MemSink
}

func (s *captureSink) Name() string { return "capture" }
func (s *captureSink) Close() error { return nil }

func (s *captureSink) Write(ctx context.Context, lines []audit.Line) error {
	if err := s.failSink.Write(ctx, lines); err != nil {
		return err
	}
	return s.MemSink.Write(ctx, lines)
}

// transitToken is a client_credentials token of a client with scopes,
// made through the admin API and the token endpoint.
func transitToken(t *testing.T, l *live, scopes ...string) (clientID, token string) {
	t.Helper()
	id, secret := newClient(t, l, scopes...)
	code, tb := tokenStatus(t, l, id, secret)
	if code != http.StatusOK {
		t.Fatalf("token: %d %s", code, tb)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal([]byte(tb), &tok); err != nil {
		t.Fatal(err)
	}
	return id, tok.AccessToken
}

// TestAuditTransit: every transit request is recorded before it is
// answered — its operation, tenant, client, key and version, and a pending
// record before a key is made — and nothing of the data reaches a record.
// When no sink takes a record, the answer is 503 in Vault's envelope with
// nothing of the held answer (no ciphertext), and a key whose creation
// could not be recorded is not made.
func TestAuditTransit(t *testing.T) {
	sink := &captureSink{}
	l := startLive(t, server.Config{AdminToken: auditAdminToken, Metrics: telemetry.New(),
		Node: auditNode(filepath.Join(t.TempDir(), "data"), config.Audit{File: config.AuditFile{Disabled: true}}, sink)})
	client, tok := transitToken(t, l, "transit:admin", "transit:encrypt:*")
	h := http.Header{"X-Vault-Token": {tok}, "Content-Type": {"application/json"}}

	resp, body := do(t, http.MethodPost, l.base+"/v1/transit/keys/orders", "", h)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("create: %d %s", resp.StatusCode, body)
	}
	const plaintext = "the audit log must never see this"
	pt := base64.StdEncoding.EncodeToString([]byte(plaintext))
	resp, body = do(t, http.MethodPost, l.base+"/v1/transit/encrypt/orders", `{"plaintext":"`+pt+`"}`, h)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("encrypt: %d %s", resp.StatusCode, body)
	}
	var enc struct {
		RequestID string `json:"request_id"`
		Data      struct {
			Ciphertext string `json:"ciphertext"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &enc); err != nil {
		t.Fatal(err)
	}
	if got := resp.Header.Get(httpaudit.RequestIDHeader); got == "" || got != enc.RequestID {
		t.Errorf("X-Request-Id %q, request_id %q: want one id", got, enc.RequestID)
	}

	type want struct {
		op     audit.Operation
		result audit.Result
	}
	var got []want
	for _, r := range sink.Take(t) {
		if !strings.HasPrefix(string(r.Operation), "transit.") {
			continue
		}
		got = append(got, want{r.Operation, r.Result})
		if r.Tenant != store.DefaultTenant || r.Principal.Kind != audit.PrincipalClient || r.Principal.ID != client ||
			r.Key.Name != "orders" || r.Status == 0 && r.Result != audit.ResultPending {
			t.Errorf("record %+v: want tenant default, client %s, key orders", r, client)
		}
		if r.Operation == "transit.encrypt" && (r.Key.Version != 1 || r.RequestID != enc.RequestID) {
			t.Errorf("encrypt record %+v: want version 1, request %s", r, enc.RequestID)
		}
	}
	wantOps := []want{{"transit.keys.create", audit.ResultPending}, {"transit.keys.create", audit.ResultOK},
		{"transit.encrypt", audit.ResultOK}}
	if len(got) != len(wantOps) {
		t.Fatalf("transit records %v, want %v", got, wantOps)
	}
	for i := range wantOps {
		if got[i] != wantOps[i] {
			t.Errorf("record %d: %v, want %v", i, got[i], wantOps[i])
		}
	}
	all := sink.All()
	for _, secret := range []string{plaintext, pt, enc.Data.Ciphertext, strings.TrimPrefix(enc.Data.Ciphertext, "vault:v1:"), tok} {
		if bytes.Contains(all, []byte(secret)) {
			t.Errorf("an audit record holds %q", secret)
		}
	}

	sink.fail.Store(true)
	resp, body = do(t, http.MethodPost, l.base+"/v1/transit/encrypt/orders", `{"plaintext":"`+pt+`"}`, h)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" ||
		string(body) != `{"errors":["audit log unavailable"]}`+"\n" {
		t.Errorf("encrypt with every sink failing: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	resp, body = do(t, http.MethodPost, l.base+"/v1/transit/keys/ghost", "", h)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "audit log unavailable") {
		t.Errorf("create with every sink failing: %d %s", resp.StatusCode, body)
	}
	if names, err := l.Store().ListTransitKeys(t.Context(), store.DefaultTenant); err != nil || len(names) != 1 || names[0] != "orders" {
		t.Errorf("transit keys after a create that could not be recorded: %v %v, want [orders]", names, err)
	}
}

// TestAuditWrongMethods: a request to an audited path with a method the
// path does not take is refused 405 and recorded like any other request
// there, on the traffic and the admin listener alike.
func TestAuditWrongMethods(t *testing.T) {
	sink := &captureSink{}
	l := startLive(t, server.Config{AdminToken: auditAdminToken,
		Node: auditNode(filepath.Join(t.TempDir(), "data"), config.Audit{File: config.AuditFile{Disabled: true}}, sink)})
	for _, c := range []struct {
		method, url string
		op          audit.Operation
	}{
		{http.MethodGet, l.base + "/oauth2/token", "oauth2.token"},
		{http.MethodOptions, l.base + "/oauth2/token", "oauth2.token"},
		{http.MethodPut, l.base + "/v1/login", "login.password"},
		{http.MethodDelete, l.base + "/oauth2/revoke", "oauth2.revoke"},
		{http.MethodGet, l.admin + "/v1/sys/unseal", "sys.unseal"},
		{http.MethodPut, l.admin + "/v1/sys/seal", "sys.seal"},
	} {
		resp, body := do(t, c.method, c.url, "", nil)
		id := resp.Header.Get(httpaudit.RequestIDHeader)
		if resp.StatusCode != http.StatusMethodNotAllowed || id == "" {
			t.Errorf("%s %s: %d, X-Request-Id %q: want 405 with a request id (%s)", c.method, c.url, resp.StatusCode, id, body)
			continue
		}
		found := false
		// The answer waited for its record: it is among those since the
		// last request's.
		for _, r := range sink.Take(t) {
			if r.RequestID == id {
				found = r.Operation == c.op && r.Status == http.StatusMethodNotAllowed
				if !found {
					t.Errorf("%s %s: record %+v, want %s with status 405", c.method, c.url, r, c.op)
				}
			}
		}
		if !found {
			t.Errorf("%s %s: no record of request %s", c.method, c.url, id)
		}
	}
}
