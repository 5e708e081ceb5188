package audit

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestRecordValidate(t *testing.T) {
	d := testHMACKey(t).Sum("x")
	jwt := "eyJhbGciOiJFUzI1NiJ9." + strings.Repeat("eyJzdWIiOiJ1In0", 10) + ".c2ln"
	tests := []struct {
		name  string
		edit  func(r *Record)
		field string // "" when valid
	}{
		{"complete", func(r *Record) { r.Hashed = map[string]Digest{"jti": d}; r.Reason = "rate_limited" }, ""},
		{"minimal", func(r *Record) { *r = Record{Time: r.Time, Operation: "oauth2.token", Result: ResultRefused} }, ""},
		{"three-part operation", func(r *Record) { r.Operation = "admin.clients.create" }, ""},
		{"IPv6 remote", func(r *Record) { r.Remote = netip.MustParseAddr("2001:db8::1") }, ""},
		{"zero time", func(r *Record) { r.Time = time.Time{} }, "Time"},
		{"year 10000", func(r *Record) { r.Time = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, "Time"},
		{"request id with a space", func(r *Record) { r.RequestID = "a b" }, "RequestID"},
		{"request id with a quote", func(r *Record) { r.RequestID = `a"b` }, "RequestID"},
		{"request id with a backslash", func(r *Record) { r.RequestID = `a\b` }, "RequestID"},
		{"request id with a control byte", func(r *Record) { r.RequestID = "a\nb" }, "RequestID"},
		{"request id with UTF-8", func(r *Record) { r.RequestID = "é" }, "RequestID"},
		{"a JWT as request id", func(r *Record) { r.RequestID = jwt }, "RequestID"},
		{"a JWT as tenant", func(r *Record) { r.Tenant = jwt }, "Tenant"},
		{"a JWT as principal id", func(r *Record) { r.Principal.ID = jwt }, "Principal.ID"},
		{"a JWT as key name", func(r *Record) { r.Key.Name = jwt }, "Key.Name"},
		{"principal id without a kind", func(r *Record) { r.Principal = Principal{ID: "u"} }, "Principal.ID"},
		{"unknown principal kind", func(r *Record) { r.Principal.Kind = 9 }, "Principal.Kind"},
		{"no operation", func(r *Record) { r.Operation = "" }, "Operation"},
		{"one-part operation", func(r *Record) { r.Operation = "encrypt" }, "Operation"},
		{"upper-case operation", func(r *Record) { r.Operation = "Transit.encrypt" }, "Operation"},
		{"operation with an empty part", func(r *Record) { r.Operation = "transit..encrypt" }, "Operation"},
		{"operation ending in a dot", func(r *Record) { r.Operation = "transit." }, "Operation"},
		{"operation part beginning with a digit", func(r *Record) { r.Operation = "transit.1" }, "Operation"},
		{"key version without a name", func(r *Record) { r.Key = KeyRef{Version: 2} }, "Key.Version"},
		{"negative key version", func(r *Record) { r.Key.Version = -1 }, "Key.Version"},
		{"no result", func(r *Record) { r.Result = 0 }, "Result"},
		{"unknown result", func(r *Record) { r.Result = 7 }, "Result"},
		{"free-text reason", func(r *Record) { r.Reason = "the password was hunter2" }, "Reason"},
		{"status 42", func(r *Record) { r.Status = 42 }, "Status"},
		{"remote with a zone", func(r *Record) { r.Remote = netip.MustParseAddr("fe80::1%eth0") }, "Remote"},
		{"zero digest", func(r *Record) { r.Hashed = map[string]Digest{"jti": {}} }, "Hashed[jti]"},
		{"hashed name with upper case", func(r *Record) { r.Hashed = map[string]Digest{"JTI": d} }, "Hashed"},
		{"aggregate", func(r *Record) { r.RequestID, r.Count, r.Since = "", 1000, r.Time.Add(-time.Minute) }, ""},
		{"aggregate of one", func(r *Record) { r.RequestID, r.Count, r.Since = "", 1, r.Time }, ""},
		{"aggregate without since", func(r *Record) { r.RequestID, r.Count = "", 3 }, "Since"},
		{"since without a count", func(r *Record) { r.RequestID, r.Since = "", r.Time }, "Since"},
		{"aggregate since after time", func(r *Record) { r.RequestID, r.Count, r.Since = "", 3, r.Time.Add(time.Nanosecond) }, "Since"},
		{"aggregate since in year 0", func(r *Record) { r.RequestID, r.Count, r.Since = "", 3, time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC) }, "Since"},
		{"aggregate with a request id", func(r *Record) { r.Count, r.Since = 3, r.Time }, "RequestID"},
		{"too many hashed values", func(r *Record) {
			r.Hashed = map[string]Digest{}
			for i := range MaxHashed + 1 {
				r.Hashed[fmt.Sprintf("v%d", i)] = d
			}
		}, "Hashed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := testRecord(1)
			r.Time = time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
			tt.edit(&r)
			err := r.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field || !errors.Is(err, ErrInvalidRecord) {
				t.Fatalf("Validate: %v, want a FieldError for %s", err, tt.field)
			}
			if strings.Contains(err.Error(), "eyJ") || strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the error repeats the value: %v", err)
			}
		})
	}
}

