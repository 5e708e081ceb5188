package vaultapi_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/mint"
	"github.com/keygate/keygate/internal/transit/vaultapi"
	"github.com/keygate/keygate/jose"
)

// errorsOf decodes a Vault error answer.
func errorsOf(t *testing.T, body []byte) []string {
	t.Helper()
	var v struct {
		Errors []string `json:"errors"`
	}
	if err := json.Unmarshal(body, &v); err != nil || v.Errors == nil {
		t.Fatalf("not a Vault error answer: %s", body)
	}
	return v.Errors
}

// expect checks a status and that the error message contains want.
func expect(t *testing.T, what string, st int, body []byte, status int, want string) {
	t.Helper()
	if st != status {
		t.Errorf("%s: %d %s, want %d", what, st, body, status)
		return
	}
	if want != "" {
		if errs := errorsOf(t, body); len(errs) != 1 || !strings.Contains(errs[0], want) {
			t.Errorf("%s: errors %q, want one containing %q", what, errs, want)
		}
	}
}

// TestBadInput: each kind of bad input is a clear 4xx in Vault's shape,
// never a 500 or a partial answer.
func TestBadInput(t *testing.T) {
	e := start(t)
	e.tenant("other")
	tok := e.token("default", allScopes...)
	other := e.token("other", allScopes...)
	post := func(path, body string) (int, []byte) { return e.call(tok, "POST", "/v1/transit/"+path, body) }
	must := func(path, body string) map[string]any {
		t.Helper()
		st, b := post(path, body)
		if st != http.StatusOK {
			t.Fatalf("%s: %d %s", path, st, b)
		}
		return data(t, b)
	}
	must("keys/k", "")
	must("keys/k2", "")
	must("keys/ed", `{"type":"ed25519"}`)
	ct := must("encrypt/k", `{"plaintext":"aGVsbG8="}`)["ciphertext"].(string)
	payload := ct[len("vault:v1:"):]
	raw, _ := base64.StdEncoding.DecodeString(payload)
	altered := append([]byte{}, raw...)
	altered[len(altered)-1] ^= 1

	for _, tc := range []struct {
		name, path, body string
		status           int
		want             string
	}{
		{"plaintext not base64", "encrypt/k", `{"plaintext":"not base64!"}`, 400, "illegal base64"},
		{"context not base64", "encrypt/k", `{"plaintext":"aGk=","context":"%%"}`, 400, "base64"},
		{"no plaintext", "encrypt/k", `{}`, 400, "missing plaintext"},
		{"plaintext an object", "encrypt/k", `{"plaintext":{}}`, 400, "plaintext"},
		{"key_version not a number", "encrypt/k", `{"plaintext":"aGk=","key_version":"x"}`, 400, "key_version"},
		{"key_version newer", "encrypt/k", `{"plaintext":"aGk=","key_version":7}`, 400, ""},
		{"encrypt with a signing key", "encrypt/ed", `{"plaintext":"aGk="}`, 400, ""},
		{"sign with an AES key", "sign/k", `{"input":"aGk="}`, 400, ""},
		{"bad hash algorithm", "sign/ed/md5", `{"input":"aGk="}`, 400, "hash algorithm"},
		{"ciphertext without prefix", "decrypt/k", `{"ciphertext":"` + payload + `"}`, 400, "prefix"},
		{"ciphertext payload not base64", "decrypt/k", `{"ciphertext":"vault:v1:@@@@"}`, 400, "base64"},
		{"ciphertext truncated", "decrypt/k", `{"ciphertext":"vault:v1:` + base64.StdEncoding.EncodeToString(raw[:20]) + `"}`, 400, ""},
		{"ciphertext altered", "decrypt/k", `{"ciphertext":"vault:v1:` + base64.StdEncoding.EncodeToString(altered) + `"}`, 400, "authentication failed"},
		{"ciphertext of another key", "decrypt/k2", `{"ciphertext":"` + ct + `"}`, 400, "authentication failed"},
		{"ciphertext of a version not made", "decrypt/k", `{"ciphertext":"vault:v9:` + payload + `"}`, 400, "version"},
		{"ciphertext version 0", "decrypt/k", `{"ciphertext":"vault:v0:` + payload + `"}`, 400, ""},
		{"no ciphertext", "decrypt/k", `{}`, 400, "missing ciphertext"},
		{"datakey bits", "datakey/plaintext/k", `{"bits":100}`, 400, "bit length"},
		{"datakey kind", "datakey/both/k", ``, 400, "plaintext' or 'wrapped"},
		{"not JSON", "encrypt/k", `plaintext=aGk=`, 400, "JSON"},
		{"duplicate member", "encrypt/k", `{"plaintext":"aGk=","plaintext":"aGk="}`, 400, "twice"},
		{"batch not a list", "encrypt/k", `{"batch_input":{"plaintext":"aGk="}}`, 400, "batch"},
		{"empty batch", "encrypt/k", `{"batch_input":[]}`, 400, "missing batch input"},
		{"context in some items", "encrypt/k", `{"batch_input":[{"plaintext":"aGk=","context":"YQ=="},{"plaintext":"aGk="}]}`, 400, "context should be set"},
		{"random too many", "random/200000", ``, 400, "bytes"},
		{"random format", "random", `{"format":"base32"}`, 400, "format"},
		{"hash sha1", "hash/sha1", `{"input":"aGk="}`, 400, "algorithm"},
		{"config min_decryption too new", "keys/k/config", `{"min_decryption_version":5}`, 400, ""},
		{"trim without min_encryption", "keys/k/trim", `{"min_available_version":1}`, 400, ""},
		{"auto_rotate_period too short", "keys/k/config", `{"auto_rotate_period":"10m"}`, 400, "at least an hour"},
		{"unknown key type", "keys/z", `{"type":"aes512"}`, 400, "unknown key type"},
		{"import garbage", "keys/imp/import", `{"ciphertext":"AAAA"}`, 400, ""},
		{"delete without deletion_allowed", "keys/k", ``, 0, ""}, // checked below with DELETE
	} {
		if tc.status == 0 {
			continue
		}
		st, b := post(tc.path, tc.body)
		expect(t, tc.name, st, b, tc.status, tc.want)
	}

	// A ciphertext of another tenant's key of the same name does not open.
	if st, b := e.call(other, "POST", "/v1/transit/keys/k", ""); st != http.StatusOK {
		t.Fatalf("other's k: %d %s", st, b)
	}
	st, b := e.call(other, "POST", "/v1/transit/decrypt/k", `{"ciphertext":"`+ct+`"}`)
	expect(t, "ciphertext of another tenant", st, b, 400, "authentication failed")

	// min_decryption_version and min_encryption_version.
	must("keys/k/rotate", "")
	must("keys/k/config", `{"min_decryption_version":2,"min_encryption_version":2}`)
	st, b = post("decrypt/k", `{"ciphertext":"`+ct+`"}`)
	expect(t, "decrypt below min_decryption_version", st, b, 400, "version")
	st, b = post("encrypt/k", `{"plaintext":"aGk=","key_version":1}`)
	expect(t, "encrypt below min_encryption_version", st, b, 400, "")
	st, b = post("rewrap/k", `{"ciphertext":"`+ct+`"}`)
	expect(t, "rewrap below min_decryption_version", st, b, 400, "version")

	// A deleted key is not found anywhere.
	must("keys/k2/config", `{"deletion_allowed":true}`)
	st, b = e.call(tok, "DELETE", "/v1/transit/keys/k", "")
	expect(t, "delete without deletion_allowed", st, b, 400, "deletion is not allowed")
	if st, b := e.call(tok, "DELETE", "/v1/transit/keys/k2", ""); st != http.StatusNoContent || len(b) != 0 {
		t.Fatalf("delete: %d %s", st, b)
	}
	for _, path := range []string{"encrypt/k2", "decrypt/k2", "rewrap/k2", "datakey/wrapped/k2", "hmac/k2", "keys/k2/rotate"} {
		tok := e.token("default", allScopes[1:]...) // no transit:admin: no upsert
		st, b := e.call(tok, "POST", "/v1/transit/"+path, `{"plaintext":"aGk=","ciphertext":"`+ct+`","input":"aGk="}`)
		if path == "keys/k2/rotate" {
			st, b = post(path, "")
		}
		expect(t, path+" after delete", st, b, 404, "")
	}
	if st, b := e.call(tok, "GET", "/v1/transit/keys/k2", ""); st != http.StatusNotFound || string(b) != `{"errors":[]}`+"\n" {
		t.Errorf("read after delete: %d %s", st, b)
	}

	// Paths and methods.
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/v1/transit/encrypt/k", 405},
		{"PATCH", "/v1/transit/keys/k", 405},
		{"POST", "/v1/transit/keys", 405},
		{"GET", "/v1/transit/keys", 405},
		{"POST", "/v1/transit/nothing/k", 404},
		{"POST", "/v1/transit/encrypt/", 404},
		{"POST", "/v1/transit/encrypt/a/b", 404},
		{"POST", "/v1/transit/encrypt/-bad-", 404},
		{"GET", "/v1/transit/keys/k/nothing", 404},
	} {
		st, b := e.call(tok, tc.method, tc.path, "")
		expect(t, tc.method+" "+tc.path, st, b, tc.status, "")
	}
}

