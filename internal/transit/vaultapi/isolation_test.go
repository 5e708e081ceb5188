package vaultapi_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/keygate/keygate/internal/transit/vaultapi"
)

// denied begins the answer to a request the scopes do not allow.
const denied = `{"errors":["permission denied: the token's scopes do not grant `

// TestTenantIsolation runs every route, as a caller of tenant alpha holding
// every scope, against tenant beta's keys by name: each is 404 (or, for
// the routes that make a key, makes alpha's own), and alpha's list never
// shows them. A caller without the route's scope is refused 403 from its
// scopes alone: the same answer whether the key exists or not.
func TestTenantIsolation(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: every route and scope against another tenant's keys; run without -short")
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	e := startWith(t, func(_ http.ResponseWriter, _ *http.Request, o vaultapi.Outcome) error {
		mu.Lock()
		seen[o.Operation] = true
		mu.Unlock()
		return nil
	})
	e.tenant("alpha")
	e.tenant("beta")
	alpha := e.token("alpha", allScopes...)
	alphaNoAdmin := e.token("alpha", allScopes[1:]...)
	beta := e.token("beta", allScopes...)
	must := func(tok, method, path, body string) map[string]any {
		t.Helper()
		st, b := e.call(tok, method, path, body)
		if st != http.StatusOK {
			t.Fatalf("%s %s: %d %s", method, path, st, b)
		}
		return data(t, b)
	}
	must(beta, "POST", "/v1/transit/keys/b-aes", `{"exportable":true}`)
	must(beta, "POST", "/v1/transit/keys/b-ed", `{"type":"ed25519"}`)
	ct := must(beta, "POST", "/v1/transit/encrypt/b-aes", `{"plaintext":"aGk="}`)["ciphertext"].(string)
	sig := must(beta, "POST", "/v1/transit/sign/b-ed", `{"input":"aGk="}`)["signature"].(string)
	mac := must(beta, "POST", "/v1/transit/hmac/b-aes", `{"input":"aGk="}`)["hmac"].(string)
	betaWrap := must(beta, "GET", "/v1/transit/wrapping_key", "")["public_key"]

	routes := []struct {
		name, method, path, body string
		tok                      string // alpha's token, unless set
	}{
		{"read", "GET", "/v1/transit/keys/b-aes", "", ""},
		{"delete", "DELETE", "/v1/transit/keys/b-aes", "", ""},
		{"config", "POST", "/v1/transit/keys/b-aes/config", `{"deletion_allowed":true}`, ""},
		{"rotate", "POST", "/v1/transit/keys/b-aes/rotate", "", ""},
		{"trim", "PUT", "/v1/transit/keys/b-aes/trim", `{"min_available_version":1}`, ""},
		{"import_version", "POST", "/v1/transit/keys/b-aes/import_version", `{"ciphertext":"AAAA"}`, ""},
		{"export", "GET", "/v1/transit/export/encryption-key/b-aes", "", ""},
		{"export version", "GET", "/v1/transit/export/public-key/b-ed/1", "", ""},
		{"backup", "GET", "/v1/transit/backup/b-aes", "", ""},
		{"encrypt", "POST", "/v1/transit/encrypt/b-aes", `{"plaintext":"aGk="}`, alphaNoAdmin},
		{"encrypt batch", "POST", "/v1/transit/encrypt/b-aes", `{"batch_input":[{"plaintext":"aGk="}]}`, alphaNoAdmin},
		{"decrypt", "POST", "/v1/transit/decrypt/b-aes", `{"ciphertext":"` + ct + `"}`, ""},
		{"decrypt batch", "POST", "/v1/transit/decrypt/b-aes", `{"batch_input":[{"ciphertext":"` + ct + `"}]}`, ""},
		{"rewrap", "POST", "/v1/transit/rewrap/b-aes", `{"ciphertext":"` + ct + `"}`, ""},
		{"rewrap batch", "POST", "/v1/transit/rewrap/b-aes", `{"batch_input":[{"ciphertext":"` + ct + `"}]}`, ""},
		{"datakey plaintext", "POST", "/v1/transit/datakey/plaintext/b-aes", "", ""},
		{"datakey wrapped", "POST", "/v1/transit/datakey/wrapped/b-aes", "", ""},
		{"sign", "POST", "/v1/transit/sign/b-ed", `{"input":"aGk="}`, ""},
		{"sign batch", "POST", "/v1/transit/sign/b-ed/sha2-256", `{"batch_input":[{"input":"aGk="}]}`, ""},
		{"verify", "POST", "/v1/transit/verify/b-ed", `{"input":"aGk=","signature":"` + sig + `"}`, ""},
		{"verify batch", "POST", "/v1/transit/verify/b-ed", `{"batch_input":[{"input":"aGk=","signature":"` + sig + `"}]}`, ""},
		{"hmac", "POST", "/v1/transit/hmac/b-aes", `{"input":"aGk="}`, ""},
		{"hmac batch", "POST", "/v1/transit/hmac/b-aes/sha2-256", `{"batch_input":[{"input":"aGk="}]}`, ""},
		{"verify hmac", "POST", "/v1/transit/verify/b-aes", `{"input":"aGk=","hmac":"` + mac + `"}`, ""},
		{"verify hmac batch", "POST", "/v1/transit/verify/b-aes", `{"batch_input":[{"input":"aGk=","hmac":"` + mac + `"}]}`, ""},
	}
	for _, r := range routes {
		tok := r.tok
		if tok == "" {
			tok = alpha
		}
		if st, b := e.call(tok, r.method, r.path, r.body); st != http.StatusNotFound {
			t.Errorf("%s as alpha: %d %s, want 404", r.name, st, b)
		}
		if st, b := e.call(beta, r.method, r.path, r.body); st == http.StatusNotFound {
			t.Errorf("%s as beta, the owner: 404 %s", r.name, b)
		}
	}

	// The routes that make a key make alpha's own under the name; beta's
	// key is untouched, and ciphertexts do not cross.
	must(alpha, "POST", "/v1/transit/keys/a-own", "")
	st, b := e.call(alpha, "LIST", "/v1/transit/keys", "")
	if st != http.StatusOK || !slices.Equal(keysOf(t, b), []string{"a-own"}) {
		t.Errorf("alpha's list: %d %s", st, b)
	}
	st, b = e.call(alpha, "GET", "/v1/transit/keys?list=true", "")
	if st != http.StatusOK || !slices.Equal(keysOf(t, b), []string{"a-own"}) {
		t.Errorf("alpha's list (GET ?list=true): %d %s", st, b)
	}
	betaLatest := must(beta, "GET", "/v1/transit/keys/b-aes", "")["latest_version"]
	if d := must(alpha, "POST", "/v1/transit/keys/b-aes", ""); d["latest_version"] != 1.0 {
		t.Errorf("alpha's b-aes: %v", d)
	}
	if d := must(alpha, "POST", "/v1/transit/encrypt/b-ed", `{"plaintext":"aGk="}`); d["key_version"] != 1.0 { // upsert: alpha's own aes key
		t.Errorf("upsert as alpha: %v", d)
	}
	if st, b := e.call(alpha, "POST", "/v1/transit/decrypt/b-aes", `{"ciphertext":"`+ct+`"}`); st != http.StatusBadRequest {
		t.Errorf("beta's ciphertext under alpha's key of the same name: %d %s", st, b)
	}
	if d := must(beta, "GET", "/v1/transit/keys/b-aes", ""); d["latest_version"] != betaLatest {
		t.Errorf("beta's key changed: %v", d)
	}
	if d := must(beta, "GET", "/v1/transit/keys/b-ed", ""); d["type"] != "ed25519" {
		t.Errorf("beta's b-ed changed: %v", d)
	}
	if st, b := e.call(alpha, "POST", "/v1/transit/keys/b-imp/import", `{"ciphertext":"AAAA"}`); st != http.StatusBadRequest || strings.Contains(string(b), "existing") {
		t.Errorf("import as alpha: %d %s", st, b)
	}
	if w := must(alpha, "GET", "/v1/transit/wrapping_key", "")["public_key"]; w == betaWrap || w == "" {
		t.Error("alpha and beta share a wrapping key")
	}
	must(alpha, "POST", "/v1/transit/random", "")
	must(alpha, "POST", "/v1/transit/hash", `{"input":"aGk="}`)

	// Without the scope: 403 from the scopes alone, the same for a key
	// that exists and one that does not.
	none := e.token("alpha", "demo", "transit:read:zzz", "transit:encrypt:other")
	every := []struct{ method, path, body string }{
		{"LIST", "/v1/transit/keys", ""},
		{"POST", "/v1/transit/keys/%s", ""},
		{"GET", "/v1/transit/keys/%s", ""},
		{"DELETE", "/v1/transit/keys/%s", ""},
		{"POST", "/v1/transit/keys/%s/config", "{}"},
		{"POST", "/v1/transit/keys/%s/rotate", ""},
		{"POST", "/v1/transit/keys/%s/trim", "{}"},
		{"POST", "/v1/transit/keys/%s/import", "{}"},
		{"POST", "/v1/transit/keys/%s/import_version", "{}"},
		{"GET", "/v1/transit/wrapping_key", ""},
		{"GET", "/v1/transit/export/encryption-key/%s", ""},
		{"POST", "/v1/transit/encrypt/%s", `{"plaintext":"aGk="}`},
		{"POST", "/v1/transit/decrypt/%s", `{"ciphertext":"x"}`},
		{"POST", "/v1/transit/rewrap/%s", `{"ciphertext":"x"}`},
		{"POST", "/v1/transit/datakey/plaintext/%s", ""},
		{"POST", "/v1/transit/sign/%s", ""},
		{"POST", "/v1/transit/verify/%s", `{"signature":"x"}`},
		{"POST", "/v1/transit/hmac/%s", ""},
		{"POST", "/v1/transit/random", ""},
		{"POST", "/v1/transit/hash", `{"input":"aGk="}`},
		{"GET", "/v1/transit/backup/%s", ""},
		{"POST", "/v1/transit/restore/%s", `{"backup":"AAAA"}`},
		{"POST", "/v1/transit/restore", `{"backup":"AAAA","name":"%s"}`},
	}
	for _, r := range every {
		for _, name := range []string{"a-own", "nope"} {
			path := strings.Replace(r.path, "%s", name, 1)
			if st, b := e.call(none, r.method, path, r.body); st != http.StatusForbidden || !strings.HasPrefix(string(b), denied) {
				t.Errorf("%s %s without the scope: %d %s", r.method, path, st, b)
			}
		}
	}
	for _, name := range vaultapi.Operations() {
		if !seen[name] {
			t.Errorf("route %s not exercised", name)
		}
	}
}

func keysOf(t *testing.T, body []byte) []string {
	t.Helper()
	var env struct {
		Data struct {
			Keys []string `json:"keys"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatal(err)
	}
	return env.Data.Keys
}
