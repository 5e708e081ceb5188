package kvapi_test

import (
	"bytes"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/keygate/keygate/internal/audit"
	"github.com/keygate/keygate/internal/audit/audittest"
	"github.com/keygate/keygate/internal/audit/httpaudit"
	"github.com/keygate/keygate/internal/httperr"
	"github.com/keygate/keygate/internal/secrets/kvapi"
	"github.com/keygate/keygate/internal/vaultauth/vaultauthtest"
)

// TestAuditRecords: behind the audit log's handler (as the server mounts
// it), a request's record names the operation, the client, the path and
// the version; a change is preceded by a pending record; no record holds
// a value, custom metadata or the token.
func TestAuditRecords(t *testing.T) {
	sink := &audittest.MemSink{}
	log, mac := audittest.NewLog(t, sink)
	a, err := httpaudit.New(httpaudit.Config{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	tokens := vaultauthtest.New(t)
	h, err := kvapi.New(kvapi.Options{Secrets: newService(t), Verifier: tokens.Verifier})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(a.Handler("secret.request", httperr.Writer{Envelope: httperr.Vault}, h))
	t.Cleanup(ts.Close)
	tok := tokens.Token(t, "default", "kgc_app", allScopes...)
	e := &env{t: t, url: ts.URL}

	client := func(op audit.Operation, r audit.Result, reason audit.Reason, key string) audittest.Want {
		return audittest.Want{Op: op, Result: r, Principal: audit.PrincipalClient, ID: "kgc_app", Reason: reason, Key: key}
	}
	steps := []struct {
		name, method, path, body string
		want                     []audittest.Want
	}{
		{"write", "POST", "/v1/secret/data/app/db", `{"data":{"password":"hunter2"}}`,
			[]audittest.Want{client("secret.write", audit.ResultPending, "", "app/db"), client("secret.write", audit.ResultOK, "", "app/db")}},
		{"metadata", "POST", "/v1/secret/metadata/app/db", `{"custom_metadata":{"owner":"sekrit-owner"}}`,
			[]audittest.Want{client("secret.metadata.write", audit.ResultPending, "", "app/db"), client("secret.metadata.write", audit.ResultOK, "", "app/db")}},
		{"read", "GET", "/v1/secret/data/app/db", "", []audittest.Want{client("secret.read", audit.ResultOK, "", "app/db")}},
		{"read of nothing", "GET", "/v1/secret/data/none", "", []audittest.Want{client("secret.read", audit.ResultRefused, "not_found", "none")}},
		{"bad input", "POST", "/v1/secret/data/app/db", `{"data":1}`,
			[]audittest.Want{client("secret.write", audit.ResultPending, "", "app/db"), client("secret.write", audit.ResultRefused, "invalid_request", "app/db")}},
		{"no token", "GET", "/v1/secret/data/app/db", "", []audittest.Want{{Op: "secret.request", Result: audit.ResultRefused, Reason: "no_token"}}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			tk := tok
			if s.name == "no token" {
				tk = ""
			}
			if st, b := e.call(tk, s.method, s.path, s.body); st >= 500 {
				t.Fatalf("%d %s", st, b)
			}
			got := sink.Take(t)
			audittest.Check(t, mac, s.name, got, s.want...)
			if s.name == "read" && got[0].Key.Version != 1 {
				t.Errorf("read: the record names version %d, want 1", got[0].Key.Version)
			}
		})
	}
	all := sink.All()
	for _, secret := range []string{"hunter2", "sekrit", tok[strings.LastIndexByte(tok, '.')+1:]} {
		if bytes.Contains(all, []byte(secret)) {
			t.Errorf("the audit log holds %q", secret)
		}
	}
}