// TestLimits: a body over MaxBodyBytes and a batch over MaxBatchItems are
// 413, before any work.
func TestLimits(t *testing.T) {
	e := start(t)
	tok := e.token("default", allScopes...)
	e.call(tok, "POST", "/v1/transit/keys/k", "")
	big := `{"plaintext":"` + strings.Repeat("A", vaultapi.DefaultMaxBodyBytes) + `"}`
	st, b := e.call(tok, "POST", "/v1/transit/encrypt/k", big)
	expect(t, "body over the limit", st, b, 413, "too large")
	items := strings.Repeat(`{"plaintext":""},`, vaultapi.DefaultMaxBatchItems) + `{"plaintext":""}`
	st, b = e.call(tok, "POST", "/v1/transit/encrypt/k", `{"batch_input":[`+items+`]}`)
	expect(t, "batch over the limit", st, b, 413, "too many items")
	items = strings.Repeat(`{"plaintext":""},`, vaultapi.DefaultMaxBatchItems-1) + `{"plaintext":""}`
	if st, b := e.call(tok, "POST", "/v1/transit/encrypt/k", `{"batch_input":[`+items+`]}`); st != http.StatusOK {
		t.Errorf("batch at the limit: %d %.200s", st, b)
	}
}

// TestAuthentication: only a valid token of the node's own, in one header
// or the same in both, is accepted; anything else is 403 with Vault's
// message, whatever the route.
func TestAuthentication(t *testing.T) {
	e := startObserved(t)
	tok := e.token("default", allScopes...)
	send := func(h http.Header) (int, []byte) {
		req, _ := http.NewRequest("POST", e.url+"/v1/transit/random", nil)
		for k, v := range h {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		n, _ := resp.Body.Read(buf)
		b.Write(buf[:n])
		return resp.StatusCode, []byte(b.String())
	}
	if st, b := send(http.Header{"Authorization": {"Bearer " + tok}}); st != http.StatusOK {
		t.Errorf("Authorization: Bearer: %d %s", st, b)
	}
	if st, b := send(http.Header{"Authorization": {"bearer " + tok}, "X-Vault-Token": {tok}}); st != http.StatusOK {
		t.Errorf("both headers, the same token: %d %s", st, b)
	}
	// A token signed by a key the node does not have, claiming its issuer.
	fk, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	foreign, err := jose.NewSigner(jose.ES256, "foreign", fk)
	if err != nil {
		t.Fatal(err)
	}
	forged, err := mint.Sign(foreign, mint.Claims{Issuer: e.node.Issuer(), Subject: "x", Audience: []string{audience},
		Scope: "transit:random", TTL: time.Hour}, time.Now(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	badTenant, err := e.node.Mint(mint.Claims{Subject: "x", Audience: []string{audience}, Scope: "transit:random", TTL: time.Hour,
		Extra: map[string]json.RawMessage{"tenant": json.RawMessage(`["default"]`)}})
	if err != nil {
		t.Fatal(err)
	}
	otherAud, _ := e.node.Mint(mint.Claims{Subject: "x", Audience: []string{"https://elsewhere"}, Scope: "transit:random", TTL: time.Hour})
	// Signed by the node's own key, but without a tenant claim: no
	// tenant's, never taken for the default's (node.Mint would add one).
	noTenant, err := mint.Sign(e.node.Keys().Signer(), mint.Claims{Issuer: e.node.Issuer(), Subject: "x", Audience: []string{audience},
		Scope: "transit:random", TTL: time.Hour}, time.Now(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	expired, err := mint.Sign(e.node.Keys().Signer(), mint.Claims{Issuer: e.node.Issuer(), Subject: "x", Audience: []string{audience},
		Scope: "transit:random", TTL: time.Minute, Extra: map[string]json.RawMessage{"tenant": json.RawMessage(`"default"`)}},
		time.Now().Add(-time.Hour), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	// Each problem keeps Vault's status and envelope, and says which it is
	// in the text Vault clients show and in the audit record's reason.
	for _, c := range []struct {
		name   string
		h      http.Header
		reason string // the outcome's, the audit record's
		text   string // in the error after "permission denied: "
	}{
		{"no token", http.Header{}, "no_token", "no token"},
		{"two tokens", http.Header{"Authorization": {"Bearer " + tok}, "X-Vault-Token": {e.token("default", "transit:random")}}, "conflicting_tokens", "more than one token"},
		{"two Authorization", http.Header{"Authorization": {"Bearer " + tok, "Bearer " + tok}}, "conflicting_tokens", "more than one token"},
		{"Basic", http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte("a:b"))}}, "malformed_authorization", "not Bearer"},
		{"garbage", http.Header{"X-Vault-Token": {"s.notatoken"}}, "malformed", "token refused: malformed"},
		{"another signing key", http.Header{"X-Vault-Token": {forged}}, "", "token refused: "},
		{"expired", http.Header{"X-Vault-Token": {expired}}, "expired", "token refused: expired"},
		{"tenant not a string", http.Header{"X-Vault-Token": {badTenant}}, "no_tenant", "names no tenant"},
		{"no tenant claim", http.Header{"X-Vault-Token": {noTenant}}, "no_tenant", "names no tenant"},
		{"another audience", http.Header{"X-Vault-Token": {otherAud}}, "wrong_audience", "token refused: wrong audience"},
		{"no scope", http.Header{"X-Vault-Token": {e.token("default", "transit:hash")}}, "insufficient_scope", "scopes do not grant transit:random"},
	} {
		st, b := send(c.h)
		var body struct{ Errors []string }
		if err := json.Unmarshal(b, &body); st != http.StatusForbidden || err != nil || len(body.Errors) != 1 ||
			!strings.HasPrefix(body.Errors[0], "permission denied: ") || !strings.Contains(body.Errors[0], c.text) {
			t.Errorf("%s: %d %s, want 403 {\"errors\":[\"permission denied: ...%s...\"]}", c.name, st, b, c.text)
		}
		o := e.lastOutcome()
		if o.Status != http.StatusForbidden || c.reason != "" && o.Reason != c.reason || o.Reason == "" || o.Reason == "permission_denied" {
			t.Errorf("%s: outcome %+v, want reason %q", c.name, o, c.reason)
		}
		if strings.Contains(string(b), tok) || c.name == "expired" && strings.Contains(string(b), expired) {
			t.Errorf("%s: the answer echoes the token: %s", c.name, b)
		}
	}
}

// TestSealed: a sealed node answers every transit request 503 in Vault's
// shape, with or without a token, and forgets its keys.
func TestSealed(t *testing.T) {
	e := start(t)
	tok := e.token("default", allScopes...)
	e.call(tok, "POST", "/v1/transit/keys/k", "")
	e.node.Seal()
	for _, r := range []struct{ tok, method, path string }{
		{tok, "POST", "/v1/transit/encrypt/k"}, {tok, "GET", "/v1/transit/keys/k"}, {"", "POST", "/v1/transit/random"},
		{tok, "LIST", "/v1/transit/keys"},
	} {
		st, b := e.call(r.tok, r.method, r.path, `{"plaintext":"aGk="}`)
		if st != http.StatusServiceUnavailable || string(b) != `{"errors":["Vault is sealed"]}`+"\n" {
			t.Errorf("%s %s sealed: %d %s", r.method, r.path, st, b)
		}
	}
}

// TestPartialFailure: partial_failure_response_code sets the status of a
// batch with failed and succeeded items, as in Vault; out of range it
// draws a warning.
func TestPartialFailure(t *testing.T) {
	e := start(t)
	tok := e.token("default", allScopes...)
	e.call(tok, "POST", "/v1/transit/keys/k", "")
	batch := `"batch_input":[{"plaintext":"aGk=","reference":"ok"},{"plaintext":"!!","reference":"bad"}]`
	st, b := e.call(tok, "POST", "/v1/transit/encrypt/k", `{`+batch+`,"partial_failure_response_code":207}`)
	if st != 207 {
		t.Errorf("207: %d %s", st, b)
	}
	st, b = e.call(tok, "POST", "/v1/transit/encrypt/k", `{`+batch+`,"partial_failure_response_code":999}`)
	if st != 400 || !strings.Contains(string(b), "reverting to 400") {
		t.Errorf("999: %d %s", st, b)
	}
	st, b = e.call(tok, "POST", "/v1/transit/encrypt/k", `{"batch_input":[{"plaintext":"!!"}],"partial_failure_response_code":200}`)
	if st != 400 {
		t.Errorf("every item failed: %d %s", st, b)
	}
	st, b = e.call(tok, "POST", "/v1/transit/encrypt/k", `{"plaintext":"aGk=","unknown_param":1}`)
	if st != 200 || !strings.Contains(string(b), `"warnings":["Endpoint ignored these unrecognized parameters: [unknown_param]"]`) {
		t.Errorf("unknown parameter: %d %s", st, b)
	}
}

// TestObserve: every request is described once to Observe, with the
// operation, tenant, principal, key, version, status and reason, and
// nothing secret; an Observe error is answered 500 and the answer it would
// have been is not sent.
func TestObserve(t *testing.T) {
	var mu sync.Mutex
	var got []vaultapi.Outcome
	fail := false
	e := startWith(t, func(_ http.ResponseWriter, _ *http.Request, o vaultapi.Outcome) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, o)
		if fail {
			return errors.New("no sink accepted the record")
		}
		return nil
	})
	e.tenant("acme")
	tok := e.token("acme", allScopes...)
	e.call(tok, "POST", "/v1/transit/keys/orders", "")
	_, b := e.call(tok, "POST", "/v1/transit/encrypt/orders", `{"plaintext":"c2VjcmV0IHBsYWludGV4dA=="}`)
	ct := data(t, b)["ciphertext"].(string)
	e.call(tok, "POST", "/v1/transit/decrypt/orders", `{"ciphertext":"vault:v1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}`)
	e.call("", "POST", "/v1/transit/encrypt/orders", `{}`)
	mu.Lock()
	fail = true
	mu.Unlock()
	st, b := e.call(tok, "POST", "/v1/transit/encrypt/orders", `{"plaintext":"aGk="}`)
	if st != http.StatusInternalServerError || strings.Contains(string(b), "vault:v1") {
		t.Errorf("Observe failing: %d %s", st, b)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 5 {
		t.Fatalf("%d outcomes: %+v", len(got), got)
	}
	want := []vaultapi.Outcome{
		{Operation: "transit.keys.create", Tenant: "acme", Principal: "kgc_test", Key: "orders", KeyVersion: 1, Status: 200},
		{Operation: "transit.encrypt", Tenant: "acme", Principal: "kgc_test", Key: "orders", KeyVersion: 1, Status: 200},
		{Operation: "transit.decrypt", Tenant: "acme", Principal: "kgc_test", Key: "orders", Status: 400, Reason: "decryption_failed"},
		{Operation: "transit", Status: 403, Reason: "no_token"},
		{Operation: "transit.encrypt", Tenant: "acme", Principal: "kgc_test", Key: "orders", KeyVersion: 1, Status: 200},
	}
	for i, o := range got {
		if o.RequestID == "" {
			t.Errorf("%d: no request id", i)
		}
		o.RequestID = ""
		if o != want[i] {
			t.Errorf("outcome %d: %+v, want %+v", i, o, want[i])
		}
		s, _ := json.Marshal(o)
		for _, secret := range []string{"c2VjcmV0", "secret plaintext", ct, tok} {
			if strings.Contains(string(s), secret) {
				t.Errorf("outcome %d holds a secret: %s", i, s)
			}
		}
	}
}

// TestPartialFailureCodes: partial_failure_response_code takes only a
// final status (200 to 599); any other, which net/http refuses (a panic
// below 100) or reads as informational, is ignored with Vault's warning,
// with the audit log on or off. A batch with a failed item is recorded
// with the reason batch_errors, whatever status it is answered with.
func TestPartialFailureCodes(t *testing.T) {
	var mu sync.Mutex
	var got []vaultapi.Outcome
	on := startWith(t, func(_ http.ResponseWriter, _ *http.Request, o vaultapi.Outcome) error {
		mu.Lock()
		got = append(got, o)
		mu.Unlock()
		return nil
	})
	off := startAudit(t, nil, config.Audit{Disabled: true})
	for name, e := range map[string]*env{"audit on": on, "audit off": off} {
		tok := e.token("default", allScopes...)
		e.must(tok, "POST", "/v1/transit/keys/k", "")
		batch := `"batch_input":[{"plaintext":"aGk="},{"plaintext":"!!"}]`
		for _, code := range []string{"1", "100", "150", "199", "0", "-1", "600", "1000"} {
			st, b := e.call(tok, "POST", "/v1/transit/encrypt/k", `{`+batch+`,"partial_failure_response_code":`+code+`}`)
			if st != 400 || !strings.Contains(string(b), "reverting to 400") {
				t.Errorf("%s: code %s: %d %s", name, code, st, b)
			}
		}
		for _, code := range []int{200, 204, 207, 302, 599} {
			if st, b := e.call(tok, "POST", "/v1/transit/encrypt/k", `{`+batch+`,"partial_failure_response_code":`+strconv.Itoa(code)+`}`); st != code {
				t.Errorf("%s: code %d: %d %s", name, code, st, b)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	batches := 0
	for _, o := range got {
		if o.Operation != "transit.encrypt" {
			continue
		}
		batches++
		if o.Failed != 1 || o.Reason != "batch_errors" {
			t.Errorf("a batch with a failed item answered %d: failed %d, reason %q", o.Status, o.Failed, o.Reason)
		}
	}
	if batches != 13 {
		t.Errorf("%d batches observed, want 13", batches)
	}
	for _, r := range auditRecords(t, on) {
		if r["op"] == "transit.encrypt" && r["reason"] != "batch_errors" {
			t.Errorf("the audit record of a batch with a failed item: %v", r)
		}
	}
}

// TestBase64Named: input that is not base64 is refused with an error that
// names the field, single or in a batch item (beside a good one, or
// alone), so that a caller with many
// fields knows which one to fix.
func TestBase64Named(t *testing.T) {
	e := start(t)
	tok := e.token("default", allScopes...)
	for _, k := range []string{"keys/k", "keys/d"} {
		if st, b := e.call(tok, "POST", "/v1/transit/"+k, `{"derived":`+strconv.FormatBool(k == "keys/d")+`}`); st != http.StatusOK {
			t.Fatalf("%s: %d %s", k, st, b)
		}
	}
	ct := func(key string, body string) string {
		st, b := e.call(tok, "POST", "/v1/transit/encrypt/"+key, body)
		if st != http.StatusOK {
			t.Fatalf("encrypt: %d %s", st, b)
		}
		return data(t, b)["ciphertext"].(string)
	}
	plain, derived := ct("k", `{"plaintext":"aGk="}`), ct("d", `{"plaintext":"aGk=","context":"YQ=="}`)
	for _, c := range []struct{ name, path, body, want string }{
		{"plaintext", "encrypt/k", `{"plaintext":"not base64!"}`, "decode plaintext"},
		{"context", "encrypt/d", `{"plaintext":"aGk=","context":"%%"}`, "context"},
		{"associated_data", "encrypt/k", `{"plaintext":"aGk=","associated_data":"%%"}`, "associated_data"},
		{"decrypt context", "decrypt/d", `{"ciphertext":"` + derived + `","context":"%%"}`, "context"},
		{"ciphertext", "decrypt/k", `{"ciphertext":"vault:v1:@@@@"}`, "invalid ciphertext"},
		{"rewrap ciphertext", "rewrap/k", `{"ciphertext":"vault:v1:@@@@"}`, "invalid ciphertext"},
		{"input", "hmac/k", `{"input":"@@"}`, "input"},
		{"hash input", "hash", `{"input":"@@"}`, "input"},
		{"signature", "verify/k", `{"input":"aGk=","hmac":"vault:v1:@@"}`, "invalid hmac"},
		{"batch plaintext", "encrypt/k", `{"batch_input":[{"plaintext":"aGk="},{"plaintext":"@@"}]}`, "decode plaintext"},
		{"batch context", "encrypt/d", `{"batch_input":[{"plaintext":"aGk=","context":"YQ=="},{"plaintext":"aGk=","context":"@@"}]}`, "decode context"},
		{"batch associated_data", "decrypt/k", `{"batch_input":[{"ciphertext":"` + plain + `"},{"ciphertext":"` + plain + `","associated_data":"@@"}]}`, "decode associated_data"},
		{"batch input", "hmac/k", `{"batch_input":[{"input":"aGk="},{"input":"@@"}]}`, "input"},
		{"import ciphertext", "keys/imp/import", `{"ciphertext":"@@"}`, "ciphertext"},
		{"batch ciphertext", "decrypt/k", `{"batch_input":[{"ciphertext":"` + plain + `"},{"ciphertext":"vault:v1:@@@@"}]}`, "invalid ciphertext"},
		{"batch rewrap ciphertext", "rewrap/k", `{"batch_input":[{"ciphertext":"` + plain + `"},{"ciphertext":"vault:v1:@@@@"}]}`, "invalid ciphertext"},
		{"batch hmac", "verify/k", `{"batch_input":[{"input":"aGk=","hmac":"vault:v1:@@@@"}]}`, "invalid hmac"},
		// A batch whose every item fails is answered item by item too.
		{"batch, one plaintext", "encrypt/k", `{"batch_input":[{"plaintext":"@@"}]}`, "decode plaintext"},
		{"batch, one context", "decrypt/d", `{"batch_input":[{"ciphertext":"` + derived + `","context":"@@"}]}`, "decode context"},
		{"batch, one rewrap", "rewrap/k", `{"batch_input":[{"ciphertext":"` + plain + `","associated_data":"@@"}]}`, "decode associated_data"},
		{"batch, one hmac input", "hmac/k", `{"batch_input":[{"input":"@@"}]}`, "input"},
		{"batch, one verify input", "verify/k", `{"batch_input":[{"input":"@@","hmac":"vault:v1:AAAA"}]}`, "input"},
	} {
		st, b := e.call(tok, "POST", "/v1/transit/"+c.path, c.body)
		batch := strings.HasPrefix(c.name, "batch")
		if !batch && st != http.StatusBadRequest || st >= 500 || !strings.Contains(string(b), "base64") || !strings.Contains(string(b), c.want) {
			t.Errorf("%s: %d %s, want a 4xx naming %q", c.name, st, b, c.want)
		}
	}
}

// TestLimitsInProcess: a body over MaxBodyBytes is 413 when its length is
// not stated (chunked), and when the request's Body holds more than its
// ContentLength says (the server's Body never does; a wrapper's might):
// the limit is on what is read, not only on what is announced.
func TestLimitsInProcess(t *testing.T) {
	e := start(t)
	tok := e.token("default", allScopes...)
	e.call(tok, "POST", "/v1/transit/keys/k", "")
	big := []byte(`{"plaintext":"` + strings.Repeat("A", vaultapi.DefaultMaxBodyBytes) + `"}`)
	for name, length := range map[string]int64{"unknown length": -1, "longer than stated": 100} {
		p := newInProcess(t, e.srv.Handler(), tok, "/v1/transit/encrypt/k", big)
		p.req.ContentLength = length
		if st := p.do(); st != http.StatusRequestEntityTooLarge {
			t.Errorf("%s: %d %.200s", name, st, p.w.body)
		}
	}
	ok := []byte(`{"plaintext":"aGk="}`)
	p := newInProcess(t, e.srv.Handler(), tok, "/v1/transit/encrypt/k", ok)
	p.req.ContentLength = -1
	if st := p.do(); st != http.StatusOK {
		t.Errorf("unknown length within the limit: %d %.200s", st, p.w.body)
	}
}