func TestKeysNeverPrint(t *testing.T) {
	seed := bytes.Repeat([]byte{0x42}, SeedSize)
	secret := bytes.Repeat([]byte{0x37}, 40)
	sk, err := NewSigningKey(seed)
	if err != nil {
		t.Fatal(err)
	}
	hk, err := NewHMACKey(secret)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for _, format := range []string{"%v", "%+v", "%#v", "%s", "%x", "%X", "%q"} {
		fmt.Fprintf(&out, format+"\n", sk)
		fmt.Fprintf(&out, format+"\n", hk)
		fmt.Fprintf(&out, format+"\n", struct{ S, H any }{sk, hk})
	}
	slog.New(slog.NewTextHandler(&out, nil)).Info("keys", "signing", sk, "hmac", hk)
	slog.New(slog.NewJSONHandler(&out, nil)).Info("keys", "signing", sk, "hmac", hk)
	j, _ := json.Marshal(struct{ S, H any }{sk, hk})
	out.Write(j)
	priv := sk.priv
	for _, secretForm := range []string{
		hex.EncodeToString(seed), hex.EncodeToString(priv), strings.ToUpper(hex.EncodeToString(seed)),
		hex.EncodeToString(secret), string(seed), string(secret), "0x42, 0x42", "66, 66, 66", "55, 55, 55",
	} {
		if strings.Contains(out.String(), secretForm) {
			t.Fatalf("key material %q printed:\n%s", secretForm, out.String())
		}
	}
	if !strings.Contains(out.String(), "audit.SigningKey("+sk.KeyID()+")") || !strings.Contains(out.String(), "audit.HMACKey(redacted)") {
		t.Errorf("keys print as:\n%s", out.String())
	}
}

func TestKeySizes(t *testing.T) {
	if _, err := NewSigningKey(make([]byte, 31)); !errors.Is(err, ErrKeySize) {
		t.Errorf("31-byte seed: %v", err)
	}
	if _, err := NewHMACKey(make([]byte, 31)); !errors.Is(err, ErrKeySize) {
		t.Errorf("31-byte HMAC secret: %v", err)
	}
	if _, err := GenerateSigningKey(bytes.NewReader(nil)); err == nil {
		t.Error("GenerateSigningKey with no randomness succeeded")
	}
	k, err := GenerateSigningKey(bytes.NewReader(bytes.Repeat([]byte{1}, 32)))
	if err != nil || k.KeyID() != testSigner(t, 1).KeyID() || len(k.KeyID()) != 16 {
		t.Errorf("GenerateSigningKey: %v %v", k, err)
	}
}

func TestDigest(t *testing.T) {
	k := testHMACKey(t)
	a, b, c := k.Sum("jti-1"), k.Sum("jti-1"), k.Sum("jti-2")
	if !a.Equal(b) || a.Equal(c) || a.Equal(Digest{}) || (Digest{}).Equal(Digest{}) {
		t.Error("Equal")
	}
	s := a.String()
	if !strings.HasPrefix(s, "hmac-sha256:") || len(s) != len("hmac-sha256:")+64 || (Digest{}).String() != "" {
		t.Errorf("String() = %q", s)
	}
	if d, ok := parseDigest(s); !ok || !d.Equal(a) {
		t.Error("parseDigest does not read String's form")
	}
	other, _ := NewHMACKey(bytes.Repeat([]byte{1}, 32))
	if other.Sum("jti-1").Equal(a) {
		t.Error("two keys give the same digest")
	}
}
