package vaultapi_test

import (
	"encoding/json"
	"net/http"
	"testing"
)

// fuzzRoutes are the routes FuzzRequest sends bodies to.
var fuzzRoutes = []string{
	"/v1/transit/encrypt/aes", "/v1/transit/decrypt/aes", "/v1/transit/rewrap/aes", "/v1/transit/datakey/plaintext/aes",
	"/v1/transit/sign/ed", "/v1/transit/verify/ed", "/v1/transit/hmac/aes", "/v1/transit/verify/aes/sha2-512",
	"/v1/transit/keys/aes/config", "/v1/transit/keys/new", "/v1/transit/keys/imp/import", "/v1/transit/random",
	"/v1/transit/hash/sha2-512", "/v1/transit/sign/rsa", "/v1/transit/encrypt/derived",
}

// FuzzRequest sends any body to the transit routes: the answer is never a
// 5xx, and always a whole JSON document in Vault's shape (or a 204's empty
// body).
func FuzzRequest(f *testing.F) {
	e, tok := benchServer(f)
	e.call(tok, "POST", "/v1/transit/keys/aes", "")
	e.call(tok, "POST", "/v1/transit/keys/ed", `{"type":"ed25519"}`)
	e.call(tok, "POST", "/v1/transit/keys/rsa", `{"type":"rsa-2048"}`)
	e.call(tok, "POST", "/v1/transit/keys/derived", `{"derived":true,"convergent_encryption":true}`)
	_, b := e.call(tok, "POST", "/v1/transit/encrypt/aes", `{"plaintext":"aGk="}`)
	ct := data(f, b)["ciphertext"].(string)
	for i, body := range []string{
		`{"plaintext":"aGk="}`, `{"ciphertext":"` + ct + `"}`, `{"batch_input":[{"plaintext":"aGk=","reference":"r"},{"ciphertext":"` + ct + `"}]}`,
		`{"input":"aGk=","signature":"vault:v1:AAAA","hmac":"vault:v1:AAAA"}`, `{"min_decryption_version":"0x1","auto_rotate_period":"1d"}`,
		`{"bytes":"16","format":"hex"}`, `{"plaintext":"aGk=","context":"YQ==","key_version":1.5}`, `null`, ``, `{"batch_input":[]}`,
		`{"type":"hmac","key_size":64}`, `{"ciphertext":"AAAA","hash_function":"sha1"}`,
	} {
		f.Add(uint8(i), []byte(body))
	}
	h := e.srv.Handler()
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		p := newInProcess(t, h, tok, fuzzRoutes[int(route)%len(fuzzRoutes)], body)
		st := p.do()
		if st >= 500 {
			t.Fatalf("%d %s for %q", st, p.w.body, body)
		}
		if st == http.StatusNoContent {
			return
		}
		if !json.Valid(p.w.body) {
			t.Fatalf("%d: not JSON: %q", st, p.w.body)
		}
	})
}
