package vaultapi_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	vault "github.com/hashicorp/vault/api"
)

// backupOf reads transit/backup/name with Vault's client.
func backupOf(t *testing.T, c *vault.Client, name string) string {
	t.Helper()
	s, err := c.Logical().Read("transit/backup/" + name)
	if err != nil || s == nil {
		t.Fatalf("backup %s: %v %v", name, s, err)
	}
	b, _ := s.Data["backup"].(string)
	if b == "" {
		t.Fatalf("backup %s: %v", name, s.Data)
	}
	return b
}

// restore writes to path (transit/restore[/name]) and returns the status:
// 204 is Vault's answer to a restore (the client returns no secret).
func restore(c *vault.Client, path string, body map[string]any) (int, error) {
	s, err := c.Logical().Write(path, body)
	if err != nil {
		return statusOf(err), err
	}
	if s != nil {
		return http.StatusOK, nil
	}
	return http.StatusNoContent, nil
}

// dropKey deletes a key through Vault's client.
func dropKey(t *testing.T, c *vault.Client, name string) {
	t.Helper()
	write(t, c, "transit/keys/"+name+"/config", map[string]any{"deletion_allowed": true})
	if _, err := c.Logical().Delete("transit/keys/" + name); err != nil {
		t.Fatal(err)
	}
}

