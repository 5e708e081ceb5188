package issuer

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/audit"
	"github.com/keygate/keygate/internal/audit/audittest"
	"github.com/keygate/keygate/internal/audit/httpaudit"
	"github.com/keygate/keygate/internal/httperr"
)

// TestAuditRecords: the token endpoints tell each request's record who
// made it, what it did, with which key, and the values an auditor must
// match (HMAC'd), with a pending record before every change; no record
// holds a secret, a password or a token. (The admin API's records are
// package admin's to test.)
func TestAuditRecords(t *testing.T) {
	sink := &audittest.MemSink{}
	log, mac := audittest.NewLog(t, sink)
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
	check := func(step string, ws ...audittest.Want) {
		t.Helper()
		audittest.Check(t, mac, step, sink.Take(t), ws...)
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
		audittest.Want{Op: "login.password", Result: audit.ResultPending, Principal: audit.PrincipalUser, ID: "u-alice",
			Hashed: map[string]string{"username": "alice", "family": audittest.Any}},
		audittest.Want{Op: "login.password", Result: audit.ResultOK, Principal: audit.PrincipalUser, ID: "u-alice", Key: kid,
			Hashed: map[string]string{"username": "alice", "family": audittest.Any, "jti": jti(access)}})

	cc := f.issue(t, "svc-a", "")
	check("client_credentials", audittest.Want{Op: "oauth2.token.client_credentials", Result: audit.ResultOK,
		Principal: audit.PrincipalClient, ID: "svc-a", Key: kid, Hashed: map[string]string{"jti": jti(cc)}})

	if r := f.post(t, "/oauth2/token", url.Values{"grant_type": {"client_credentials"}}, [2]string{"svc-a", "wrong-secret"}, ""); r.status != 401 {
		t.Fatalf("wrong secret: %d", r.status)
	}
	check("wrong secret", audittest.Want{Op: "oauth2.token", Result: audit.ResultRefused, Reason: "invalid_client",
		Hashed: map[string]string{"client_id": "svc-a"}})

	r = f.post(t, "/oauth2/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}}, client, "")
	if r.status != 200 {
		t.Fatalf("refresh: %d %v", r.status, r.body)
	}
	access2 := r.body["access_token"].(string)
	check("refresh",
		audittest.Want{Op: "oauth2.token.refresh_token", Result: audit.ResultPending, Principal: audit.PrincipalClient, ID: "svc-a"},
		audittest.Want{Op: "oauth2.token.refresh_token", Result: audit.ResultOK, Principal: audit.PrincipalUser, ID: "u-alice", Key: kid,
			Hashed: map[string]string{"family": audittest.Any, "jti": jti(access2)}})

	if r := f.post(t, "/oauth2/revoke", url.Values{"token": {cc}}, client, ""); r.status != 200 {
		t.Fatalf("revoke: %d", r.status)
	}
	check("revoke",
		audittest.Want{Op: "oauth2.revoke", Result: audit.ResultPending, Principal: audit.PrincipalClient, ID: "svc-a"},
		audittest.Want{Op: "oauth2.revoke", Result: audit.ResultOK, Principal: audit.PrincipalClient, ID: "svc-a",
			Hashed: map[string]string{"jti": jti(cc)}})

	if r := f.post(t, "/oauth2/introspect", url.Values{"token": {access2}}, client, ""); r.status != 200 || r.body["active"] != true {
		t.Fatalf("introspect the refreshed access token: %d %v", r.status, r.body)
	}
	check("introspect", audittest.Want{Op: "oauth2.introspect", Result: audit.ResultOK, Principal: audit.PrincipalClient, ID: "svc-a",
		Hashed: map[string]string{"jti": jti(access2)}})

	// The username quoted: the user's id, u-alice, is in the records.
	for name, secret := range map[string]string{"client secret": client[1], "password": "correct horse battery",
		"access token": access, "refresh token": refresh, "client_credentials token": cc, "username": `"alice"`} {
		if bytes.Contains(sink.All(), []byte(secret)) {
			t.Errorf("the %s is in the audit log", name)
		}
	}
}

// TestAuditConcurrentIssuance: many token requests at once each leave
// their record, in one chain whose seqs run on without a gap (the group
// commit numbers them), every request id once.
func TestAuditConcurrentIssuance(t *testing.T) {
	sink := &audittest.MemSink{}
	log, _ := audittest.NewLog(t, sink)
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
	sum, err := audittest.Verify(sink.All())
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	recs := sink.Take(t)
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
