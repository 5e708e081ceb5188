package kvapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestSpellings: every other spelling of a request is either refused or
// is, for the scope decision and for the store alike, the one request it
// names: a token scoped to app/ reaches nothing else, whatever the method's
// case, a method-override header, the action segment's case, encoded
// dots or slashes, path parameters, a Unicode form of the name or a
// namespace header; and nothing it sends changes what it cannot.
func TestSpellings(t *testing.T) {
	e := start(t)
	admin := e.token("alpha", allScopes...)
	for _, p := range []string{"app/x", "other/x", "café/x"} {
		if st, b := e.call(admin, "POST", "/v1/secret/data/"+p, `{"data":{"v":"`+p+`"}}`); st != http.StatusOK {
			t.Fatalf("seed %s: %d %s", p, st, b)
		}
	}
	if st, b := e.call(e.token("beta", allScopes...), "POST", "/v1/secret/data/app/x", `{"data":{"v":"beta"}}`); st != http.StatusOK {
		t.Fatalf("seed beta: %d %s", st, b)
	}
	app := e.token("alpha", "secrets:read:app/*", "secrets:read:café/*")
	for _, tc := range []struct {
		name, method, path string
		hdr                []string
		status             int
	}{
		{"lower-case get", "get", "/v1/secret/data/other/x", nil, http.StatusMethodNotAllowed},
		{"lower-case delete", "delete", "/v1/secret/data/app/x", nil, http.StatusMethodNotAllowed},
		{"lower-case list", "list", "/v1/secret/metadata/", nil, http.StatusMethodNotAllowed},
		{"HEAD", "HEAD", "/v1/secret/data/app/x", nil, http.StatusMethodNotAllowed},
		{"override to read", "POST", "/v1/secret/data/app/x", []string{"X-HTTP-Method-Override", "GET"}, http.StatusForbidden},
		{"override to delete", "GET", "/v1/secret/data/app/x", []string{"X-HTTP-Method-Override", "DELETE"}, http.StatusOK},
		{"upper-case action", "GET", "/v1/secret/DATA/other/x", nil, http.StatusNotFound},
		{"upper-case mount", "GET", "/v1/SECRET/data/other/x", nil, http.StatusNotFound},
		{"dot dot out of the scope", "GET", "/v1/secret/data/app/../other/x", nil, http.StatusBadRequest},
		{"encoded dot dot", "GET", "/v1/secret/data/app/%2e%2e/other/x", nil, http.StatusBadRequest},
		{"encoded slash", "GET", "/v1/secret/data/app%2F..%2Fother/x", nil, http.StatusBadRequest},
		{"double slash", "GET", "/v1/secret/data/app//x", nil, http.StatusBadRequest},
		{"trailing slash", "GET", "/v1/secret/data/app/x/", nil, http.StatusBadRequest},
		{"path parameter", "GET", "/v1/secret/data/app/x;other/x", nil, http.StatusNotFound},
		{"NUL", "GET", "/v1/secret/data/app/x%00", nil, http.StatusBadRequest},
		{"scoped name not NFC", "GET", "/v1/secret/data/cafe\u0301/x", nil, http.StatusForbidden},
		{"scoped name NFC", "GET", "/v1/secret/data/caf%C3%A9/x", nil, http.StatusOK},
		{"overlong UTF-8 slash", "GET", "/v1/secret/data/app%C0%AF..%C0%AFother/x", nil, http.StatusBadRequest},
		{"another tenant's namespace", "GET", "/v1/secret/data/app/x", []string{"X-Vault-Namespace", "beta"}, http.StatusOK},
		{"list out of the scope", "LIST", "/v1/secret/metadata/", nil, http.StatusForbidden},
		{"list as GET out of the scope", "GET", "/v1/secret/metadata/?list=true", nil, http.StatusForbidden},
		{"long path", "GET", "/v1/secret/data/app/" + strings.Repeat("x", 4096), nil, http.StatusBadRequest},
	} {
		st, b := e.call(app, tc.method, tc.path, "", tc.hdr...)
		if st != tc.status {
			t.Errorf("%s: %s %s: %d %s, want %d", tc.name, tc.method, tc.path, st, b, tc.status)
		}
		if st == http.StatusOK && (strings.Contains(string(b), "other/x") || strings.Contains(string(b), "beta")) {
			t.Errorf("%s: the answer holds another path's or tenant's value: %s", tc.name, b)
		}
	}
	// Nothing above changed anything: every value reads as written.
	for _, p := range []string{"app/x", "other/x", "café/x"} {
		if st, b := e.call(admin, "GET", "/v1/secret/data/"+p, ""); st != http.StatusOK || !strings.Contains(string(b), `"v":"`+p+`"`) ||
			strings.Contains(string(b), `"version":2`) {
			t.Errorf("%s afterwards: %d %s", p, st, b)
		}
	}
}

// TestCASRace: writers racing with the same cas over HTTP, on a path and
// on a new one (cas 0): exactly one wins each round, the others are
// refused with Vault's check-and-set text, and no write is lost or
// doubled.
func TestCASRace(t *testing.T) {
	e := start(t)
	tok := e.token("alpha", allScopes...)
	const writers = 8
	for round, cas := range []int{0, 1, 2} {
		type answer struct {
			status int
			body   string
		}
		answers := make(chan answer, writers)
		for w := range writers {
			go func() {
				st, b := e.call(tok, "POST", "/v1/secret/data/race", fmt.Sprintf(`{"data":{"w":%d},"options":{"cas":%d}}`, w, cas))
				answers <- answer{st, string(b)}
			}()
		}
		won := 0
		for range writers {
			a := <-answers
			switch {
			case a.status == http.StatusOK && strings.Contains(a.body, fmt.Sprintf(`"version":%d`, cas+1)):
				won++
			case a.status == http.StatusBadRequest && strings.Contains(a.body, "check-and-set parameter did not match the current version"):
			default:
				t.Errorf("round %d: %d %s", round, a.status, a.body)
			}
		}
		if won != 1 {
			t.Errorf("round %d (cas %d): %d writers won, want 1", round, cas, won)
		}
	}
	if st, b := e.call(tok, "GET", "/v1/secret/metadata/race", ""); st != http.StatusOK || !strings.Contains(string(b), `"current_version":3`) {
		t.Errorf("metadata: %d %s, want version 3", st, b)
	}
}

// TestWrappingRefused: a request asking for a wrapped answer (Vault's
// X-Vault-Wrap-TTL), which keygate does not make, is refused, not answered
// with the secret in the clear where the client meant a wrapping token
// to be handed on instead.
func TestWrappingRefused(t *testing.T) {
	e := start(t)
	tok := e.token("alpha", allScopes...)
	e.seed("alpha", "app/w")
	for _, rc := range everyRoute("app/w") {
		st, b := e.call(tok, rc.method, rc.path, rc.body, "X-Vault-Wrap-TTL", "5m")
		if st != http.StatusBadRequest || !strings.Contains(string(b), "wrapping") {
			t.Errorf("%s: %d %s, want 400 naming response wrapping", rc.name, st, b)
		}
	}
	if st, b := e.call(tok, "GET", "/v1/secret/data/app/w", ""); st != http.StatusOK || !strings.Contains(string(b), `"version":2`) {
		t.Errorf("afterwards: %d %s, want the seeded version 2 unchanged", st, b)
	}
}