// TestVaultBackupRestore: a key is backed up, deleted and restored with
// Vault's Go client; what it made before (ciphertexts, signatures, HMACs)
// still decrypts and verifies.
func TestVaultBackupRestore(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: backup and restore through Vault's Go client; run without -short")
	}
	e := start(t)
	c := vaultClient(t, e)
	flags := map[string]any{"exportable": true, "allow_plaintext_backup": true}

	t.Run("round trip", func(t *testing.T) {
		for _, typ := range []string{"aes256-gcm96", "chacha20-poly1305", "ecdsa-p256", "ed25519", "hmac"} {
			name := "rt-" + typ
			write(t, c, "transit/keys/"+name, map[string]any{"type": typ, "exportable": true, "allow_plaintext_backup": true})
			write(t, c, "transit/keys/"+name+"/rotate", nil)
			var ct, sig string
			mac := write(t, c, "transit/hmac/"+name, map[string]any{"input": b64("hi")})["hmac"].(string)
			switch typ {
			case "ecdsa-p256", "ed25519":
				sig = write(t, c, "transit/sign/"+name, map[string]any{"input": b64("hi")})["signature"].(string)
			case "hmac":
			default:
				ct = write(t, c, "transit/encrypt/"+name, map[string]any{"plaintext": b64("before")})["ciphertext"].(string)
			}
			backup := backupOf(t, c, name)
			dropKey(t, c, name)
			if st, err := restore(c, "transit/restore", map[string]any{"backup": backup}); st != http.StatusNoContent {
				t.Fatalf("%s: restore: %d %v", typ, st, err)
			}
			d := write(t, c, "transit/keys/"+name+"/rotate", nil) // the restored key works on
			if num(t, d["latest_version"]) != 3 || d["exportable"] != true || d["allow_plaintext_backup"] != true {
				t.Errorf("%s: restored key: %v", typ, d)
			}
			if ct != "" {
				if pt := write(t, c, "transit/decrypt/"+name, map[string]any{"ciphertext": ct})["plaintext"]; pt != b64("before") {
					t.Errorf("%s: old ciphertext decrypts to %v", typ, pt)
				}
			}
			if sig != "" {
				if v := write(t, c, "transit/verify/"+name, map[string]any{"input": b64("hi"), "signature": sig})["valid"]; v != true {
					t.Errorf("%s: old signature: %v", typ, v)
				}
			}
			if v := write(t, c, "transit/verify/"+name, map[string]any{"input": b64("hi"), "hmac": mac})["valid"]; v != true {
				t.Errorf("%s: old hmac: %v", typ, v)
			}
		}
	})

	write(t, c, "transit/keys/src", flags)
	write(t, c, "transit/keys/src/rotate", nil)
	ct := write(t, c, "transit/encrypt/src", map[string]any{"plaintext": b64("secret")})["ciphertext"].(string)
	backup := backupOf(t, c, "src")

	t.Run("restore", func(t *testing.T) {
		tests := []struct {
			name   string
			path   string
			body   map[string]any
			status int
			errHas string
			key    string // the key that then decrypts ct
		}{
			{"over the key", "transit/restore", map[string]any{"backup": backup}, 400, "key \"src\" already exists", ""},
			{"over the key by path", "transit/restore/src", map[string]any{"backup": backup}, 400, "already exists", ""},
			{"over the key with force", "transit/restore", map[string]any{"backup": backup, "force": true}, 204, "", "src"},
			{"under the path's name", "transit/restore/copy", map[string]any{"backup": backup}, 204, "", "copy"},
			{"under the body's name", "transit/restore", map[string]any{"backup": backup, "name": "copy2"}, 204, "", "copy2"},
			{"force as a string", "transit/restore/copy", map[string]any{"backup": backup, "force": "true"}, 204, "", "copy"},
			{"no backup", "transit/restore/x", map[string]any{}, 400, "'backup' must be supplied", ""},
			{"not base64", "transit/restore/x", map[string]any{"backup": "%%%"}, 400, "invalid backup", ""},
			{"not a backup", "transit/restore/x", map[string]any{"backup": b64(`{"format":1}`)}, 400, "invalid backup", ""},
			{"damaged", "transit/restore/x", map[string]any{"backup": backup[:len(backup)/2]}, 400, "invalid backup", ""},
			{"a bad name in the body", "transit/restore", map[string]any{"backup": backup, "name": "a/b"}, 400, "invalid key name", ""},
		}
		for _, tt := range tests {
			st, err := restore(c, tt.path, tt.body)
			if st != tt.status || tt.errHas != "" && (err == nil || !strings.Contains(err.Error(), tt.errHas)) {
				t.Errorf("%s: %d %v, want %d %q", tt.name, st, err, tt.status, tt.errHas)
				continue
			}
			if tt.key != "" {
				if pt := write(t, c, "transit/decrypt/"+tt.key, map[string]any{"ciphertext": ct})["plaintext"]; pt != b64("secret") {
					t.Errorf("%s: decrypts to %v", tt.name, pt)
				}
			}
		}
		l, err := c.Logical().List("transit/keys")
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range l.Data["keys"].([]any) {
			if k == "x" {
				t.Error("a refused restore made a key")
			}
		}
	})

	t.Run("backup refused", func(t *testing.T) {
		write(t, c, "transit/keys/plain", nil)
		write(t, c, "transit/keys/exp", map[string]any{"exportable": true})
		tests := []struct{ name, key, errHas string }{
			{"neither flag", "plain", "exporting is disallowed on the policy"},
			{"not allow_plaintext_backup", "exp", "plaintext backup is disallowed on the policy"},
		}
		for _, tt := range tests {
			_, err := c.Logical().Read("transit/backup/" + tt.key)
			if statusOf(err) != http.StatusBadRequest || !strings.Contains(err.Error(), tt.errHas) {
				t.Errorf("%s: %v", tt.name, err)
			}
		}
		if s, err := c.Logical().Read("transit/backup/absent"); s != nil || err != nil { // Vault's client: a 404 is nothing
			t.Errorf("backup of an absent key: %v %v", s, err)
		}
		if st, b := e.call(c.Token(), "GET", "/v1/transit/backup/absent", ""); st != http.StatusNotFound {
			t.Errorf("backup of an absent key: %d %s", st, b)
		}
	})

	t.Run("another tenant", func(t *testing.T) {
		e.tenant("beta")
		beta := e.token("beta", allScopes...)
		body := `{"backup":"` + backup + `"}`
		if st, b := e.call(beta, "POST", "/v1/transit/restore", body); st != http.StatusNoContent {
			t.Fatalf("beta's restore: %d %s", st, b)
		}
		// beta's own key, named as the backup names it; the default tenant's
		// src (restored with force above) is unchanged and still its own.
		d := e.must(beta, "POST", "/v1/transit/decrypt/src", `{"ciphertext":"`+ct+`"}`)
		if d["plaintext"] != b64("secret") {
			t.Errorf("beta's restored key: %v", d)
		}
		e.must(beta, "POST", "/v1/transit/keys/src/rotate", "")
		if d := e.must(beta, "GET", "/v1/transit/keys/src", ""); d["latest_version"] != 3.0 {
			t.Errorf("beta's src: %v", d)
		}
		if s, err := c.Logical().Read("transit/keys/src"); err != nil || num(t, s.Data["latest_version"]) != 2 {
			t.Errorf("the default tenant's src changed: %v %v", s, err)
		}
		if st, b := e.call(beta, "GET", "/v1/transit/backup/copy", ""); st != http.StatusNotFound {
			t.Errorf("beta backs up the default tenant's copy: %d %s", st, b)
		}
		if st, b := e.call(e.token("beta", "transit:encrypt:*"), "POST", "/v1/transit/restore/mine", body); st != http.StatusForbidden {
			t.Errorf("restore without transit:admin: %d %s", st, b)
		}
	})
}

