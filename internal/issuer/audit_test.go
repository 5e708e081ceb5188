package issuer

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/audit"
	"github.com/keygate/keygate/internal/audit/httpaudit"
	"github.com/keygate/keygate/internal/httperr"
)

// memSink keeps audit lines in memory.
type memSink struct {
	mu       sync.Mutex
	buf, log bytes.Buffer // since the last take, and all
}

func (m *memSink) Name() string { return "mem" }
func (m *memSink) Close() error { return nil }
func (m *memSink) Write(_ context.Context, lines []audit.Line) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, l := range lines {
		m.buf.Write(l.Bytes)
		m.log.Write(l.Bytes)
	}
	return nil
}

// all returns every line written.
func (m *memSink) all() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return bytes.Clone(m.log.Bytes())
}

// take returns the records written since the last take.
func (m *memSink) take(t *testing.T) []audit.Record {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []audit.Record
	for _, line := range bytes.Split(bytes.TrimSpace(m.buf.Bytes()), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		e, err := audit.ParseLine(line)
		if err != nil {
			t.Fatalf("ParseLine(%s): %v", line, err)
		}
		if e.Type == audit.TypeRecord {
			out = append(out, e.Record)
		}
	}
	m.buf.Reset()
	return out
}

// newAuditLog starts an audit log writing to a memory sink.
func newAuditLog(t testing.TB, sink audit.Sink) (*audit.Log, *audit.HMACKey) {
	t.Helper()
	sk, _ := audit.NewSigningKey(bytes.Repeat([]byte{7}, audit.SeedSize))
	mac, _ := audit.NewHMACKey(bytes.Repeat([]byte{8}, 32))
	l, err := audit.New(audit.Config{Node: "n1", Signer: sk, HMAC: mac, Sinks: []audit.Sink{sink}})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	return l, mac
}

// anyValue in a wanted record's hashed values: present, whatever it is.
const anyValue = "\x00any"

// wantRecord is what an audit record should say.
type wantRecord struct {
	op        audit.Operation
	result    audit.Result
	principal audit.PrincipalKind
	id        string
	reason    audit.Reason
	key       string
	hashed    map[string]string // name → the value whose HMAC it holds, or anyValue
}

// checkRecords fails t unless got are the records ws, of one request.
func checkRecords(t *testing.T, mac *audit.HMACKey, step string, got []audit.Record, ws ...wantRecord) {
	t.Helper()
	if len(got) != len(ws) {
		t.Fatalf("%s: %d records, want %d: %+v", step, len(got), len(ws), got)
	}
	for i, w := range ws {
		r := got[i]
		if r.Operation != w.op || r.Result != w.result || r.Principal.Kind != w.principal || r.Principal.ID != w.id ||
			r.Reason != w.reason || r.Key.Name != w.key || r.RequestID != got[0].RequestID || !r.Remote.IsLoopback() {
			t.Errorf("%s: record %d %+v, want %+v", step, i, r, w)
		}
		if len(r.Hashed) != len(w.hashed) {
			t.Errorf("%s: record %d hashed %v, want %v", step, i, r.Hashed, w.hashed)
		}
		for name, v := range w.hashed {
			if d, ok := r.Hashed[name]; !ok || v != anyValue && !d.Equal(mac.Sum(v)) {
				t.Errorf("%s: record %d: hashed %s is not the HMAC of %q", step, i, name, v)
			}
		}
	}
}

