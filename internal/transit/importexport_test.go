package transit

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"hash"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/keygate/keygate/internal/transit/kwp"
)

var (
	wrapOnce sync.Once
	wrapKey  *WrappingKey
)

func testWrappingKey(t testing.TB) *WrappingKey {
	t.Helper()
	wrapOnce.Do(func() {
		b, err := os.ReadFile(filepath.Join("testdata", "wrapping-rsa-4096.pem"))
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(b)
		k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		wrapKey, err = NewWrappingKey(k.(*rsa.PrivateKey))
		if err != nil {
			t.Fatal(err)
		}
	})
	return wrapKey
}

// wrapForImport builds Vault's import ciphertext the way Vault's
// documentation (and its own WrapKey) describes it: an ephemeral AES-256
// key encrypted with RSA-OAEP (hash for OAEP and MGF1, empty label) under
// the wrapping key, followed by AES-KWP of the target key under the
// ephemeral key, all base64.
func wrapForImport(t testing.TB, pub *rsa.PublicKey, target []byte, h hash.Hash) string {
	t.Helper()
	eph := make([]byte, 32)
	rand.Read(eph)
	wrappedEph, err := rsa.EncryptOAEP(h, rand.Reader, pub, eph, []byte{})
	if err != nil {
		t.Fatal(err)
	}
	wrappedKey, err := kwp.Wrap(eph, target)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(append(wrappedEph, wrappedKey...))
}

// targetKey makes key material to import and returns it with its PKCS #8
// (or raw) encoding.
func targetKey(t testing.TB, typ KeyType) (any, []byte) {
	t.Helper()
	switch {
	case typ.symmetricAEAD():
		b := make([]byte, typ.symmetricKeySize())
		rand.Read(b)
		return b, b
	case typ == HMAC:
		b := make([]byte, 48)
		rand.Read(b)
		return b, b
	case typ == Ed25519:
		_, priv, _ := ed25519.GenerateKey(rand.Reader)
		der, _ := x509.MarshalPKCS8PrivateKey(priv)
		return priv, der
	case typ.isECDSA():
		priv, _ := ecdsa.GenerateKey(curveOf(typ), rand.Reader)
		der, _ := x509.MarshalPKCS8PrivateKey(priv)
		return priv, der
	default:
		priv := rsaTestVersion(t, typ, 1).rsa
		der, _ := x509.MarshalPKCS8PrivateKey(priv)
		return priv, der
	}
}

func TestImport(t *testing.T) {
	e := testEngine(t)
	w := testWrappingKey(t)
	for _, typ := range KeyTypes() {
		t.Run(typ.String(), func(t *testing.T) {
			orig, material := targetKey(t, typ)
			ct := wrapForImport(t, w.PublicKey(), material, sha256.New())
			k, err := e.ImportKey(ctx, w, "imported", ImportOptions{Type: typ, Ciphertext: ct, Exportable: true})
			if err != nil {
				t.Fatal(err)
			}
			if c := k.Config(); !c.Imported || c.LatestVersion != 1 {
				t.Fatalf("config %+v", c)
			}
			msg := []byte("imported")
			switch {
			case typ.symmetricAEAD():
				// A ciphertext made with the raw AEAD and the imported
				// key, in Vault's format, decrypts.
				raw := rawAEAD(t, typ, orig.([]byte))
				nonce := make([]byte, raw.NonceSize())
				rand.Read(nonce)
				text := "vault:v1:" + base64.StdEncoding.EncodeToString(raw.Seal(bytes.Clone(nonce), nonce, msg, nil))
				d := must[DecryptResult](t)(e.Decrypt(ctx, k, text, DecryptOptions{}))
				if !bytes.Equal(d.Plaintext, msg) {
					t.Fatal("decrypt")
				}
				ex := must[[]ExportedKey](t)(e.Export(k, ExportEncryptionKey, 1, FormatDefault))
				if string(ex[0].Key.Reveal()) != base64.StdEncoding.EncodeToString(orig.([]byte)) {
					t.Fatal("export differs from the import")
				}
			case typ == HMAC:
				ex := must[[]ExportedKey](t)(e.Export(k, ExportHMACKey, 1, FormatDefault))
				if string(ex[0].Key.Reveal()) != base64.StdEncoding.EncodeToString(orig.([]byte)) || k.Config().KeySize != 48 {
					t.Fatal("hmac key")
				}
			default:
				s := must[SignResult](t)(e.Sign(ctx, k, msg, SignOptions{}))
				pub := orig.(crypto.Signer).Public()
				sig, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(s.Signature, "vault:v1:"))
				digest := SHA2_256.appendSum(nil, msg)
				var ok bool
				switch p := pub.(type) {
				case ed25519.PublicKey:
					ok = ed25519.Verify(p, msg, sig)
				case *ecdsa.PublicKey:
					ok = ecdsa.VerifyASN1(p, digest, sig)
				case *rsa.PublicKey:
					ok = rsa.VerifyPSS(p, crypto.SHA256, digest, sig, nil) == nil
				}
				if !ok {
					t.Fatal("signature of the imported key does not verify with its public key")
				}
			}
			// Imported keys do not rotate unless allowed, and take new
			// versions by import_version.
			_, err = e.Rotate(ctx, k, Caller{})
			wantReason(t, err, ReasonRotationNotAllowed)
			_, material2 := targetKey(t, typ)
			k2, err := e.ImportVersion(ctx, k, w, ImportVersionOptions{Ciphertext: wrapForImport(t, w.PublicKey(), material2, sha512.New()), HashFunction: "sha512"})
			if typ == HMAC {
				if k2 == nil || err != nil {
					t.Fatal(err)
				}
			} else if err != nil || k2.LatestVersion() != 2 {
				t.Fatal(err)
			}
		})
	}
}

