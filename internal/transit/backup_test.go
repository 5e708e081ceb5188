package transit

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// backedUp is a key of typ with three versions, the first two retired
// (min_decryption_version 3) but kept, and both backup flags set.
func backedUp(t testing.TB, e *Engine, typ KeyType) *Key {
	t.Helper()
	k := newKey(t, e, typ, CreateOptions{Exportable: true, AllowPlaintextBackup: true})
	if typ.isRSA() {
		return k // rotating RSA keys is slow; one version is enough
	}
	k = must[*Key](t)(e.Rotate(ctx, k, Caller{}))
	k = must[*Key](t)(e.Rotate(ctx, k, Caller{}))
	three := 3
	k, _, err := e.Configure(k, ConfigUpdate{MinDecryptionVersion: &three})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestBackupRoundTrip(t *testing.T) {
	e := testEngine(t)
	for _, typ := range KeyTypes() {
		t.Run(typ.String(), func(t *testing.T) {
			k := backedUp(t, e, typ)
			b, err := e.Backup(k)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseBackup(b.Reveal())
			if err != nil {
				t.Fatal(err)
			}
			if got.Config() != k.Config() {
				t.Errorf("config %+v, want %+v", got.Config(), k.Config())
			}
			want, have := k.Versions(), got.Versions()
			if len(have) != len(want) {
				t.Fatalf("%d versions, want %d", len(have), len(want))
			}
			for i := range want {
				a, b := must[[]byte](t)(MarshalVersion(want[i])), must[[]byte](t)(MarshalVersion(have[i]))
				if !bytes.Equal(a, b) {
					t.Errorf("version %d differs", want[i].Number())
				}
			}
		})
	}
}

func TestBackupRefused(t *testing.T) {
	e := testEngine(t)
	tests := []struct {
		name   string
		opts   CreateOptions
		detail string
	}{
		{"neither flag", CreateOptions{}, "exporting is disallowed on the policy"},
		{"not exportable", CreateOptions{AllowPlaintextBackup: true}, "exporting is disallowed on the policy"},
		{"no plaintext backup", CreateOptions{Exportable: true}, "plaintext backup is disallowed on the policy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.Backup(newKey(t, e, AES256GCM96, tt.opts))
			wantReason(t, err, ReasonNotExportable)
			if te := err.(*Error); te.Detail != tt.detail {
				t.Errorf("detail %q, want %q", te.Detail, tt.detail)
			}
		})
	}
	t.Run("retired versions not loaded", func(t *testing.T) {
		k := backedUp(t, e, AES256GCM96)
		vs := k.Versions()
		partial := must[*Key](t)(LoadKey(k.Config(), vs[len(vs)-1]))
		_, err := e.Backup(partial)
		wantReason(t, err, ReasonVersionNotLoaded)
	})
}

// TestParseBackupRejects feeds ParseBackup damaged backups: each is
// refused as the caller's bad input, never taken as a key.
func TestParseBackupRejects(t *testing.T) {
	e := testEngine(t)
	good := must[Secret](t)(e.Backup(backedUp(t, e, ECDSAP256))).Reveal()
	doc := must[[]byte](t)(base64.StdEncoding.DecodeString(string(good)))
	var j map[string]json.RawMessage
	if err := json.Unmarshal(doc, &j); err != nil {
		t.Fatal(err)
	}
	var versions []string
	if err := json.Unmarshal(j["versions"], &versions); err != nil {
		t.Fatal(err)
	}
	with := func(field string, v any) []byte {
		m := map[string]json.RawMessage{}
		for k, x := range j {
			m[k] = x
		}
		if v == nil {
			delete(m, field)
		} else {
			m[field] = must[[]byte](t)(json.Marshal(v))
		}
		return base64.StdEncoding.AppendEncode(nil, must[[]byte](t)(json.Marshal(m)))
	}
	enc := func(s string) []byte { return []byte(base64.StdEncoding.EncodeToString([]byte(s))) }
	tests := []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"not base64", []byte("!!!")},
		{"not JSON", enc("backup")},
		{"JSON array", enc("[]")},
		{"trailing data", append(bytes.Clone(good[:len(good)-4]), enc(`}{}`)...)},
		{"unknown member", with("extra", 1)},
		{"duplicate member", enc(`{"format":1,"format":1}`)},
		{"format 2", with("format", 2)},
		{"no config", with("config", nil)},
		{"config null", with("config", json.RawMessage("null"))},
		{"no versions", with("versions", []string{})},
		{"a version missing", with("versions", versions[1:])},
		{"a version twice", with("versions", []string{versions[0], versions[0], versions[2]})},
		{"versions out of order", with("versions", []string{versions[1], versions[0], versions[2]})},
		{"a version not base64", with("versions", []string{versions[0], "%%", versions[2]})},
		{"a version damaged", with("versions", []string{versions[0], base64.StdEncoding.EncodeToString([]byte("KGTV")), versions[2]})},
		{"an extra version", with("versions", append(slices.Clone(versions), versions[2]))},
		{"too large", bytes.Repeat([]byte("A"), MaxBackupBytes+4)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := ParseBackup(tt.in)
			if err == nil {
				t.Fatalf("accepted: %v", k)
			}
			if r := ReasonOf(err); r != ReasonInvalidRequest && r != ReasonTooLarge {
				t.Fatalf("error %v has reason %v", err, r)
			}
			if strings.Contains(err.Error(), string(tt.in)) && len(tt.in) > 8 {
				t.Errorf("error repeats the input")
			}
		})
	}
}

