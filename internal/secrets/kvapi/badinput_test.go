package kvapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/keygate/keygate/internal/mint"
	"github.com/keygate/keygate/internal/secrets"
	"github.com/keygate/keygate/internal/secrets/kvapi"
)

// TestBadInput: every kind of bad request gets its status and a text
// saying what is wrong, in Vault's error envelope; nothing is written.
func TestBadInput(t *testing.T) {
	many := map[string]string{}
	for i := range secrets.MaxCustomMetadata + 1 {
		many[fmt.Sprint("k", i)] = "v"
	}
	tooMany, _ := json.Marshal(map[string]any{"custom_metadata": many})
	versions := make([]int, 1001)
	for i := range versions {
		versions[i] = i + 1
	}
	manyVersions, _ := json.Marshal(map[string]any{"versions": versions})
	big := `{"data":{"v":"` + strings.Repeat("a", kvapi.DefaultMaxBodyBytes) + `"}}`

	tests := []struct {
		name, method, path, body, ct string
		status                       int
		text                         string // in the error, or the whole error list when it starts with '['
	}{
		{"dot dot", "GET", "/v1/secret/data/a/../b", "", "", 400, `".." segment`},
		{"dot", "GET", "/v1/secret/data/a/./b", "", "", 400, `"." segment`},
		{"empty segment", "GET", "/v1/secret/data/a//b", "", "", 400, "empty segment"},
		{"trailing slash", "POST", "/v1/secret/data/a/", `{"data":{}}`, "", 400, "empty segment"},
		{"no path", "GET", "/v1/secret/data/", "", "", 400, "missing secret path"},
		{"no path at all", "GET", "/v1/secret/data", "", "", 400, "missing secret path"},
		{"encoded slash", "GET", "/v1/secret/data/a%2Fb", "", "", 400, "encoded slash"},
		{"encoded slash lower case", "DELETE", "/v1/secret/metadata/a%2fb", "", "", 400, "encoded slash"},
		{"encoded dot dot", "GET", "/v1/secret/data/a/%2E%2E/b", "", "", 400, `".." segment`},
		{"not UTF-8", "GET", "/v1/secret/data/%FF", "", "", 400, "not UTF-8"},
		{"control character", "GET", "/v1/secret/data/a%00b", "", "", 400, "control character"},
		{"long path", "GET", "/v1/secret/data/" + strings.Repeat("a", secrets.MaxPathBytes+1), "", "", 400, "longer than 512 bytes"},
		{"list of a bad folder", "LIST", "/v1/secret/metadata/a//", "", "", 400, "empty segment"},
		{"unknown route", "GET", "/v1/secret/foo/a", "", "", 404, "unsupported path"},
		{"outside the mount", "GET", "/v1/secretx/data/a", "", "", 404, "unsupported path"},
		{"config with a path", "GET", "/v1/secret/config/a", "", "", 404, "unsupported path"},
		{"list data", "LIST", "/v1/secret/data/a", "", "", 405, "unsupported operation"},
		{"get delete", "GET", "/v1/secret/delete/a", "", "", 405, "unsupported operation"},
		{"delete config", "DELETE", "/v1/secret/config", "", "", 405, "unsupported operation"},
		{"patch subkeys", "PATCH", "/v1/secret/subkeys/a", "{}", "application/merge-patch+json", 405, "unsupported operation"},
		{"body not JSON", "POST", "/v1/secret/data/a", `{"data":`, "", 400, "not a JSON object"},
		{"body an array", "POST", "/v1/secret/data/a", `[1]`, "", 400, "not a JSON object"},
		{"body null", "POST", "/v1/secret/data/a", `null`, "", 400, "not a JSON object"},
		{"body not UTF-8", "POST", "/v1/secret/data/a", "{\"data\":{\"a\":\"\xff\"}}", "", 400, "not UTF-8"},
		{"no data", "POST", "/v1/secret/data/a", `{}`, "", 400, "[no data provided]"},
		{"data null", "POST", "/v1/secret/data/a", `{"data":null}`, "", 400, "[no data provided]"},
		{"data a string", "POST", "/v1/secret/data/a", `{"data":"x"}`, "", 400, "invalid data provided"},
		{"cas a word", "POST", "/v1/secret/data/a", `{"data":{},"options":{"cas":"x"}}`, "", 400, "[error parsing check-and-set parameter]"},
		{"cas negative", "POST", "/v1/secret/data/a", `{"data":{},"options":{"cas":-1}}`, "", 400, "[error parsing check-and-set parameter]"},
		{"cas a fraction", "POST", "/v1/secret/data/a", `{"data":{},"options":{"cas":1.5}}`, "", 400, "[error parsing check-and-set parameter]"},
		{"options not an object", "POST", "/v1/secret/data/a", `{"data":{},"options":1}`, "", 400, "options is not a JSON object"},
		{"cas mismatch", "POST", "/v1/secret/data/a", `{"data":{},"options":{"cas":3}}`, "", 400, "[check-and-set parameter did not match the current version]"},
		{"body too large", "POST", "/v1/secret/data/a", big, "", 413, "too large"},
		{"patch without a type", "PATCH", "/v1/secret/data/a", `{"data":{}}`, "", 400, "invalid Content-Type"},
		{"patch as JSON", "PATCH", "/v1/secret/data/a", `{"data":{}}`, "application/json", 415,
			"[PATCH requires Content-Type of application/merge-patch+json, provided application/json]"},
		{"patch metadata as JSON", "PATCH", "/v1/secret/metadata/a", `{}`, "application/json; charset=utf-8", 415, "merge-patch"},
		{"patch of nothing", "PATCH", "/v1/secret/data/a", `{"data":{"x":1}}`, "application/merge-patch+json", 404, "[]"},
		{"no versions", "POST", "/v1/secret/delete/a", `{}`, "", 400, "[no version number provided]"},
		{"empty versions", "POST", "/v1/secret/undelete/a", `{"versions":[]}`, "", 400, "[no version number provided]"},
		{"version zero", "POST", "/v1/secret/destroy/a", `{"versions":[0]}`, "", 400, "positive integer"},
		{"version a word", "POST", "/v1/secret/destroy/a", `{"versions":["x"]}`, "", 400, "positive integer"},
		{"too many versions", "POST", "/v1/secret/destroy/a", string(manyVersions), "", 413, "more than 1000"},
		{"version query a word", "GET", "/v1/secret/data/a?version=x", "", "", 400, "version is not a non-negative integer"},
		{"version query negative", "GET", "/v1/secret/data/a?version=-1", "", "", 400, "version is not"},
		{"depth a word", "GET", "/v1/secret/subkeys/a?depth=x", "", "", 400, "depth is not"},
		{"max_versions a word", "POST", "/v1/secret/metadata/a", `{"max_versions":"x"}`, "", 400, "max_versions"},
		{"cas_required a number", "POST", "/v1/secret/metadata/a", `{"cas_required":2}`, "", 400, "cas_required is not a boolean"},
		{"delete_version_after a word", "POST", "/v1/secret/metadata/a", `{"delete_version_after":"forever"}`, "", 400, "not a duration"},
		{"delete_version_after negative", "POST", "/v1/secret/config", `{"delete_version_after":"-5s"}`, "", 400, "out of range"},
		{"delete_version_after huge", "POST", "/v1/secret/config", `{"delete_version_after":99999999999999}`, "", 400, "out of range"},
		{"custom_metadata not strings", "POST", "/v1/secret/metadata/a", `{"custom_metadata":{"a":1}}`, "", 400, `"a" is not a string`},
		{"custom_metadata too many", "POST", "/v1/secret/metadata/a", string(tooMany), "", 400, "custom_metadata"},
		// A member given twice would be read one way here and another by a
		// proxy or an audit reader in front (encoding/json keeps the last).
		{"data twice", "POST", "/v1/secret/data/a", `{"data":{"v":"seen"},"data":{"v":"stored"}}`, "", 400, `"data" appears twice`},
		{"options twice", "POST", "/v1/secret/data/a", `{"data":{},"options":{"cas":7},"options":{}}`, "", 400, `"options" appears twice`},
		{"cas twice", "POST", "/v1/secret/data/a", `{"data":{},"options":{"cas":7,"cas":0}}`, "", 400, `"cas" appears twice`},
		{"patch data twice", "PATCH", "/v1/secret/data/a", `{"data":{"v":1},"data":{"v":2}}`, "application/merge-patch+json", 400, "twice"},
		{"versions twice", "POST", "/v1/secret/destroy/a", `{"versions":[1],"versions":[2]}`, "", 400, `"versions" appears twice`},
		{"max_versions twice", "POST", "/v1/secret/metadata/a", `{"max_versions":1,"max_versions":0}`, "", 400, "twice"},
		{"custom_metadata key twice", "POST", "/v1/secret/metadata/a", `{"custom_metadata":{"k":"a","k":"b"}}`, "", 400, `"k" appears twice`},
		{"config member twice", "POST", "/v1/secret/config", `{"cas_required":true,"cas_required":false}`, "", 400, "twice"},
		{"data after the body", "POST", "/v1/secret/data/a", `{"data":{}} {"data":{}}`, "", 400, ""},
		{"read of nothing", "GET", "/v1/secret/data/nothing", "", "", 404, "[]"},
		{"metadata of nothing", "GET", "/v1/secret/metadata/nothing", "", "", 404, "[]"},
		{"empty list", "LIST", "/v1/secret/metadata/nothing/", "", "", 404, "[]"},
	}
	e := start(t)
	tok := e.token("default", allScopes...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hdr []string
			if tt.ct != "" {
				hdr = []string{"Content-Type", tt.ct}
			}
			st, b := e.call(tok, tt.method, tt.path, tt.body, hdr...)
			if st != tt.status {
				t.Fatalf("%d %s, want %d", st, b, tt.status)
			}
			errs := errorsOf(t, b)
			if strings.HasPrefix(tt.text, "[") {
				if got := "[" + strings.Join(errs, ",") + "]"; got != tt.text {
					t.Errorf("errors %s, want %s", got, tt.text)
				}
			} else if len(errs) != 1 || !strings.Contains(errs[0], tt.text) {
				t.Errorf("errors %q, want one holding %q", errs, tt.text)
			}
		})
	}
	if st, _ := e.call(tok, "LIST", "/v1/secret/metadata/", ""); st != http.StatusNotFound {
		t.Errorf("bad input wrote something: the store lists %d", st)
	}
}

