package vaultapi_test

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"slices"
	"testing"

	vault "github.com/hashicorp/vault/api"

	"github.com/keygate/keygate/internal/transit"
)

// vaultClient is the official Vault Go client pointed at e with a token
// granting every transit scope in the default tenant.
func vaultClient(t *testing.T, e *env) *vault.Client {
	t.Helper()
	cfg := vault.DefaultConfig()
	cfg.Address = e.url
	cfg.MaxRetries = 0
	c, err := vault.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.SetToken(e.token("default", allScopes...))
	return c
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// write is Logical().Write that must succeed and return data.
func write(t *testing.T, c *vault.Client, path string, body map[string]any) map[string]any {
	t.Helper()
	s, err := c.Logical().Write(path, body)
	if err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
	if s == nil {
		t.Fatalf("write %s: no data", path)
	}
	return s.Data
}

func num(t *testing.T, v any) int {
	t.Helper()
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("%v (%T) is not a number", v, v)
	}
	i, err := n.Int64()
	if err != nil {
		t.Fatal(err)
	}
	return int(i)
}

// statusOf is the HTTP status of a Vault client error.
func statusOf(err error) int {
	var re *vault.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode
	}
	return 0
}

// TestVaultClient round-trips every operation of the transit API with
// Vault's official Go client.
func TestVaultClient(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: every transit operation through Vault's Go client, keys of every type; run without -short")
	}
	e := start(t)
	c := vaultClient(t, e)

	t.Run("keys", func(t *testing.T) {
		for _, typ := range transit.KeyTypes() {
			name := "t-" + typ.String()
			d := write(t, c, "transit/keys/"+name, map[string]any{"type": typ.String()})
			if d["type"] != typ.String() || d["name"] != name || num(t, d["latest_version"]) != 1 {
				t.Errorf("%s: created %v", typ, d)
			}
			s, err := c.Logical().Read("transit/keys/" + name)
			if err != nil || s == nil || s.Data["type"] != typ.String() {
				t.Fatalf("%s: read %v %v", typ, s, err)
			}
			if typ.Capabilities().Signing {
				keys := s.Data["keys"].(map[string]any)["1"].(map[string]any)
				if keys["public_key"] == "" {
					t.Errorf("%s: no public key in %v", typ, keys)
				}
			}
		}
		s, err := c.Logical().Read("transit/keys/absent")
		if s != nil || err != nil {
			t.Errorf("read of an absent key: %v %v", s, err)
		}
		l, err := c.Logical().List("transit/keys")
		if err != nil || l == nil {
			t.Fatalf("list: %v %v", l, err)
		}
		if n := len(l.Data["keys"].([]any)); n != len(transit.KeyTypes()) {
			t.Errorf("list: %d keys", n)
		}
	})

	t.Run("config rotate trim delete", func(t *testing.T) {
		write(t, c, "transit/keys/life", nil)
		for range 3 {
			if d := write(t, c, "transit/keys/life/rotate", nil); d["latest_version"] == nil {
				t.Fatalf("rotate: %v", d)
			}
		}
		d := write(t, c, "transit/keys/life/config", map[string]any{"min_decryption_version": 3, "min_encryption_version": 3,
			"deletion_allowed": true, "exportable": true, "auto_rotate_period": "2h"})
		if num(t, d["min_decryption_version"]) != 3 || d["deletion_allowed"] != true || num(t, d["auto_rotate_period"]) != 7200 {
			t.Errorf("config: %v", d)
		}
		d = write(t, c, "transit/keys/life/trim", map[string]any{"min_available_version": 3})
		if num(t, d["min_available_version"]) != 3 || len(d["keys"].(map[string]any)) != 2 {
			t.Errorf("trim: %v", d)
		}
		if _, err := c.Logical().Write("transit/keys/life/trim", map[string]any{"min_available_version": 2}); statusOf(err) != http.StatusBadRequest {
			t.Errorf("trim back: %v", err)
		}
		if s, err := c.Logical().Delete("transit/keys/life"); err != nil || s != nil {
			t.Fatalf("delete: %v %v", s, err)
		}
		if s, _ := c.Logical().Read("transit/keys/life"); s != nil {
			t.Error("read after delete found the key")
		}
		write(t, c, "transit/keys/kept", nil)
		if _, err := c.Logical().Delete("transit/keys/kept"); statusOf(err) != http.StatusBadRequest {
			t.Errorf("delete without deletion_allowed: %v", err)
		}
	})

	t.Run("encrypt decrypt rewrap", func(t *testing.T) {
		write(t, c, "transit/keys/ed", nil)
		d := write(t, c, "transit/encrypt/ed", map[string]any{"plaintext": b64("hello"), "associated_data": b64("ad")})
		ct := d["ciphertext"].(string)
		if num(t, d["key_version"]) != 1 {
			t.Errorf("encrypt: %v", d)
		}
		d = write(t, c, "transit/decrypt/ed", map[string]any{"ciphertext": ct, "associated_data": b64("ad")})
		if d["plaintext"] != b64("hello") {
			t.Errorf("decrypt: %v", d)
		}
		if _, err := c.Logical().Write("transit/decrypt/ed", map[string]any{"ciphertext": ct}); statusOf(err) != http.StatusBadRequest {
			t.Errorf("decrypt without the associated data: %v", err)
		}
		write(t, c, "transit/keys/ed/rotate", nil)
		d = write(t, c, "transit/rewrap/ed", map[string]any{"ciphertext": ct, "associated_data": b64("ad")})
		if num(t, d["key_version"]) != 2 || d["ciphertext"].(string)[:9] != "vault:v2:" {
			t.Errorf("rewrap: %v", d)
		}

		// Derived keys need a context; convergent ones encrypt a plaintext
		// and context to the same ciphertext.
		write(t, c, "transit/keys/derived", map[string]any{"derived": true})
		if _, err := c.Logical().Write("transit/encrypt/derived", map[string]any{"plaintext": b64("x")}); statusOf(err) != http.StatusBadRequest {
			t.Errorf("derived without context: %v", err)
		}
		d = write(t, c, "transit/encrypt/derived", map[string]any{"plaintext": b64("x"), "context": b64("user-1")})
		d2 := write(t, c, "transit/decrypt/derived", map[string]any{"ciphertext": d["ciphertext"], "context": b64("user-1")})
		if d2["plaintext"] != b64("x") {
			t.Errorf("derived decrypt: %v", d2)
		}
		if _, err := c.Logical().Write("transit/decrypt/derived", map[string]any{"ciphertext": d["ciphertext"], "context": b64("user-2")}); statusOf(err) != http.StatusBadRequest {
			t.Errorf("derived decrypt with another context: %v", err)
		}
		write(t, c, "transit/keys/conv", map[string]any{"derived": true, "convergent_encryption": true})
		x := write(t, c, "transit/encrypt/conv", map[string]any{"plaintext": b64("same"), "context": b64("c")})
		y := write(t, c, "transit/encrypt/conv", map[string]any{"plaintext": b64("same"), "context": b64("c")})
		if x["ciphertext"] != y["ciphertext"] {
			t.Errorf("convergent: %v != %v", x["ciphertext"], y["ciphertext"])
		}

		// Batches: references echoed, a bad item reported in place; the
		// status is 400 unless partial_failure_response_code says.
		batch := []any{map[string]any{"plaintext": b64("a"), "reference": "r1"}, map[string]any{"plaintext": "%%%", "reference": "r2"},
			map[string]any{"plaintext": b64("c"), "reference": "r3"}}
		if _, err := c.Logical().Write("transit/encrypt/ed", map[string]any{"batch_input": batch}); statusOf(err) != http.StatusBadRequest {
			t.Errorf("batch with a bad item: %v", err)
		}
		d = write(t, c, "transit/encrypt/ed", map[string]any{"batch_input": batch, "partial_failure_response_code": 200})
		res := d["batch_results"].([]any)
		var dec []any
		for i, r := range res {
			m := r.(map[string]any)
			if m["reference"] != batch[i].(map[string]any)["reference"] {
				t.Errorf("item %d: reference %v", i, m["reference"])
			}
			if (i == 1) != (m["error"] != nil) {
				t.Errorf("item %d: %v", i, m)
			}
			if i != 1 {
				dec = append(dec, map[string]any{"ciphertext": m["ciphertext"], "reference": m["reference"]})
			}
		}
		d = write(t, c, "transit/decrypt/ed", map[string]any{"batch_input": dec})
		for i, r := range d["batch_results"].([]any) {
			m := r.(map[string]any)
			if want := []string{b64("a"), b64("c")}[i]; m["plaintext"] != want || m["reference"] != dec[i].(map[string]any)["reference"] {
				t.Errorf("decrypt item %d: %v", i, m)
			}
		}
		d = write(t, c, "transit/rewrap/ed", map[string]any{"batch_input": append(dec, map[string]any{"ciphertext": "vault:v1:bad", "reference": "bad"})})
		res = d["batch_results"].([]any)
		if len(res) != 3 || res[2].(map[string]any)["error"] == nil || res[0].(map[string]any)["reference"] != "r1" {
			t.Errorf("rewrap batch: %v", res)
		}
	})

	t.Run("datakey", func(t *testing.T) {
		write(t, c, "transit/keys/dk", nil)
		d := write(t, c, "transit/datakey/plaintext/dk", map[string]any{"bits": 512})
		pt, _ := base64.StdEncoding.DecodeString(d["plaintext"].(string))
		if len(pt) != 64 {
			t.Fatalf("datakey plaintext: %v", d)
		}
		d2 := write(t, c, "transit/decrypt/dk", map[string]any{"ciphertext": d["ciphertext"]})
		if d2["plaintext"] != d["plaintext"] {
			t.Error("the data key does not decrypt to its plaintext")
		}
		d = write(t, c, "transit/datakey/wrapped/dk", nil)
		if _, ok := d["plaintext"]; ok || d["ciphertext"] == nil {
			t.Errorf("wrapped datakey: %v", d)
		}
	})

	t.Run("sign verify", func(t *testing.T) {
		msg := b64("the message")
		digest := sha256.Sum256([]byte("the message"))
		cases := []struct {
			key    string
			params map[string]any
		}{
			{"t-ed25519", nil},
			{"t-ecdsa-p256", map[string]any{"marshaling_algorithm": "asn1"}},
			{"t-ecdsa-p384", map[string]any{"marshaling_algorithm": "jws", "hash_algorithm": "sha2-384"}},
			{"t-ecdsa-p521", map[string]any{"prehashed": true, "input": base64.StdEncoding.EncodeToString(digest[:])}},
			{"t-rsa-2048", map[string]any{"signature_algorithm": "pss"}},
			{"t-rsa-3072", map[string]any{"signature_algorithm": "pkcs1v15", "hash_algorithm": "sha2-512"}},
			{"t-rsa-4096", map[string]any{"signature_algorithm": "pss", "salt_length": "hash"}},
		}
		for _, tc := range cases {
			p := map[string]any{"input": msg}
			for k, v := range tc.params {
				p[k] = v
			}
			d := write(t, c, "transit/sign/"+tc.key, p)
			p["signature"] = d["signature"]
			if v := write(t, c, "transit/verify/"+tc.key, p); v["valid"] != true {
				t.Errorf("%s: verify %v", tc.key, v)
			}
			p["input"] = b64("another message")
			if tc.params["prehashed"] == true {
				other := sha256.Sum256([]byte("other"))
				p["input"] = base64.StdEncoding.EncodeToString(other[:])
			}
			if v := write(t, c, "transit/verify/"+tc.key, p); v["valid"] != false {
				t.Errorf("%s: verify of another input %v", tc.key, v)
			}
		}
		// The algorithm in the path, and independent checks of ed25519 and
		// ECDSA signatures with the public keys the key read gives.
		d := write(t, c, "transit/sign/t-ecdsa-p256/sha2-256", map[string]any{"input": msg})
		s, _ := c.Logical().Read("transit/keys/t-ecdsa-p256")
		block, _ := pem.Decode([]byte(s.Data["keys"].(map[string]any)["1"].(map[string]any)["public_key"].(string)))
		pub, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		sig, _ := base64.StdEncoding.DecodeString(d["signature"].(string)[len("vault:v1:"):])
		if !ecdsa.VerifyASN1(pub.(*ecdsa.PublicKey), digest[:], sig) {
			t.Error("crypto/ecdsa does not verify the ECDSA signature")
		}
		d = write(t, c, "transit/sign/t-ed25519", map[string]any{"input": msg})
		s, _ = c.Logical().Read("transit/keys/t-ed25519")
		edPub, _ := base64.StdEncoding.DecodeString(s.Data["keys"].(map[string]any)["1"].(map[string]any)["public_key"].(string))
		sig, _ = base64.StdEncoding.DecodeString(d["signature"].(string)[len("vault:v1:"):])
		if !ed25519.Verify(edPub, []byte("the message"), sig) {
			t.Error("crypto/ed25519 does not verify the ed25519 signature")
		}
		// Batches.
		d = write(t, c, "transit/sign/t-ed25519", map[string]any{"batch_input": []any{
			map[string]any{"input": b64("one"), "reference": "1"}, map[string]any{"input": "!", "reference": "2"}}})
		res := d["batch_results"].([]any)
		if res[0].(map[string]any)["signature"] == nil || res[1].(map[string]any)["error"] == nil || res[1].(map[string]any)["reference"] != "2" {
			t.Fatalf("sign batch: %v", res)
		}
		d = write(t, c, "transit/verify/t-ed25519", map[string]any{"batch_input": []any{
			map[string]any{"input": b64("one"), "signature": res[0].(map[string]any)["signature"], "reference": "a"},
			map[string]any{"input": b64("two"), "signature": res[0].(map[string]any)["signature"], "reference": "b"}}})
		v := d["batch_results"].([]any)
		if v[0].(map[string]any)["valid"] != true || v[1].(map[string]any)["valid"] != false || v[1].(map[string]any)["reference"] != "b" {
			t.Errorf("verify batch: %v", v)
		}
		if _, err := c.Logical().Write("transit/sign/ed", map[string]any{"input": msg}); statusOf(err) != http.StatusBadRequest {
			t.Errorf("sign with an AES key: %v", err)
		}
	})

	t.Run("hmac", func(t *testing.T) {
		d := write(t, c, "transit/hmac/t-hmac/sha2-512", map[string]any{"input": b64("data")})
		mac := d["hmac"].(string)
		if v := write(t, c, "transit/verify/t-hmac/sha2-512", map[string]any{"input": b64("data"), "hmac": mac}); v["valid"] != true {
			t.Errorf("verify hmac: %v", v)
		}
		if v := write(t, c, "transit/verify/t-hmac", map[string]any{"input": b64("data"), "hmac": mac, "algorithm": "sha2-256"}); v["valid"] != false {
			t.Errorf("verify hmac with another algorithm: %v", v)
		}
		d = write(t, c, "transit/hmac/t-aes256-gcm96", map[string]any{"batch_input": []any{
			map[string]any{"input": b64("x"), "reference": "x"}, map[string]any{"input": b64("y"), "reference": "y"}}})
		res := d["batch_results"].([]any)
		d = write(t, c, "transit/verify/t-aes256-gcm96", map[string]any{"batch_input": []any{
			map[string]any{"input": b64("x"), "hmac": res[0].(map[string]any)["hmac"], "reference": "x"},
			map[string]any{"input": b64("x"), "hmac": res[1].(map[string]any)["hmac"], "reference": "y"}}})
		v := d["batch_results"].([]any)
		if v[0].(map[string]any)["valid"] != true || v[1].(map[string]any)["valid"] == true || v[1].(map[string]any)["reference"] != "y" {
			t.Errorf("verify hmac batch: %v", v)
		}
	})

	t.Run("random hash", func(t *testing.T) {
		d := write(t, c, "transit/random/24", map[string]any{"format": "hex"})
		if len(d["random_bytes"].(string)) != 48 {
			t.Errorf("random: %v", d)
		}
		d = write(t, c, "transit/random", nil)
		if b, _ := base64.StdEncoding.DecodeString(d["random_bytes"].(string)); len(b) != 32 {
			t.Errorf("random default: %v", d)
		}
		d = write(t, c, "transit/hash/sha2-256", map[string]any{"input": b64("abc")})
		if d["sum"] != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
			t.Errorf("hash: %v", d)
		}
		d = write(t, c, "transit/hash", map[string]any{"input": b64("abc"), "algorithm": "sha3-256", "format": "base64"})
		if d["sum"] != "Ophdp0/iJbIEXBcta9OQvYVfCG4+nVJbRr/iRRFDFTI=" {
			t.Errorf("hash sha3: %v", d)
		}
	})

	t.Run("export", func(t *testing.T) {
		write(t, c, "transit/keys/exp", map[string]any{"exportable": true})
		s, err := c.Logical().Read("transit/export/encryption-key/exp")
		if err != nil || s == nil {
			t.Fatalf("export: %v %v", s, err)
		}
		raw, _ := base64.StdEncoding.DecodeString(s.Data["keys"].(map[string]any)["1"].(string))
		// Decrypt a ciphertext of keygate's with the exported key.
		d := write(t, c, "transit/encrypt/exp", map[string]any{"plaintext": b64("exported")})
		payload, _ := base64.StdEncoding.DecodeString(d["ciphertext"].(string)[len("vault:v1:"):])
		block, _ := aes.NewCipher(raw)
		gcm, _ := cipher.NewGCM(block)
		if pt, err := gcm.Open(nil, payload[:12], payload[12:], nil); err != nil || string(pt) != "exported" {
			t.Errorf("the exported key does not decrypt: %q %v", pt, err)
		}
		if _, err := c.Logical().Read("transit/export/encryption-key/ed"); statusOf(err) != http.StatusBadRequest {
			t.Errorf("export of a key that is not exportable: %v", err)
		}
		if s, err := c.Logical().Read("transit/export/public-key/t-ed25519/1"); err != nil || s.Data["keys"].(map[string]any)["1"] == "" {
			t.Errorf("public key export: %v %v", s, err)
		}
	})

	t.Run("import", func(t *testing.T) {
		s, err := c.Logical().Read("transit/wrapping_key")
		if err != nil || s == nil {
			t.Fatalf("wrapping_key: %v %v", s, err)
		}
		block, _ := pem.Decode([]byte(s.Data["public_key"].(string)))
		pub, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		wrap := func(key []byte) string {
			eph := make([]byte, 32)
			rand.Read(eph)
			oaep, err := rsa.EncryptOAEP(sha256.New(), rand.Reader, pub.(*rsa.PublicKey), eph, nil)
			if err != nil {
				t.Fatal(err)
			}
			return base64.StdEncoding.EncodeToString(append(oaep, kwpWrap(eph, key)...))
		}
		// A ciphertext made outside keygate, as Vault documents its
		// format: "vault:v" N ":" base64(nonce ‖ AES-256-GCM ciphertext ‖ tag).
		outside := func(key []byte, version, pt string) string {
			block, _ := aes.NewCipher(key)
			gcm, _ := cipher.NewGCM(block)
			nonce := make([]byte, 12)
			rand.Read(nonce)
			return "vault:v" + version + ":" + base64.StdEncoding.EncodeToString(gcm.Seal(nonce, nonce, []byte(pt), nil))
		}
		k1, k2 := make([]byte, 32), make([]byte, 32)
		rand.Read(k1)
		rand.Read(k2)
		if s, err := c.Logical().Write("transit/keys/imported/import", map[string]any{"ciphertext": wrap(k1), "type": "aes256-gcm96"}); err != nil || s != nil {
			t.Fatalf("import: %v %v", s, err)
		}
		d := write(t, c, "transit/decrypt/imported", map[string]any{"ciphertext": outside(k1, "1", "made elsewhere")})
		if d["plaintext"] != b64("made elsewhere") {
			t.Errorf("decrypt of an outside ciphertext: %v", d)
		}
		if _, err := c.Logical().Write("transit/keys/imported/import_version", map[string]any{"ciphertext": wrap(k2)}); err != nil {
			t.Fatalf("import_version: %v", err)
		}
		d = write(t, c, "transit/decrypt/imported", map[string]any{"ciphertext": outside(k2, "2", "second")})
		if d["plaintext"] != b64("second") {
			t.Errorf("decrypt with the imported version 2: %v", d)
		}
		if _, err := c.Logical().Write("transit/keys/imported/import", map[string]any{"ciphertext": wrap(k1)}); statusOf(err) != http.StatusBadRequest {
			t.Errorf("import over an existing key: %v", err)
		}
		s, _ = c.Logical().Read("transit/keys/imported")
		if s.Data["imported_key"] != true || num(t, s.Data["latest_version"]) != 2 {
			t.Errorf("imported key: %v", s.Data)
		}
		l, _ := c.Logical().List("transit/keys")
		if slices.Contains(l.Data["keys"].([]any), any("@wrapping_key")) {
			t.Error("the wrapping key is listed")
		}
	})
}