func TestImportRules(t *testing.T) {
	e := testEngine(t)
	w := testWrappingKey(t)
	aes := make([]byte, 32)
	good := wrapForImport(t, w.PublicKey(), aes, sha256.New())
	raw, _ := base64.StdEncoding.DecodeString(good)
	flip := func(i int) string {
		b := bytes.Clone(raw)
		b[i] ^= 1
		return base64.StdEncoding.EncodeToString(b)
	}
	ecPriv, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecDER, _ := x509.MarshalPKCS8PrivateKey(ecPriv)
	for _, tc := range []struct {
		name   string
		o      ImportOptions
		reason Reason
	}{
		{"not base64", ImportOptions{Type: AES256GCM96, Ciphertext: "!!"}, ReasonImportFailed},
		{"too short", ImportOptions{Type: AES256GCM96, Ciphertext: base64.StdEncoding.EncodeToString(raw[:512])}, ReasonImportFailed},
		{"altered OAEP part", ImportOptions{Type: AES256GCM96, Ciphertext: flip(3)}, ReasonImportFailed},
		{"altered KWP part", ImportOptions{Type: AES256GCM96, Ciphertext: flip(len(raw) - 1)}, ReasonImportFailed},
		{"wrong hash function", ImportOptions{Type: AES256GCM96, Ciphertext: good, HashFunction: "SHA384"}, ReasonImportFailed},
		{"unknown hash function", ImportOptions{Type: AES256GCM96, Ciphertext: good, HashFunction: "MD5"}, ReasonInvalidRequest},
		{"wrong size for the type", ImportOptions{Type: AES128GCM96, Ciphertext: good}, ReasonImportFailed},
		{"curve mismatch", ImportOptions{Type: ECDSAP384, Ciphertext: wrapForImport(t, w.PublicKey(), ecDER, sha256.New())}, ReasonImportFailed},
		{"EC key as RSA", ImportOptions{Type: RSA2048, Ciphertext: wrapForImport(t, w.PublicKey(), ecDER, sha256.New())}, ReasonImportFailed},
		{"symmetric key as PKCS #8", ImportOptions{Type: Ed25519, Ciphertext: good}, ReasonImportFailed},
		{"both ciphertext and public key", ImportOptions{Type: ECDSAP256, Ciphertext: good, PublicKey: "x"}, ReasonInvalidRequest},
		{"neither", ImportOptions{Type: ECDSAP256}, ReasonInvalidRequest},
		{"auto-rotate without allow_rotation", ImportOptions{Type: AES256GCM96, Ciphertext: good, AutoRotatePeriod: 3600e9}, ReasonInvalidRequest},
		{"public key for aes", ImportOptions{Type: AES256GCM96, PublicKey: "x"}, ReasonInvalidRequest},
		{"derived ecdsa", ImportOptions{Type: ECDSAP256, Ciphertext: wrapForImport(t, w.PublicKey(), ecDER, sha256.New()), Derived: true}, ReasonInvalidConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.ImportKey(ctx, w, "x", tc.o)
			wantReason(t, err, tc.reason)
		})
	}
	k := must[*Key](t)(e.ImportKey(ctx, w, "x", ImportOptions{Type: AES256GCM96, Ciphertext: good, AllowRotation: true, AutoRotatePeriod: 3600e9}))
	k = must[*Key](t)(e.Rotate(ctx, k, Caller{}))
	if k.Config().Imported {
		t.Fatal("a rotated key still counts as imported")
	}
	_, err := e.ImportVersion(ctx, k, w, ImportVersionOptions{Ciphertext: good})
	wantReason(t, err, ReasonInvalidRequest)
	created := newKey(t, e, AES256GCM96, CreateOptions{})
	_, err = e.ImportVersion(ctx, created, w, ImportVersionOptions{Ciphertext: good})
	wantReason(t, err, ReasonInvalidRequest)
}