// TestVaultMinDecryptionListing: versions below min_decryption_version are
// not listed, and their public keys not published, by the key read, the
// config answer or the public-key export.
func TestVaultMinDecryptionListing(t *testing.T) {
	e := start(t)
	c := vaultClient(t, e)
	write(t, c, "transit/keys/ec", map[string]any{"type": "ecdsa-p256"})
	write(t, c, "transit/keys/ec/rotate", nil)
	write(t, c, "transit/keys/ec/rotate", nil)
	config := write(t, c, "transit/keys/ec/config", map[string]any{"min_decryption_version": 2})
	read, err := c.Logical().Read("transit/keys/ec")
	if err != nil {
		t.Fatal(err)
	}
	export, err := c.Logical().Read("transit/export/public-key/ec")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		keys any
	}{
		{"config", config["keys"]},
		{"read", read.Data["keys"]},
		{"export", export.Data["keys"]},
	}
	for _, tt := range tests {
		m, _ := tt.keys.(map[string]any)
		var got []string
		for v := range m {
			got = append(got, v)
		}
		slices.Sort(got)
		if !slices.Equal(got, []string{"2", "3"}) {
			t.Errorf("%s lists versions %v, want [2 3]", tt.name, got)
		}
	}
	if _, err := c.Logical().Read("transit/export/public-key/ec/1"); statusOf(err) != http.StatusBadRequest {
		t.Errorf("export of retired version 1: %v", err)
	}
}

// TestVaultPathParamWarnings: a parameter the path gives draws Vault's
// "replaced" warning, not the "unrecognized" one.
func TestVaultPathParamWarnings(t *testing.T) {
	e := start(t)
	c := vaultClient(t, e)
	write(t, c, "transit/keys/w", nil)
	const replaced = "Endpoint replaced the value of these parameters with the values captured from the endpoint's path: "
	const ignored = "Endpoint ignored these unrecognized parameters: "
	tests := []struct {
		name string
		path string
		body map[string]any
		want []string
	}{
		{"name beside the path's", "transit/encrypt/w", map[string]any{"plaintext": b64("x"), "name": "other"}, []string{replaced + "[name]"}},
		{"name and an unknown", "transit/keys/w/rotate", map[string]any{"name": "other", "zzz": 1}, []string{ignored + "[zzz]", replaced + "[name]"}},
		{"algorithm beside the path's", "transit/hmac/w/sha2-512", map[string]any{"input": b64("x"), "urlalgorithm": "sha2-256"}, []string{replaced + "[urlalgorithm]"}},
		{"datakey type", "transit/datakey/plaintext/w", map[string]any{"plaintext": "wrapped", "name": "w"}, []string{replaced + "[name plaintext]"}},
		{"none", "transit/encrypt/w", map[string]any{"plaintext": b64("x")}, nil},
	}
	for _, tt := range tests {
		s, err := c.Logical().Write(tt.path, tt.body)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		var got []string
		if s != nil {
			got = s.Warnings
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: warnings %q, want %q", tt.name, got, tt.want)
		}
	}
}