// TestAuditRecords: the token endpoints tell each request's record who
// made it, what it did, with which key, and the values an auditor must
// match (HMAC'd), with a pending record before every change; no record
// holds a secret, a password or a token. (The admin API's records are
// package admin's to test.)
func TestAuditRecords(t *testing.T) {
	sink := &memSink{}
	log, mac := newAuditLog(t, sink)
	a, err := httpaudit.New(httpaudit.Config{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	f, us := newLoginFixture(t, 100)
	svc, err := New(Config{Issuer: testIssuer, Store: us, Keys: f.keys, Now: func() time.Time { return f.clockNow }})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	for path, op := range map[string]audit.Operation{"/oauth2/token": "oauth2.token", "/oauth2/revoke": "oauth2.revoke",
		"/oauth2/introspect": "oauth2.introspect", "/v1/login": "login.password"} {
		mux.Handle("POST "+path, a.Handler(op, httperr.Writer{}, svc.Handler())) // as package server wraps them
	}
	f.srv.Config.Handler = mux
	kid := f.keys.Signer().Key().Thumbprint()
	client := [2]string{"svc-a", f.secrets["svc-a"]}
	check := func(step string, ws ...wantRecord) {
		t.Helper()
		checkRecords(t, mac, step, sink.take(t), ws...)
	}
	jti := func(token string) string {
		t.Helper()
		tok, err := svc.verifyOwn(token)
		if err != nil {
			t.Fatal(err)
		}
		return tok.Claims.ID
	}

	r := f.post(t, "/v1/login", url.Values{"username": {"alice"}, "password": {"correct horse battery"}}, client, "")
	if r.status != 200 {
		t.Fatalf("login: %d %v", r.status, r.body)
	}
	access, refresh := r.body["access_token"].(string), r.body["refresh_token"].(string)
	check("login",
		wantRecord{op: "login.password", result: audit.ResultPending, principal: audit.PrincipalUser, id: "u-alice",
			hashed: map[string]string{"username": "alice", "family": anyValue}},
		wantRecord{op: "login.password", result: audit.ResultOK, principal: audit.PrincipalUser, id: "u-alice", key: kid,
			hashed: map[string]string{"username": "alice", "family": anyValue, "jti": jti(access)}})

	cc := f.issue(t, "svc-a", "")
	check("client_credentials", wantRecord{op: "oauth2.token.client_credentials", result: audit.ResultOK,
		principal: audit.PrincipalClient, id: "svc-a", key: kid, hashed: map[string]string{"jti": jti(cc)}})

	if r := f.post(t, "/oauth2/token", url.Values{"grant_type": {"client_credentials"}}, [2]string{"svc-a", "wrong-secret"}, ""); r.status != 401 {
		t.Fatalf("wrong secret: %d", r.status)
	}
	check("wrong secret", wantRecord{op: "oauth2.token", result: audit.ResultRefused, reason: "invalid_client",
		hashed: map[string]string{"client_id": "svc-a"}})

	r = f.post(t, "/oauth2/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}}, client, "")
	if r.status != 200 {
		t.Fatalf("refresh: %d %v", r.status, r.body)
	}
	access2 := r.body["access_token"].(string)
	check("refresh",
		wantRecord{op: "oauth2.token.refresh_token", result: audit.ResultPending, principal: audit.PrincipalClient, id: "svc-a"},
		wantRecord{op: "oauth2.token.refresh_token", result: audit.ResultOK, principal: audit.PrincipalUser, id: "u-alice", key: kid,
			hashed: map[string]string{"family": anyValue, "jti": jti(access2)}})

	if r := f.post(t, "/oauth2/revoke", url.Values{"token": {cc}}, client, ""); r.status != 200 {
		t.Fatalf("revoke: %d", r.status)
	}
	check("revoke",
		wantRecord{op: "oauth2.revoke", result: audit.ResultPending, principal: audit.PrincipalClient, id: "svc-a"},
		wantRecord{op: "oauth2.revoke", result: audit.ResultOK, principal: audit.PrincipalClient, id: "svc-a",
			hashed: map[string]string{"jti": jti(cc)}})

	if r := f.post(t, "/oauth2/introspect", url.Values{"token": {access2}}, client, ""); r.status != 200 || r.body["active"] != true {
		t.Fatalf("introspect the refreshed access token: %d %v", r.status, r.body)
	}
	check("introspect", wantRecord{op: "oauth2.introspect", result: audit.ResultOK, principal: audit.PrincipalClient, id: "svc-a",
		hashed: map[string]string{"jti": jti(access2)}})

	// The username quoted: the user's id, u-alice, is in the records.
	for name, secret := range map[string]string{"client secret": client[1], "password": "correct horse battery",
		"access token": access, "refresh token": refresh, "client_credentials token": cc, "username": `"alice"`} {
		if bytes.Contains(sink.all(), []byte(secret)) {
			t.Errorf("the %s is in the audit log", name)
		}
	}
}

func TestMember(t *testing.T) {
	seg := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, c := range []struct{ json, name, want string }{
		{`{"alg":"ES256","kid":"abc_-1","typ":"at+jwt"}`, "kid", "abc_-1"},
		{`{"iss":"x","sub":"a\"jti\":\"evil","jti":"real"}`, "jti", "real"},
		{`{"iss":"x"}`, "jti", ""},
		{`{"jti":"unterminated`, "jti", ""},
	} {
		if got := member(seg(c.json), c.name); got != c.want {
			t.Errorf("member(%s, %s) = %q, want %q", c.json, c.name, got, c.want)
		}
	}
	if member("!!!", "kid") != "" {
		t.Error("member of a segment that is not base64url")
	}
}

// TestAuditConcurrentIssuance: many token requests at once each leave
// their record, in one chain whose seqs run on without a gap (the group
// commit numbers them), every request id once.
func TestAuditConcurrentIssuance(t *testing.T) {
	sink := &memSink{}
	log, _ := newAuditLog(t, sink)
	a, err := httpaudit.New(httpaudit.Config{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	f := newOAuthFixture(t)
	svc, err := New(Config{Issuer: testIssuer, Store: f.st, Keys: f.keys})
	if err != nil {
		t.Fatal(err)
	}
	h := a.Handler("oauth2.token", httperr.Writer{}, svc.Handler())
	body := url.Values{"grant_type": {"client_credentials"}, "client_id": {"svc-a"}, "client_secret": {f.secrets["svc-a"]}}.Encode()
	const workers, each = 8, 40
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				req := httptest.NewRequest(http.MethodPost, "/oauth2/token", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != 200 || w.Header().Get(httpaudit.RequestIDHeader) == "" {
					t.Errorf("token: %d %s", w.Code, w.Body)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := log.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	sum, err := verifyAuditBytes(sink.all())
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	recs := sink.take(t)
	ids := map[string]bool{}
	for _, r := range recs {
		if r.Operation != "oauth2.token.client_credentials" || r.Result != audit.ResultOK || ids[r.RequestID] {
			t.Fatalf("record %+v", r)
		}
		ids[r.RequestID] = true
	}
	if len(recs) != workers*each || sum.Records != workers*each || sum.FirstSeq != 1 || sum.LastSeq != uint64(sum.Lines) {
		t.Errorf("%d records, summary %+v; want %d, seqs 1 to the last line", len(recs), sum, workers*each)
	}
}

// verifyAuditBytes verifies a chain written by newAuditLog's signer.
func verifyAuditBytes(b []byte) (*audit.Summary, error) {
	sk, _ := audit.NewSigningKey(bytes.Repeat([]byte{7}, audit.SeedSize))
	v, err := audit.NewVerifier(audit.VerifyOptions{Keys: []ed25519.PublicKey{sk.Public()}, Node: "n1"})
	if err != nil {
		return nil, err
	}
	if err := v.File("mem", bytes.NewReader(b)); err != nil {
		return v.Summary(), err
	}
	return v.Finish()
}