func TestImportPublicKey(t *testing.T) {
	e := testEngine(t)
	priv, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	pemText := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	k := must[*Key](t)(e.ImportKey(ctx, nil, "pub", ImportOptions{Type: ECDSAP256, PublicKey: pemText}))
	msg := []byte("m")
	sig, _ := ecdsa.SignASN1(rand.Reader, priv, SHA2_256.appendSum(nil, msg))
	text := "vault:v1:" + base64.StdEncoding.EncodeToString(sig)
	if v := must[VerifyResult](t)(e.Verify(ctx, k, msg, text, SignOptions{})); !v.Valid {
		t.Fatal("verify with an imported public key")
	}
	_, err := e.Sign(ctx, k, msg, SignOptions{})
	wantReason(t, err, ReasonNoPrivateKey)
	pk := must[[]ExportedKey](t)(e.Export(k, ExportPublicKey, 0, FormatDefault))
	if string(pk[0].Key.Reveal()) != strings.TrimSpace(pemText) {
		t.Fatal("public key export")
	}
	// Stored and loaded like any version.
	b := must[[]byte](t)(MarshalVersion(k.latest()))
	if v := must[*Version](t)(UnmarshalVersion(b)); v.HasPrivateKey() {
		t.Fatal("public-only version gained a private key")
	}
	_, err = e.ImportKey(ctx, nil, "pub", ImportOptions{Type: Ed25519, PublicKey: pemText})
	wantReason(t, err, ReasonImportFailed)
}