// TestDescribeListsDecryptableVersions: a retired version, still held by
// the snapshot, is not listed (nor its public key published).
func TestDescribeListsDecryptableVersions(t *testing.T) {
	e := testEngine(t)
	for _, typ := range []KeyType{ECDSAP256, Ed25519, AES256GCM96} {
		t.Run(typ.String(), func(t *testing.T) {
			k := backedUp(t, e, typ)
			if _, ok := k.Version(1); !ok {
				t.Fatal("the snapshot no longer holds version 1: the test proves nothing")
			}
			d := must[Description](t)(e.Describe(k, nil))
			var got []int
			for _, v := range d.Versions {
				got = append(got, v.Version)
			}
			if len(got) != 1 || got[0] != 3 {
				t.Errorf("versions %v, want [3]", got)
			}
			if typ.Capabilities().Signing {
				keys := must[[]ExportedKey](t)(e.Export(k, ExportPublicKey, 0, FormatDefault))
				if len(keys) != 1 || keys[0].Version != 3 {
					t.Errorf("public keys exported: %d, want version 3 only", len(keys))
				}
				_, err := e.Export(k, ExportPublicKey, 1, FormatDefault)
				wantReason(t, err, ReasonVersionTooOld)
			}
		})
	}
}

// FuzzParseBackup: a backup is outside input (restore takes it from the
// caller). ParseBackup never panics, refuses with ReasonInvalidRequest or
// ReasonTooLarge, and what it accepts backs up to a backup that parses to
// the same key.
//
//	go test -run='^$' -fuzz='^FuzzParseBackup$' -fuzztime=30s ./internal/transit
func FuzzParseBackup(f *testing.F) {
	e := testEngine(f)
	for _, typ := range []KeyType{AES256GCM96, ECDSAP256, Ed25519, HMAC, RSA2048} {
		f.Add(must[Secret](f)(e.Backup(backedUp(f, e, typ))).Reveal())
	}
	f.Add([]byte(base64.StdEncoding.EncodeToString([]byte(`{"format":1,"config":{},"versions":[]}`))))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := ParseBackup(b)
		if err != nil {
			if r := ReasonOf(err); r != ReasonInvalidRequest && r != ReasonTooLarge {
				t.Fatalf("error %v has reason %v", err, r)
			}
			return
		}
		cfg := k.Config()
		cfg.Exportable, cfg.AllowPlaintextBackup = true, true
		k2, err := LoadKey(cfg, k.Versions()...)
		if err != nil {
			t.Fatalf("an accepted key does not load: %v", err)
		}
		again, err := e.Backup(k2)
		if err != nil {
			t.Fatalf("an accepted key does not back up: %v", err)
		}
		k3, err := ParseBackup(again.Reveal())
		if err != nil || k3.Config() != k2.Config() || len(k3.Versions()) != len(k.Versions()) {
			t.Fatalf("the backup of an accepted key does not parse back: %v", err)
		}
	})
}
