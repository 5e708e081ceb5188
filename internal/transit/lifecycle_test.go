package transit

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

func ptr[T any](v T) *T { return &v }

// rotated returns a key of type typ with n versions.
func rotated(t testing.TB, e *Engine, typ KeyType, n int, o CreateOptions) *Key {
	t.Helper()
	k := newKey(t, e, typ, o)
	for range n - 1 {
		k = must[*Key](t)(e.Rotate(ctx, k, Caller{}))
	}
	return k
}

func TestCreateKeyRules(t *testing.T) {
	e := testEngine(t)
	for _, tc := range []struct {
		name string
		o    CreateOptions
		ok   bool
	}{
		{"default type is aes256-gcm96", CreateOptions{}, true},
		{"convergent without derived", CreateOptions{Type: AES256GCM96, ConvergentEncryption: true}, false},
		{"convergent derived", CreateOptions{Type: ChaCha20Poly1305, Derived: true, ConvergentEncryption: true}, true},
		{"derived ecdsa", CreateOptions{Type: ECDSAP256, Derived: true}, false},
		{"derived hmac", CreateOptions{Type: HMAC, Derived: true}, false},
		{"convergent ed25519", CreateOptions{Type: Ed25519, Derived: true, ConvergentEncryption: true}, false},
		{"derived ed25519", CreateOptions{Type: Ed25519, Derived: true}, true},
		{"auto-rotate under an hour", CreateOptions{AutoRotatePeriod: 59 * time.Minute}, false},
		{"auto-rotate an hour", CreateOptions{AutoRotatePeriod: time.Hour}, true},
		{"auto-rotate fractional seconds", CreateOptions{AutoRotatePeriod: time.Hour + time.Millisecond}, false},
		{"hmac default size", CreateOptions{Type: HMAC}, true},
		{"hmac 31 bytes", CreateOptions{Type: HMAC, KeySize: 31}, false},
		{"hmac 512 bytes", CreateOptions{Type: HMAC, KeySize: 512}, true},
		{"hmac 513 bytes", CreateOptions{Type: HMAC, KeySize: 513}, false},
		{"key_size on aes", CreateOptions{Type: AES256GCM96, KeySize: 32}, false},
		{"unknown type", CreateOptions{Type: maxKeyType}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := e.CreateKey(ctx, "n", tc.o)
			if tc.ok != (err == nil) {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
			if err == nil && (k.LatestVersion() != 1 || k.Config().MinDecryptionVersion != 1 || !k.latest().CreationTime().Equal(testNow)) {
				t.Fatalf("new key %+v", k.Config())
			}
			if err != nil && ReasonOf(err) != ReasonInvalidConfig && ReasonOf(err) != ReasonInvalidRequest {
				t.Fatalf("reason %v", ReasonOf(err))
			}
		})
	}
	k := must[*Key](t)(e.CreateKey(ctx, "h", CreateOptions{Type: HMAC}))
	if k.Config().KeySize != HMACDefaultKeySize || len(k.latest().key) != HMACDefaultKeySize {
		t.Fatal("hmac default key size")
	}
}