// TestExport checks every export type and format against Vault's encodings
// (internal/builtin/logical/transit/path_export.go).
func TestExport(t *testing.T) {
	e := testEngine(t)
	for _, typ := range KeyTypes() {
		t.Run(typ.String(), func(t *testing.T) {
			k := newKey(t, e, typ, CreateOptions{Exportable: true})
			v := k.latest()
			get := func(et ExportType, f ExportFormat) (string, error) {
				ex, err := e.Export(k, et, 0, f)
				if err != nil {
					return "", err
				}
				if len(ex) != 1 || ex[0].Version != 1 {
					t.Fatalf("export %+v", ex)
				}
				return string(ex[0].Key.Reveal()), nil
			}
			hk, err := get(ExportHMACKey, FormatDefault)
			if err != nil || hk != base64.StdEncoding.EncodeToString(v.hmacKey) {
				t.Fatal("hmac-key", err)
			}
			_, err = get(ExportHMACKey, FormatPEM)
			wantReason(t, err, ReasonInvalidRequest)
			switch {
			case typ.symmetricAEAD():
				s, _ := get(ExportEncryptionKey, FormatRaw)
				if s != base64.StdEncoding.EncodeToString(v.key) {
					t.Fatal("encryption-key")
				}
				_, err := get(ExportSigningKey, FormatDefault)
				wantReason(t, err, ReasonUnsupported)
				_, err = get(ExportPublicKey, FormatDefault)
				wantReason(t, err, ReasonUnsupported)
			case typ == Ed25519:
				s, _ := get(ExportSigningKey, FormatDefault)
				if s != base64.StdEncoding.EncodeToString(v.key) {
					t.Fatal("signing-key")
				}
				s, _ = get(ExportSigningKey, FormatPEM)
				if parsed := parsePEM(t, s, "PRIVATE KEY"); !parsed.(ed25519.PrivateKey).Equal(ed25519.PrivateKey(v.key)) {
					t.Fatal("pem signing-key")
				}
				s, _ = get(ExportPublicKey, FormatDefault)
				if s != base64.StdEncoding.EncodeToString(v.edPub) {
					t.Fatal("public-key")
				}
			case typ.isECDSA():
				s, _ := get(ExportSigningKey, FormatDefault)
				blk, _ := pem.Decode([]byte(s))
				if blk.Type != "EC PRIVATE KEY" || strings.HasSuffix(s, "\n") {
					t.Fatal("EC signing-key should be trimmed SEC 1 PEM")
				}
				ec, err := x509.ParseECPrivateKey(blk.Bytes)
				if err != nil || !ec.Equal(v.ec) {
					t.Fatal("EC signing-key")
				}
				s, _ = get(ExportSigningKey, FormatDER)
				der, _ := base64.StdEncoding.DecodeString(s)
				if p, err := x509.ParsePKCS8PrivateKey(der); err != nil || !p.(*ecdsa.PrivateKey).Equal(v.ec) {
					t.Fatal("EC der signing-key")
				}
				s, _ = get(ExportPublicKey, FormatDefault)
				if !parsePEM(t, s, "PUBLIC KEY").(*ecdsa.PublicKey).Equal(v.ecPub) {
					t.Fatal("EC public-key")
				}
				_, err = get(ExportSigningKey, FormatRaw)
				wantReason(t, err, ReasonInvalidRequest)
			case typ.isRSA():
				s, _ := get(ExportEncryptionKey, FormatDefault)
				blk, _ := pem.Decode([]byte(s))
				if blk.Type != "RSA PRIVATE KEY" || !strings.HasSuffix(s, "\n") {
					t.Fatal("RSA key should be untrimmed PKCS #1 PEM")
				}
				s2, _ := get(ExportSigningKey, FormatDefault)
				if s2 != s {
					t.Fatal("RSA signing-key and encryption-key differ")
				}
				s, _ = get(ExportSigningKey, FormatPEM)
				if !parsePEM(t, s, "PRIVATE KEY").(*rsa.PrivateKey).Equal(v.rsa) {
					t.Fatal("RSA pkcs8")
				}
				s, _ = get(ExportPublicKey, FormatDefault)
				if !parsePEM(t, s, "PUBLIC KEY").(*rsa.PublicKey).Equal(v.rsaPub) || !strings.HasSuffix(s, "\n") {
					t.Fatal("RSA public-key")
				}
			}
		})
	}
	k := newKey(t, e, AES256GCM96, CreateOptions{})
	_, err := e.Export(k, ExportEncryptionKey, 0, FormatDefault)
	wantReason(t, err, ReasonNotExportable)
	ek := rotated(t, e, AES256GCM96, 3, CreateOptions{Exportable: true})
	ek, _, _ = e.Configure(ek, ConfigUpdate{MinDecryptionVersion: ptr(2)})
	all := must[[]ExportedKey](t)(e.Export(ek, ExportEncryptionKey, 0, FormatDefault))
	if len(all) != 2 || all[0].Version != 2 || all[1].Version != 3 {
		t.Fatalf("export of all versions: %d", len(all))
	}
	_, err = e.Export(ek, ExportEncryptionKey, 1, FormatDefault)
	wantReason(t, err, ReasonVersionTooOld)
	if s := must[[]ExportedKey](t)(e.Export(ek, ExportEncryptionKey, 3, FormatDefault)); s[0].Key.String() != "[redacted]" {
		t.Fatal("exported key prints")
	}
}