// TestRefusals: a request without a usable token, or to a sealed node, is
// refused before anything else, saying why.
func TestRefusals(t *testing.T) {
	e := start(t)
	noTenant := e.tokens.Mint(t, mint.Claims{Subject: "kgc_test", Scope: strings.Join(allScopes, " "), TTL: 3600e9})
	good := e.token("default", allScopes...)
	tests := []struct {
		name   string
		hdr    []string
		status int
		text   string
	}{
		{"no token", nil, 403, "permission denied: no token"},
		{"garbage token", []string{"X-Vault-Token", "garbage"}, 403, "permission denied: token refused"},
		{"not bearer", []string{"Authorization", "Basic eDp5"}, 403, "not Bearer"},
		{"two tokens", []string{"X-Vault-Token", good, "Authorization", "Bearer " + noTenant}, 403, "more than one token"},
		{"no tenant", []string{"X-Vault-Token", noTenant}, 403, "names no tenant"},
		{"bearer", []string{"Authorization", "Bearer " + good}, 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, b := e.call("", "GET", "/v1/secret/data/a", "", tt.hdr...)
			if st != tt.status || tt.text != "" && !strings.Contains(errorsOf(t, b)[0], tt.text) {
				t.Errorf("%d %s, want %d %q", st, b, tt.status, tt.text)
			}
		})
	}
	e.sealed.Store(true)
	if st, b := e.call(good, "GET", "/v1/secret/data/a", ""); st != 503 || errorsOf(t, b)[0] != "Vault is sealed" {
		t.Errorf("sealed: %d %s", st, b)
	}
}
