package vaultapi_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/keygate/keygate/internal/audit"
	"github.com/keygate/keygate/internal/transit/keystore"
)

// auditRecords returns the audit file's records of transit operations.
func auditRecords(t *testing.T, e *env) []map[string]any {
	t.Helper()
	files, err := e.node.AuditFiles()
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var r map[string]any
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("audit line %q: %v", sc.Text(), err)
			}
			if op, _ := r["op"].(string); strings.HasPrefix(op, "transit.") {
				out = append(out, r)
			}
		}
		fh.Close()
	}
	return out
}

// TestKeyNameLimit: a key name is at most 128 bytes, what an audit record
// holds of a key's name, so that every record of a key names it; a longer
// name (one Vault's grammar takes) is 400 on create and import, and not
// found anywhere else.
func TestKeyNameLimit(t *testing.T) {
	if keystore.MaxNameBytes > audit.MaxIDLen {
		t.Fatalf("MaxNameBytes %d > audit.MaxIDLen %d", keystore.MaxNameBytes, audit.MaxIDLen)
	}
	e := start(t)
	tok := e.token("default", allScopes...)
	longest := strings.Repeat("k", keystore.MaxNameBytes)
	e.must(tok, "POST", "/v1/transit/keys/"+longest, "")
	e.must(tok, "POST", "/v1/transit/encrypt/"+longest, `{"plaintext":"aGk="}`)
	e.must(tok, "POST", "/v1/transit/keys/"+longest+"/rotate", "")

	over := strings.Repeat("k", keystore.MaxNameBytes+1)
	for _, tc := range []struct {
		method, path, body string
		status             int
	}{
		{"POST", "/v1/transit/keys/" + over, "", 400},
		{"PUT", "/v1/transit/keys/" + over + "/import", `{"ciphertext":"AAAA"}`, 400},
		{"GET", "/v1/transit/keys/" + over, "", 404},
		{"POST", "/v1/transit/encrypt/" + over, `{"plaintext":"aGk="}`, 404},
		{"POST", "/v1/transit/keys/" + over + "/rotate", "", 404},
	} {
		if st, b := e.call(tok, tc.method, tc.path, tc.body); st != tc.status {
			t.Errorf("%s %.40s…: %d %s, want %d", tc.method, tc.path, st, b, tc.status)
		}
	}
	recs := auditRecords(t, e)
	named := 0
	for _, r := range recs {
		k, _ := r["key"].(map[string]any)
		if k == nil || k["name"] == nil {
			if r["status"] == float64(http.StatusOK) {
				t.Errorf("a record of a successful request names no key: %v", r)
			}
			continue
		}
		if k["name"] == longest {
			named++
		}
	}
	if named < 3 {
		t.Errorf("%d records name the %d-byte key, want 3 or more: %v", named, len(longest), recs)
	}
}