func TestVersionsAndMinimums(t *testing.T) {
	e := testEngine(t)
	k := rotated(t, e, AES256GCM96, 1, CreateOptions{})
	r1 := must[Result](t)(e.Encrypt(ctx, k, []byte("one"), EncryptOptions{}))
	old := k
	k = must[*Key](t)(e.Rotate(ctx, k, Caller{}))
	k = must[*Key](t)(e.Rotate(ctx, k, Caller{}))
	if k.LatestVersion() != 3 || old.LatestVersion() != 1 {
		t.Fatal("rotation changed the old snapshot")
	}
	r3 := must[Result](t)(e.Encrypt(ctx, k, []byte("three"), EncryptOptions{}))
	if r3.KeyVersion != 3 || !strings.HasPrefix(r3.Text, "vault:v3:") {
		t.Fatalf("%+v", r3)
	}
	// The old snapshot meets a ciphertext of a version it has not seen: its
	// own error, naming the version, so the caller re-reads and retries.
	_, err := e.Decrypt(ctx, old, r3.Text, DecryptOptions{})
	wantReason(t, err, ReasonUnknownVersion)
	if err.(*Error).Version != 3 {
		t.Fatalf("version in error: %v", err)
	}
	must[DecryptResult](t)(e.Decrypt(ctx, k, r1.Text, DecryptOptions{}))

	r2 := must[Result](t)(e.Encrypt(ctx, k, []byte("two"), EncryptOptions{KeyVersion: 2}))
	if r2.KeyVersion != 2 {
		t.Fatal("key_version ignored")
	}
	_, err = e.Encrypt(ctx, k, []byte("x"), EncryptOptions{KeyVersion: 4})
	wantReason(t, err, ReasonUnknownVersion)
	_, err = e.Encrypt(ctx, k, []byte("x"), EncryptOptions{KeyVersion: -1})
	wantReason(t, err, ReasonInvalidRequest)

	k2, warnings, err := e.Configure(k, ConfigUpdate{MinDecryptionVersion: ptr(2), MinEncryptionVersion: ptr(3)})
	if err != nil || len(warnings) != 0 {
		t.Fatal(err, warnings)
	}
	_, err = e.Decrypt(ctx, k2, r1.Text, DecryptOptions{})
	wantReason(t, err, ReasonVersionTooOld)
	must[DecryptResult](t)(e.Decrypt(ctx, k2, r2.Text, DecryptOptions{}))
	_, err = e.Encrypt(ctx, k2, []byte("x"), EncryptOptions{KeyVersion: 2})
	wantReason(t, err, ReasonVersionTooOld)
	_, err = e.HMAC(k2, []byte("x"), HMACOptions{KeyVersion: 2})
	wantReason(t, err, ReasonVersionTooOld)
	h1 := must[Result](t)(e.HMAC(k, []byte("x"), HMACOptions{KeyVersion: 1}))
	_, err = e.VerifyHMAC(k2, []byte("x"), h1.Text, HMACOptions{})
	wantReason(t, err, ReasonVersionTooOld)
	// min_encryption_version 0 still allows nothing below
	// min_decryption_version, even when the snapshot holds it.
	k3, _, err := e.Configure(k, ConfigUpdate{MinDecryptionVersion: ptr(2)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Encrypt(ctx, k3, []byte("x"), EncryptOptions{KeyVersion: 1})
	wantReason(t, err, ReasonVersionTooOld)
	_, err = e.HMAC(k3, []byte("x"), HMACOptions{KeyVersion: 1})
	wantReason(t, err, ReasonVersionTooOld)
	// Rewrap moves an old ciphertext to the latest version.
	rw := must[Result](t)(e.Rewrap(ctx, k2, r2.Text, RewrapOptions{}))
	if rw.KeyVersion != 3 {
		t.Fatal("rewrap did not use the latest version")
	}
}

func TestConfigure(t *testing.T) {
	e := testEngine(t)
	base := rotated(t, e, AES256GCM96, 3, CreateOptions{})
	for _, tc := range []struct {
		name    string
		k       *Key
		u       ConfigUpdate
		reason  Reason
		check   func(c Config) bool
		warning bool
	}{
		{name: "min_decryption 0 means 1", u: ConfigUpdate{MinDecryptionVersion: ptr(0)}, warning: true,
			check: func(c Config) bool { return c.MinDecryptionVersion == 1 }},
		{name: "min_decryption negative", u: ConfigUpdate{MinDecryptionVersion: ptr(-1)}, reason: ReasonInvalidConfig},
		{name: "min_decryption over latest", u: ConfigUpdate{MinDecryptionVersion: ptr(4)}, reason: ReasonInvalidConfig},
		{name: "min_encryption over latest", u: ConfigUpdate{MinEncryptionVersion: ptr(4)}, reason: ReasonInvalidConfig},
		{name: "min_encryption negative", u: ConfigUpdate{MinEncryptionVersion: ptr(-2)}, reason: ReasonInvalidConfig},
		{name: "min_encryption below min_decryption", u: ConfigUpdate{MinDecryptionVersion: ptr(3), MinEncryptionVersion: ptr(2)}, reason: ReasonInvalidConfig},
		{name: "min_encryption 0 with min_decryption 3", u: ConfigUpdate{MinDecryptionVersion: ptr(3), MinEncryptionVersion: ptr(0)},
			check: func(c Config) bool { return c.MinDecryptionVersion == 3 && c.MinEncryptionVersion == 0 }},
		{name: "exportable on", u: ConfigUpdate{Exportable: ptr(true)}, check: func(c Config) bool { return c.Exportable }},
		{name: "exportable cannot be unset", k: must[*Key](t)(e.CreateKey(ctx, "x", CreateOptions{Exportable: true})),
			u: ConfigUpdate{Exportable: ptr(false)}, reason: ReasonInvalidConfig},
		{name: "plaintext backup cannot be unset", k: must[*Key](t)(e.CreateKey(ctx, "x", CreateOptions{AllowPlaintextBackup: true})),
			u: ConfigUpdate{AllowPlaintextBackup: ptr(false)}, reason: ReasonInvalidConfig},
		{name: "deletion allowed", u: ConfigUpdate{DeletionAllowed: ptr(true)}, check: func(c Config) bool { return c.DeletionAllowed }},
		{name: "auto-rotate 30m", u: ConfigUpdate{AutoRotatePeriod: ptr(30 * time.Minute)}, reason: ReasonInvalidConfig},
		{name: "auto-rotate 24h", u: ConfigUpdate{AutoRotatePeriod: ptr(24 * time.Hour)}, check: func(c Config) bool { return c.AutoRotatePeriod == 24*time.Hour }},
		{name: "auto-rotate off", u: ConfigUpdate{AutoRotatePeriod: ptr(time.Duration(0))}, check: func(c Config) bool { return c.AutoRotatePeriod == 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := tc.k
			if k == nil {
				k = base
			}
			nk, warnings, err := e.Configure(k, tc.u)
			if tc.reason != 0 {
				wantReason(t, err, tc.reason)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.warning != (len(warnings) > 0) {
				t.Fatalf("warnings %v", warnings)
			}
			if !tc.check(nk.Config()) {
				t.Fatalf("config %+v", nk.Config())
			}
		})
	}
}

// TestForgetDerived: ForgetKey drops the keys derived from one key's
// versions and no other's; ForgetDerived drops them all; a key forgotten
// derives again at its next use.
func TestForgetDerived(t *testing.T) {
	e := testEngine(t)
	a := rotated(t, e, AES256GCM96, 2, CreateOptions{Derived: true})
	b := rotated(t, e, Ed25519, 1, CreateOptions{Derived: true})
	for v := 1; v <= 2; v++ {
		must[Result](t)(e.Encrypt(ctx, a, []byte("x"), EncryptOptions{KeyVersion: v, Context: []byte("c")}))
	}
	must[SignResult](t)(e.Sign(context.Background(), b, []byte("x"), SignOptions{Context: []byte("c")}))
	if n := e.DerivedCached(); n != 3 {
		t.Fatalf("%d derived keys cached, want 3", n)
	}
	e.ForgetKey(a)
	if n := e.DerivedCached(); n != 1 {
		t.Errorf("after ForgetKey: %d derived keys cached, want b's 1", n)
	}
	ct := must[Result](t)(e.Encrypt(ctx, a, []byte("x"), EncryptOptions{Context: []byte("c")}))
	if pt := must[DecryptResult](t)(e.Decrypt(context.Background(), a, ct.Text, DecryptOptions{Context: []byte("c")})); string(pt.Plaintext) != "x" {
		t.Errorf("a forgotten key derives again: %q", pt.Plaintext)
	}
	e.ForgetDerived()
	if n := e.DerivedCached(); n != 0 {
		t.Errorf("after ForgetDerived: %d derived keys cached", n)
	}
	e.ForgetKey(nil)
	New(Options{DerivedCacheEntries: -1}).ForgetDerived() // no cache: nothing to do
}

func TestTrim(t *testing.T) {
	e := testEngine(t)
	k := rotated(t, e, AES256GCM96, 5, CreateOptions{Derived: true})
	c1 := must[Result](t)(e.Encrypt(ctx, k, []byte("x"), EncryptOptions{KeyVersion: 1, Context: []byte("c")}))
	_, err := e.Trim(k, 2)
	wantReason(t, err, ReasonInvalidConfig) // min_encryption_version not set
	k, _, err = e.Configure(k, ConfigUpdate{MinDecryptionVersion: ptr(3), MinEncryptionVersion: ptr(4)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		n    int
	}{{"zero", 0}, {"negative", -1}, {"above min_decryption", 4}, {"above min_encryption", 5}} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.Trim(k, tc.n)
			wantReason(t, err, ReasonInvalidConfig)
		})
	}
	before := e.derived.len()
	tk := must[*Key](t)(e.Trim(k, 3))
	if tk.Config().MinAvailableVersion != 3 || len(tk.Versions()) != 3 {
		t.Fatalf("trimmed key holds %d versions", len(tk.Versions()))
	}
	if e.derived.len() >= before {
		t.Fatal("the trimmed version's derived key stayed in the cache")
	}
	if _, err := e.Trim(tk, 2); err == nil {
		t.Fatal("min_available_version went down")
	}
	_, _, err = e.Configure(tk, ConfigUpdate{MinDecryptionVersion: ptr(2)})
	wantReason(t, err, ReasonInvalidConfig)
	_, _, err = e.Configure(tk, ConfigUpdate{MinEncryptionVersion: ptr(0)})
	wantReason(t, err, ReasonInvalidConfig)
	_, err = e.Decrypt(ctx, tk, c1.Text, DecryptOptions{Context: []byte("c")})
	wantReason(t, err, ReasonVersionTooOld)

	// A snapshot without old versions needs them loaded to lower
	// min_decryption_version.
	partial := must[*Key](t)(LoadKey(k.Config(), k.Versions()[2:]...))
	_, _, err = e.Configure(partial, ConfigUpdate{MinDecryptionVersion: ptr(1)})
	wantReason(t, err, ReasonVersionNotLoaded)
	full := must[*Key](t)(partial.WithVersions(k.Versions()[:2]...))
	if _, _, err := e.Configure(full, ConfigUpdate{MinDecryptionVersion: ptr(1)}); err != nil {
		t.Fatal(err)
	}
}

// TestZeroizeOnTrim: once nothing refers to a trimmed version, its key
// bytes are overwritten.
func TestZeroizeOnTrim(t *testing.T) {
	w := watchWipes(t)
	e := testEngine(t)
	k := rotated(t, e, AES256GCM96, 3, CreateOptions{})
	k, _, _ = e.Configure(k, ConfigUpdate{MinDecryptionVersion: ptr(2), MinEncryptionVersion: ptr(2)})
	addrs := secretAddrs(k.Versions()[0])
	w.arm(addrs)
	k = must[*Key](t)(e.Trim(k, 2))
	w.wait(t, addrs)
	runtime.KeepAlive(k)
}

func TestRotationRules(t *testing.T) {
	e := testEngine(t)
	k := newKey(t, e, AES256GCM96, CreateOptions{AutoRotatePeriod: time.Hour})
	if k.RotationDue(testNow.Add(time.Hour)) || !k.RotationDue(testNow.Add(time.Hour+time.Second)) {
		t.Fatal("RotationDue")
	}
	if _, rotated, _ := e.RotateIfDue(ctx, k, Caller{}); rotated {
		t.Fatal("rotated before the period")
	}
	later := New(Options{Rand: seededRand(3), Now: func() time.Time { return testNow.Add(2 * time.Hour) }})
	nk, rotatedNow, err := later.RotateIfDue(ctx, k, Caller{})
	if err != nil || !rotatedNow || nk.LatestVersion() != 2 {
		t.Fatal("not rotated after the period", err)
	}
	if nk.RotationDue(testNow.Add(2 * time.Hour)) {
		t.Fatal("due again right after rotation")
	}
}

func TestMarshalVersion(t *testing.T) {
	e := testEngine(t)
	for _, typ := range KeyTypes() {
		t.Run(typ.String(), func(t *testing.T) {
			k := newKey(t, e, typ, CreateOptions{})
			v := k.latest()
			b := must[[]byte](t)(MarshalVersion(v))
			back := must[*Version](t)(UnmarshalVersion(b))
			if back.num != v.num || back.typ != v.typ || !back.created.Equal(v.created) ||
				!bytes.Equal(back.hmacKey, v.hmacKey) || back.pubText != v.pubText || back.HasPrivateKey() != v.HasPrivateKey() {
				t.Fatal("round trip changed the version")
			}
			if again := must[[]byte](t)(MarshalVersion(back)); !bytes.Equal(again, b) {
				t.Fatal("marshal is not stable")
			}
			if strings.Contains(fmt.Sprintf("%v %+v %#v %s", v, v, v, v), fmt.Sprintf("%x", v.hmacKey[:8])) {
				t.Fatal("formatting prints material")
			}
			// A copy made by the unmarshaled version does the same work.
			nk := must[*Key](t)(LoadKey(k.Config(), back))
			if r, err := e.HMAC(nk, []byte("m"), HMACOptions{}); err != nil || r.Text != must[Result](t)(e.HMAC(k, []byte("m"), HMACOptions{})).Text {
				t.Fatal("unmarshaled version computes another HMAC")
			}
			for i := range b {
				if i >= 64 && i < len(b)-64 && i%61 != 0 {
					continue // RSA keys are long, and each parse validates one
				}
				bad := bytes.Clone(b)
				bad[i] ^= 0x01
				got, err := UnmarshalVersion(bad)
				if err != nil {
					continue
				}
				// The magic, format, flags and reserved bytes are all
				// checked; any other change that still parses is another
				// valid version (a different number, type of the same
				// key size, time or key), spelled canonically. The seal
				// around the stored bytes detects tampering.
				if i < 5 || i == 6 || i == 7 {
					t.Fatalf("flipped header byte %d accepted", i)
				}
				if again, _ := MarshalVersion(got); !bytes.Equal(again, bad) {
					t.Fatalf("flipped byte %d: accepted a non-canonical encoding", i)
				}
			}
			for _, cut := range []int{0, 3, versionHeader, len(b) - 1} {
				if _, err := UnmarshalVersion(b[:cut]); err == nil {
					t.Fatalf("truncated to %d accepted", cut)
				}
			}
			_, err := UnmarshalVersion(append(bytes.Clone(b), 0))
			wantReason(t, err, ReasonCorrupt)
		})
	}
}

func TestMarshalConfig(t *testing.T) {
	e := testEngine(t)
	k := rotated(t, e, AES128GCM96, 3, CreateOptions{Derived: true, ConvergentEncryption: true, Exportable: true, AutoRotatePeriod: 48 * time.Hour})
	k, _, _ = e.Configure(k, ConfigUpdate{MinDecryptionVersion: ptr(2), MinEncryptionVersion: ptr(3), DeletionAllowed: ptr(true)})
	k = must[*Key](t)(e.Trim(k, 2))
	b := must[[]byte](t)(MarshalConfig(k.Config()))
	want := `{"format":1,"name":"k","type":"aes128-gcm96","latest_version":3,"min_decryption_version":2,"min_encryption_version":3,"min_available_version":2,"deletion_allowed":true,"exportable":true,"allow_plaintext_backup":false,"derived":true,"kdf":"hkdf_sha256","convergent_encryption":true,"convergent_encryption_version":3,"auto_rotate_period":172800,"imported_key":false,"imported_key_allow_rotation":false}`
	if string(b) != want {
		t.Fatalf("config JSON\n got %s\nwant %s", b, want)
	}
	c := must[Config](t)(UnmarshalConfig(b))
	if c != k.Config() {
		t.Fatalf("round trip %+v", c)
	}
	for _, tc := range []struct{ name, json string }{
		{"unknown member", strings.Replace(want, `"format":1`, `"format":1,"x":1`, 1)},
		{"duplicate member", strings.Replace(want, `"format":1`, `"format":1,"format":1`, 1)},
		{"trailing data", want + "{}"},
		{"format 2", strings.Replace(want, `"format":1`, `"format":2`, 1)},
		{"wrong kdf", strings.Replace(want, `hkdf_sha256`, `hmac-sha256-counter`, 1)},
		{"convergent version 2", strings.Replace(want, `"convergent_encryption_version":3`, `"convergent_encryption_version":2`, 1)},
		{"min_decryption above latest", strings.Replace(want, `"min_decryption_version":2`, `"min_decryption_version":4`, 1)},
		{"min_available above min_decryption", strings.Replace(want, `"min_available_version":2`, `"min_available_version":3`, 1)},
		{"negative period", strings.Replace(want, `172800`, `-1`, 1)},
		{"short period", strings.Replace(want, `172800`, `60`, 1)},
		{"unknown type", strings.Replace(want, `aes128-gcm96`, `aes512`, 1)},
		{"not an object", `[]`},
		{"empty", ``},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := UnmarshalConfig([]byte(tc.json))
			wantReason(t, err, ReasonCorrupt)
		})
	}
}

