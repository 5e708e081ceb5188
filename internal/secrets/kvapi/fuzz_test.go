package kvapi_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/secrets/kvapi"
	"github.com/keygate/keygate/internal/vaultauth/vaultauthtest"
)

// FuzzRequest sends arbitrary methods, paths, queries, bodies and content
// types: the answer is never a panic or a 500, always one of the
// documented statuses, and a body in Vault's shape.
func FuzzRequest(f *testing.F) {
	seeds := []struct{ method, path, query, body, ct string }{
		{"GET", "data/a", "version=1", "", ""},
		{"POST", "data/a/b", "", `{"data":{"k":"v"},"options":{"cas":0}}`, ""},
		{"PATCH", "data/a", "", `{"data":{"k":null}}`, "application/merge-patch+json"},
		{"POST", "metadata/a", "", `{"max_versions":"3","cas_required":"true","delete_version_after":"3h25m19s","custom_metadata":{"a":"b"}}`, ""},
		{"PATCH", "metadata/a", "", `{"custom_metadata":{"a":null}}`, "application/merge-patch+json"},
		{"LIST", "metadata/", "", "", ""},
		{"GET", "metadata/a/", "list=true", "", ""},
		{"PUT", "destroy/a", "", `{"versions":"1,2"}`, ""},
		{"POST", "undelete/a", "", `{"versions":[1,"2"]}`, ""},
		{"GET", "subkeys/a", "depth=2&version=0", "", ""},
		{"POST", "config", "", `{"delete_version_after":60}`, ""},
		{"GET", "data/a/../b", "", "", ""},
		{"DELETE", "data/\xff", "", "", ""},
	}
	for _, s := range seeds {
		f.Add(s.method, s.path, s.query, []byte(s.body), s.ct)
	}
	tokens := vaultauthtest.New(f)
	tok := tokens.Token(f, "default", "kgc_fuzz", allScopes...)
	h, err := kvapi.New(kvapi.Options{Secrets: newService(f), Verifier: tokens.Verifier})
	if err != nil {
		f.Fatal(err)
	}
	allowed := map[int]bool{200: true, 204: true, 400: true, 403: true, 404: true, 405: true, 413: true, 415: true}
	f.Fuzz(func(t *testing.T, method, path, query string, body []byte, ct string) {
		if !validMethod(method) {
			return
		}
		r := &http.Request{Method: method, URL: &url.URL{Path: kvapi.Prefix + path, RawQuery: query},
			Header: http.Header{"X-Vault-Token": {tok}}, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body))}
		if ct != "" {
			r.Header.Set("Content-Type", ct)
		}
		r = r.WithContext(t.Context())
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if !allowed[w.Code] {
			t.Fatalf("%s %q ?%q %q: %d %s", method, path, query, body, w.Code, w.Body)
		}
		if w.Code == 204 {
			if w.Body.Len() != 0 {
				t.Fatalf("204 with a body %q", w.Body)
			}
			return
		}
		var v map[string]json.RawMessage
		if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
			t.Fatalf("%d: not JSON: %q", w.Code, w.Body)
		}
		if _, ok := v["errors"]; !ok && w.Code >= 400 && w.Code != 404 {
			t.Fatalf("%d without errors: %s", w.Code, w.Body)
		}
	})
}

// validMethod is a method token net/http would send.
func validMethod(m string) bool {
	if m == "" {
		return false
	}
	for _, c := range m {
		if c <= ' ' || c >= 0x7f || strings.ContainsRune(`()<>@,;:\"/[]?={}`, c) {
			return false
		}
	}
	return true
}

// TestObserveFails: an outcome that cannot be recorded turns the answer
// into a 500 that reveals nothing.
func TestObserveFails(t *testing.T) {
	tokens := vaultauthtest.New(t)
	h, err := kvapi.New(kvapi.Options{Secrets: newService(t), Verifier: tokens.Verifier,
		Observe: func(http.ResponseWriter, *http.Request, kvapi.Outcome) error { return errors.New("audit log full") }})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("POST", "/v1/secret/data/a", strings.NewReader(`{"data":{"k":"v"}}`))
	r.Header.Set("X-Vault-Token", tokens.Token(t, "default", "kgc_test", allScopes...))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 500 || w.Body.String() != `{"errors":["internal error"]}`+"\n" {
		t.Errorf("%d %s", w.Code, w.Body)
	}
	var measured []string
	h, err = kvapi.New(kvapi.Options{Secrets: newService(t), Verifier: tokens.Verifier,
		Measure: func(o *kvapi.Outcome, d time.Duration) {
			measured = append(measured, fmt.Sprint(o.Operation, " ", o.Status, " ", d > 0))
		}})
	if err != nil {
		t.Fatal(err)
	}
	h.ServeHTTP(httptest.NewRecorder(), r)
	if len(measured) != 1 || measured[0] != "secret.write 400 true" { // the first answer read the body
		t.Errorf("measured %q", measured)
	}
	if _, err := kvapi.New(kvapi.Options{Verifier: tokens.Verifier}); err == nil {
		t.Error("New without a store")
	}
}