func parsePEM(t testing.TB, s, typ string) any {
	t.Helper()
	blk, _ := pem.Decode([]byte(s))
	if blk == nil || blk.Type != typ {
		t.Fatalf("not a %s PEM block: %q", typ, s)
	}
	var (
		k   any
		err error
	)
	if typ == "PUBLIC KEY" {
		k, err = x509.ParsePKIXPublicKey(blk.Bytes)
	} else {
		k, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
	}
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestWrappingKey(t *testing.T) {
	w := testWrappingKey(t)
	if !strings.HasPrefix(w.PublicKeyPEM(), "-----BEGIN PUBLIC KEY-----\n") {
		t.Fatal("wrapping key PEM")
	}
	small := rsaTestVersion(t, RSA2048, 1).rsa
	if _, err := NewWrappingKey(small); err == nil {
		t.Fatal("2048-bit wrapping key accepted")
	}
	if s := (&struct{ W *WrappingKey }{w}); strings.Contains(strings.ToLower(fmtAll(s.W)), "d:") {
		t.Fatal("wrapping key prints")
	}
}

func fmtAll(v any) string {
	var b strings.Builder
	for _, f := range []string{"%v", "%+v", "%#v", "%s"} {
		b.WriteString(sprintf(f, v))
	}
	return b.String()
}

// FuzzImportCiphertext feeds import ciphertexts through the whole import
// path (base64, RSA-OAEP under the RSA-4096 wrapping key, AES-KWP, key
// parsing). Seeds are valid wraps of every key type, so mutations past the
// RSA part reach KWP.
func FuzzImportCiphertext(f *testing.F) {
	e := testEngine(f)
	w := testWrappingKey(f)
	for _, typ := range KeyTypes() {
		_, material := targetKey(f, typ)
		raw, _ := base64.StdEncoding.DecodeString(wrapForImport(f, w.PublicKey(), material, sha256.New()))
		f.Add(raw, uint8(typ), uint8(0))
	}
	_, material := targetKey(f, AES256GCM96)
	raw, _ := base64.StdEncoding.DecodeString(wrapForImport(f, w.PublicKey(), material, sha1.New()))
	f.Add(raw, uint8(AES256GCM96), uint8(1))
	hashes := []string{"SHA256", "SHA1", "SHA224", "SHA384", "SHA512", "md5"}
	f.Fuzz(func(t *testing.T, ct []byte, typ, h uint8) {
		o := ImportOptions{Type: KeyType(typ), Ciphertext: base64.StdEncoding.EncodeToString(ct), HashFunction: hashes[int(h)%len(hashes)]}
		k, err := e.ImportKey(ctx, w, "f", o)
		if err != nil {
			if r := ReasonOf(err); r != ReasonImportFailed && r != ReasonInvalidRequest && r != ReasonInvalidConfig {
				t.Fatalf("unexpected reason %v: %v", r, err)
			}
			return
		}
		b, err := MarshalVersion(k.latest())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := UnmarshalVersion(b); err != nil {
			t.Fatalf("an imported version does not survive storage: %v", err)
		}
	})
}

// FuzzImportMaterial fuzzes what is inside the wrapping: the raw or PKCS #8
// key bytes for every key type.
func FuzzImportMaterial(f *testing.F) {
	for _, typ := range KeyTypes() {
		_, material := targetKey(f, typ)
		f.Add(material, uint8(typ))
	}
	_, ed, _ := ed25519.GenerateKey(seededRand(9))
	edDER, _ := x509.MarshalPKCS8PrivateKey(ed)
	f.Add(edDER[:len(edDER)-1], uint8(Ed25519))
	f.Fuzz(func(t *testing.T, material []byte, typ uint8) {
		v, err := versionFromImport(KeyType(typ), 1, testNow, material, false, false, seededRand(1))
		if err != nil {
			return
		}
		b, err := MarshalVersion(v)
		if err != nil {
			t.Fatal(err)
		}
		back, err := UnmarshalVersion(b)
		if err != nil {
			t.Fatalf("imported material does not survive storage: %v", err)
		}
		if back.HasPrivateKey() != v.HasPrivateKey() || back.pubText != v.pubText {
			t.Fatal("storage changed the imported version")
		}
	})
}