func TestLoadKey(t *testing.T) {
	e := testEngine(t)
	k := rotated(t, e, ChaCha20Poly1305, 3, CreateOptions{})
	vs := k.Versions()
	other := newKey(t, e, AES256GCM96, CreateOptions{})
	for _, tc := range []struct {
		name string
		cfg  Config
		vs   []*Version
	}{
		{"missing latest", k.Config(), vs[:2]},
		{"missing middle", k.Config(), []*Version{vs[0], vs[2]}},
		{"duplicate", k.Config(), []*Version{vs[0], vs[1], vs[2], vs[2]}},
		{"other type", k.Config(), append([]*Version{other.latest()}, vs[1:]...)},
		{"newer than latest", func() Config { c := k.Config(); c.LatestVersion = 2; return c }(), vs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := LoadKey(tc.cfg, tc.vs...); err == nil {
				t.Fatal("accepted")
			}
		})
	}
	// Versions in any order.
	if _, err := LoadKey(k.Config(), vs[2], vs[0], vs[1]); err != nil {
		t.Fatal(err)
	}
}

// TestCreateRSA generates one RSA key through the engine (the other tests
// use fixed keys from testdata).
func TestCreateRSA(t *testing.T) {
	e := testEngine(t)
	k := must[*Key](t)(e.CreateKey(ctx, "r", CreateOptions{Type: RSA2048}))
	if k.latest().rsa.N.BitLen() != 2048 || k.latest().rsa.Precomputed.Dp == nil {
		t.Fatal("not a precomputed 2048-bit key")
	}
	s := must[SignResult](t)(e.Sign(ctx, k, []byte("m"), SignOptions{}))
	if v := must[VerifyResult](t)(e.Verify(ctx, k, []byte("m"), s.Signature, SignOptions{})); !v.Valid {
		t.Fatal("sign/verify")
	}
}
