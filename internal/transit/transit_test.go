package transit

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/crypto/chacha20poly1305"
)

var ctx = context.Background()

func TestKeyTypeNamesAndCapabilities(t *testing.T) {
	// What Vault's key read reports as supports_encryption, _decryption,
	// _signing, _derivation (sdk/helper/keysutil/policy.go).
	for _, tc := range []struct {
		name               string
		enc, dec, sig, der bool
	}{
		{"aes128-gcm96", true, true, false, true},
		{"aes256-gcm96", true, true, false, true},
		{"chacha20-poly1305", true, true, false, true},
		{"xchacha20-poly1305", true, true, false, true},
		{"ed25519", false, false, true, true},
		{"ecdsa-p256", false, false, true, false},
		{"ecdsa-p384", false, false, true, false},
		{"ecdsa-p521", false, false, true, false},
		{"rsa-2048", true, true, true, false},
		{"rsa-3072", true, true, true, false},
		{"rsa-4096", true, true, true, false},
		{"hmac", false, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kt, err := ParseKeyType(tc.name)
			if err != nil {
				t.Fatal(err)
			}
			if kt.String() != tc.name {
				t.Fatalf("String() = %q", kt.String())
			}
			c := kt.Capabilities()
			if c.Encryption != tc.enc || c.Decryption != tc.dec || c.Signing != tc.sig || c.Derivation != tc.der || !c.HMAC {
				t.Fatalf("capabilities %+v", c)
			}
			var back KeyType
			txt, _ := kt.MarshalText()
			if err := back.UnmarshalText(txt); err != nil || back != kt {
				t.Fatalf("text round trip: %v %v", back, err)
			}
		})
	}
	if _, err := ParseKeyType("aes512-gcm96"); err == nil {
		t.Fatal("unknown type accepted")
	}
	if len(KeyTypes()) != 12 {
		t.Fatal("KeyTypes")
	}
}

// TestRoundTrip runs every operation each key type supports.
func TestRoundTrip(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: every operation of every key type, RSA up to 4096 bits; run without -short")
	}
	e := testEngine(t)
	msg := []byte("the quick brown fox")
	for _, typ := range KeyTypes() {
		t.Run(typ.String(), func(t *testing.T) {
			k := newKey(t, e, typ, CreateOptions{})
			caps := typ.Capabilities()
			if caps.Encryption {
				for _, pt := range [][]byte{nil, {}, msg, bytes.Repeat([]byte{7}, 4096)} {
					if typ.isRSA() && len(pt) > 100 {
						continue
					}
					r, err := e.Encrypt(ctx, k, pt, EncryptOptions{})
					if err != nil {
						t.Fatal(err)
					}
					if r.KeyVersion != 1 || !strings.HasPrefix(r.Text, "vault:v1:") {
						t.Fatalf("result %+v", r)
					}
					d, err := e.Decrypt(ctx, k, r.Text, DecryptOptions{})
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(d.Plaintext, pt) || d.KeyVersion != 1 {
						t.Fatalf("decrypted %x v%d", d.Plaintext, d.KeyVersion)
					}
					rw, err := e.Rewrap(ctx, k, r.Text, RewrapOptions{})
					if err != nil {
						t.Fatal(err)
					}
					d2 := must[DecryptResult](t)(e.Decrypt(ctx, k, rw.Text, DecryptOptions{}))
					if !bytes.Equal(d2.Plaintext, pt) {
						t.Fatal("rewrap changed the plaintext")
					}
				}
				for _, bits := range []int{0, 128, 256, 512} {
					dk, err := e.DataKey(ctx, k, bits, false, EncryptOptions{})
					if err != nil {
						t.Fatal(err)
					}
					want := bits / 8
					if bits == 0 {
						want = 32
					}
					if dk.Plaintext.Len() != want {
						t.Fatalf("datakey of %d bits has %d bytes", bits, dk.Plaintext.Len())
					}
					d := must[DecryptResult](t)(e.Decrypt(ctx, k, dk.Ciphertext, DecryptOptions{}))
					if !bytes.Equal(d.Plaintext, dk.Plaintext.Reveal()) {
						t.Fatal("datakey ciphertext does not decrypt to its plaintext")
					}
					w, err := e.DataKey(ctx, k, bits, true, EncryptOptions{})
					if err != nil || w.Plaintext.Len() != 0 {
						t.Fatalf("wrapped datakey: %v, plaintext %d bytes", err, w.Plaintext.Len())
					}
				}
			} else {
				_, err := e.Encrypt(ctx, k, msg, EncryptOptions{})
				wantReason(t, err, ReasonUnsupported)
				_, err = e.Decrypt(ctx, k, "vault:v1:AAAA", DecryptOptions{})
				wantReason(t, err, ReasonUnsupported)
				_, err = e.DataKey(ctx, k, 256, false, EncryptOptions{})
				wantReason(t, err, ReasonUnsupported)
			}
			if caps.Signing {
				for _, o := range signOptionsFor(typ) {
					name := fmt.Sprintf("%v/%v/%v/prehashed=%v/salt=%d", o.HashAlgorithm, o.SignatureAlgorithm, o.Marshaling, o.Prehashed, o.SaltLength)
					in := msg
					if o.Prehashed {
						in = o.HashAlgorithm.appendSum(nil, msg)
						if o.HashAlgorithm == HashNone {
							in = SHA2_256.appendSum(nil, msg)
						}
					}
					s, err := e.Sign(ctx, k, in, o)
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					v, err := e.Verify(ctx, k, in, s.Signature, o)
					if err != nil || !v.Valid || v.KeyVersion != 1 {
						t.Fatalf("%s: verify %+v %v", name, v, err)
					}
					altered := bytes.Clone(in)
					altered[0] ^= 1 // the first byte: ECDSA truncates long digests
					v, err = e.Verify(ctx, k, altered, s.Signature, o)
					if err != nil || v.Valid {
						t.Fatalf("%s: altered input verifies: %+v %v", name, v, err)
					}
					if o.Marshaling == MarshalJWS && strings.ContainsAny(s.Signature[len("vault:v1:"):], "+/=") {
						t.Fatalf("%s: jws signature not base64url: %s", name, s.Signature)
					}
				}
			} else {
				_, err := e.Sign(ctx, k, msg, SignOptions{})
				wantReason(t, err, ReasonUnsupported)
				_, err = e.Verify(ctx, k, msg, "vault:v1:AAAA", SignOptions{})
				wantReason(t, err, ReasonUnsupported)
			}
			for h := SHA2_224; h < maxHash; h++ {
				r, err := e.HMAC(k, msg, HMACOptions{Algorithm: h})
				if err != nil {
					t.Fatal(err)
				}
				m := hmac.New(h.newHash(), k.latest().hmacKey)
				m.Write(msg)
				if want := "vault:v1:" + base64.StdEncoding.EncodeToString(m.Sum(nil)); r.Text != want {
					t.Fatalf("%v: hmac %s, want %s", h, r.Text, want)
				}
				v, err := e.VerifyHMAC(k, msg, r.Text, HMACOptions{Algorithm: h})
				if err != nil || !v.Valid {
					t.Fatalf("%v: verify-hmac %+v %v", h, v, err)
				}
				v, err = e.VerifyHMAC(k, []byte("other"), r.Text, HMACOptions{Algorithm: h})
				if err != nil || v.Valid {
					t.Fatalf("%v: verify-hmac of other input %+v %v", h, v, err)
				}
			}
		})
	}
}

func signOptionsFor(typ KeyType) []SignOptions {
	switch {
	case typ == Ed25519:
		return []SignOptions{{}, {Marshaling: MarshalJWS}}
	case typ.isECDSA():
		var out []SignOptions
		for _, h := range []HashAlgorithm{SHA1, SHA2_224, SHA2_256, SHA2_384, SHA2_512, SHA3_224, SHA3_256, SHA3_384, SHA3_512} {
			for _, m := range []Marshaling{MarshalASN1, MarshalJWS} {
				out = append(out, SignOptions{HashAlgorithm: h, Marshaling: m})
			}
		}
		return append(out, SignOptions{HashAlgorithm: SHA2_384, Prehashed: true})
	case typ.isRSA():
		var out []SignOptions
		for _, h := range []HashAlgorithm{SHA1, SHA2_224, SHA2_256, SHA2_384, SHA2_512, SHA3_224, SHA3_256, SHA3_384, SHA3_512} {
			out = append(out,
				SignOptions{HashAlgorithm: h},
				SignOptions{HashAlgorithm: h, SignatureAlgorithm: PKCS1v15},
				SignOptions{HashAlgorithm: h, SaltLength: SaltLengthHash, Marshaling: MarshalJWS})
		}
		return append(out,
			SignOptions{HashAlgorithm: SHA2_256, Prehashed: true},
			SignOptions{HashAlgorithm: SHA2_256, SaltLength: 20},
			SignOptions{HashAlgorithm: HashNone, Prehashed: true, SignatureAlgorithm: PKCS1v15})
	}
	return nil
}

// TestVaultCiphertextFormat builds ciphertexts with the raw AEADs exactly as
// Vault documents its format — "vault:v" + version + ":" + standard base64
// of nonce‖ciphertext‖tag — and decrypts them with the engine, and the other
// way round.
func TestVaultCiphertextFormat(t *testing.T) {
	e := testEngine(t)
	for _, typ := range []KeyType{AES128GCM96, AES256GCM96, ChaCha20Poly1305, XChaCha20Poly1305} {
		t.Run(typ.String(), func(t *testing.T) {
			k := newKey(t, e, typ, CreateOptions{})
			raw := rawAEAD(t, typ, k.latest().key)
			nonce := bytes.Repeat([]byte{0x42}, raw.NonceSize())
			for _, ad := range [][]byte{nil, []byte("associated")} {
				payload := raw.Seal(bytes.Clone(nonce), nonce, []byte("hello vault"), ad)
				text := "vault:v1:" + base64.StdEncoding.EncodeToString(payload)
				d, err := e.Decrypt(ctx, k, text, DecryptOptions{AssociatedData: ad})
				if err != nil || string(d.Plaintext) != "hello vault" {
					t.Fatalf("decrypt of a raw AEAD ciphertext: %q %v", d.Plaintext, err)
				}
				r := must[Result](t)(e.Encrypt(ctx, k, []byte("from keygate"), EncryptOptions{AssociatedData: ad}))
				c := must[Ciphertext](t)(ParseCiphertext(r.Text))
				pt, err := raw.Open(nil, c.Data[:raw.NonceSize()], c.Data[raw.NonceSize():], ad)
				if err != nil || string(pt) != "from keygate" {
					t.Fatalf("raw AEAD cannot open the engine's ciphertext: %v", err)
				}
				if len(c.Data) != raw.NonceSize()+len("from keygate")+raw.Overhead() {
					t.Fatal("payload is not nonce‖ciphertext‖tag")
				}
			}
		})
	}
}

func rawAEAD(t testing.TB, typ KeyType, key []byte) cipher.AEAD {
	t.Helper()
	var (
		a   cipher.AEAD
		err error
	)
	switch typ {
	case AES128GCM96, AES256GCM96:
		b, _ := aes.NewCipher(key)
		a, err = cipher.NewGCM(b)
	case ChaCha20Poly1305:
		a, err = chacha20poly1305.New(key)
	case XChaCha20Poly1305:
		a, err = chacha20poly1305.NewX(key)
	}
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestConvergent checks Vault's convergent version 3 with the raw
// primitives: the encryption key and the nonce key are the two parts of
// HKDF-SHA256(key, salt nil, info context), the nonce is the start of
// HMAC-SHA256(nonce key, plaintext), and the ciphertext is
// nonce‖AEAD-Seal(nonce, plaintext) — so a re-encryption matches a Vault
// ciphertext byte for byte.
func TestConvergent(t *testing.T) {
	e := testEngine(t)
	for _, typ := range []KeyType{AES128GCM96, AES256GCM96, ChaCha20Poly1305, XChaCha20Poly1305} {
		t.Run(typ.String(), func(t *testing.T) {
			k := newKey(t, e, typ, CreateOptions{Derived: true, ConvergentEncryption: true})
			context := []byte("user-42")
			pt := []byte("4111 1111 1111 1111")

			n := typ.symmetricKeySize()
			okm, err := hkdf.Key(sha256.New, k.latest().key, nil, string(context), n+32)
			if err != nil {
				t.Fatal(err)
			}
			raw := rawAEAD(t, typ, okm[:n])
			m := hmac.New(sha256.New, okm[n:])
			m.Write(pt)
			nonce := m.Sum(nil)[:raw.NonceSize()]
			want := "vault:v1:" + base64.StdEncoding.EncodeToString(raw.Seal(bytes.Clone(nonce), nonce, pt, nil))

			r1 := must[Result](t)(e.Encrypt(ctx, k, pt, EncryptOptions{Context: context}))
			r2 := must[Result](t)(e.Encrypt(ctx, k, pt, EncryptOptions{Context: context}))
			if r1.Text != want || r2.Text != want {
				t.Fatalf("convergent ciphertext\n got %s\nwant %s", r1.Text, want)
			}
			d := must[DecryptResult](t)(e.Decrypt(ctx, k, want, DecryptOptions{Context: context}))
			if !bytes.Equal(d.Plaintext, pt) {
				t.Fatal("decrypt")
			}
			other := must[Result](t)(e.Encrypt(ctx, k, pt, EncryptOptions{Context: []byte("user-43")}))
			if other.Text == want {
				t.Fatal("another context gives the same ciphertext")
			}
			// A derived but not convergent key encrypts with the same
			// derived key (the first bytes of the same HKDF stream).
			_, err = e.Encrypt(ctx, k, pt, EncryptOptions{})
			wantReason(t, err, ReasonMissingContext)
			_, err = e.Encrypt(ctx, k, pt, EncryptOptions{Context: context, AssociatedData: []byte("ad")})
			wantReason(t, err, ReasonInvalidRequest)
			rw := must[Result](t)(e.Rewrap(ctx, k, want, RewrapOptions{Context: context}))
			if rw.Text != want {
				t.Fatal("rewrap of a convergent ciphertext under the same version differs")
			}
		})
	}
}

// TestDerived: derived keys need a context, and a ciphertext decrypts only
// with its own context.
func TestDerived(t *testing.T) {
	e := testEngine(t)
	k := newKey(t, e, AES256GCM96, CreateOptions{Derived: true})
	r := must[Result](t)(e.Encrypt(ctx, k, []byte("x"), EncryptOptions{Context: []byte("a")}))
	// The raw derivation: HKDF-SHA256(key, nil, context), 32 bytes.
	dk, _ := hkdf.Key(sha256.New, k.latest().key, nil, "a", 32)
	c := must[Ciphertext](t)(ParseCiphertext(r.Text))
	if pt, err := rawAEAD(t, AES256GCM96, dk).Open(nil, c.Data[:12], c.Data[12:], nil); err != nil || string(pt) != "x" {
		t.Fatal("raw HKDF-derived key does not open the ciphertext")
	}
	_, err := e.Decrypt(ctx, k, r.Text, DecryptOptions{Context: []byte("b")})
	wantReason(t, err, ReasonDecryptionFailed)
	_, err = e.Decrypt(ctx, k, r.Text, DecryptOptions{})
	wantReason(t, err, ReasonMissingContext)

	// ed25519 derived: the signing key is ed25519 from the seed
	// HKDF-SHA256(64-byte private key, nil, context).
	ek := newKey(t, e, Ed25519, CreateOptions{Derived: true})
	s := must[SignResult](t)(e.Sign(ctx, ek, []byte("m"), SignOptions{Context: []byte("c1")}))
	seed, _ := hkdf.Key(sha256.New, ek.latest().key, nil, "c1", 32)
	pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
	if !bytes.Equal(s.PublicKey, pub) {
		t.Fatal("derived ed25519 public key")
	}
	sig, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(s.Signature, "vault:v1:"))
	if !ed25519.Verify(pub, []byte("m"), sig) {
		t.Fatal("derived ed25519 signature does not verify with the raw key")
	}
	if v, err := e.Verify(ctx, ek, []byte("m"), s.Signature, SignOptions{Context: []byte("c2")}); err != nil || v.Valid {
		t.Fatal("signature verifies under another context")
	}
	_, err = e.Sign(ctx, ek, []byte("m"), SignOptions{})
	wantReason(t, err, ReasonMissingContext)
	d := must[Description](t)(e.Describe(ek, []byte("c1")))
	if d.Versions[0].PublicKey != base64.StdEncoding.EncodeToString(pub) {
		t.Fatal("Describe with a context shows another public key")
	}
	if d := must[Description](t)(e.Describe(ek, nil)); d.Versions[0].PublicKey != "" {
		t.Fatal("Describe without a context shows a public key for a derived key")
	}
}

func TestDerivedCacheBounded(t *testing.T) {
	e := New(Options{Rand: seededRand(2), DerivedCacheEntries: 64})
	k := newKey(t, e, AES256GCM96, CreateOptions{Derived: true})
	for i := range 2000 {
		c := []byte(fmt.Sprintf("ctx-%d", i))
		r := must[Result](t)(e.Encrypt(ctx, k, []byte("p"), EncryptOptions{Context: c}))
		if i%97 == 0 {
			must[DecryptResult](t)(e.Decrypt(ctx, k, r.Text, DecryptOptions{Context: c}))
		}
	}
	if n := e.derived.len(); n > 64 || n == 0 {
		t.Fatalf("cache holds %d entries, bound 64", n)
	}
	long := bytes.Repeat([]byte{1}, MaxCachedContextBytes+1)
	before := e.derived.len()
	r := must[Result](t)(e.Encrypt(ctx, k, []byte("p"), EncryptOptions{Context: long}))
	must[DecryptResult](t)(e.Decrypt(ctx, k, r.Text, DecryptOptions{Context: long}))
	if e.derived.len() > before {
		t.Fatal("a long context was cached")
	}
	_, err := e.Encrypt(ctx, k, []byte("p"), EncryptOptions{Context: make([]byte, MaxContextBytes+1)})
	wantReason(t, err, ReasonTooLarge)
}

// Vault's HMAC test values (internal/builtin/logical/transit/path_hmac_test.go
// in OpenBao, made with openssl): key "01234567890123456789012345678901",
// input "the quick brown fox".
func TestVaultHMACValues(t *testing.T) {
	e := testEngine(t)
	v := &Version{num: 1, typ: HMAC, created: testNow, key: []byte("01234567890123456789012345678901")}
	if err := v.finish(); err != nil {
		t.Fatal(err)
	}
	k := must[*Key](t)(LoadKey(Config{Name: "h", Type: HMAC, LatestVersion: 1, MinDecryptionVersion: 1, KeySize: 32}, v))
	for _, tc := range []struct {
		alg  HashAlgorithm
		want string
	}{
		{SHA2_256, "vault:v1:UcBvm5VskkukzZHlPgm3p5P/Yr/PV6xpuOGZISya3A4="},
		{SHA2_224, "vault:v1:3p+ZWVquYDvu2dSTCa65Y3fgoMfIAc6fNaBbtg=="},
		{SHA2_384, "vault:v1:jDB9YXdPjpmr29b1JCIEJO93IydlKVfD9mA2EO9OmJtJQg3QAV5tcRRRb7IQGW9p"},
		{SHA2_512, "vault:v1:PSXLXvkvKF4CpU65e2bK1tGBZQpcpCEM32fq2iUoiTyQQCfBcGJJItQ+60tMwWXAPQrC290AzTrNJucGrr4GFA=="},
		{SHA3_224, "vault:v1:TGipmKH8LR/BkMolYpDYy0BJCIhTtGPDhV2VkQ=="},
		{SHA3_256, "vault:v1:+px9V/7QYLfdK808zPESC2T/L33uFf4Blzsn9Jy838o="},
		{SHA3_384, "vault:v1:YGoRwN4UdTRYZeOER86jsQOB8piWenzLDzJ2wJQK/Jq59rAsY8lh7SCdqqCyFg70"},
		{SHA3_512, "vault:v1:GrNA8sU88naMPEQ7UZGj9EJl7YJhl03AFHfxcEURFrtvnobdea9ZlZHePpxAx/oCaC7R2HkrAO+Tu3uXPIl3lg=="},
	} {
		t.Run(tc.alg.String(), func(t *testing.T) {
			r := must[Result](t)(e.HMAC(k, []byte("the quick brown fox"), HMACOptions{Algorithm: tc.alg}))
			if r.Text != tc.want {
				t.Fatalf("got %s, want %s", r.Text, tc.want)
			}
			v := must[VerifyResult](t)(e.VerifyHMAC(k, []byte("the quick brown fox"), tc.want, HMACOptions{Algorithm: tc.alg}))
			if !v.Valid {
				t.Fatal("Vault's HMAC does not verify")
			}
		})
	}
	// A one-bit change, from the same test file.
	if v := must[VerifyResult](t)(e.VerifyHMAC(k, []byte("the quick brown fox"), "vault:v1:UcBvm4VskkukzZHlPgm3p5P/Yr/PV6xpuOGZISya3A4=", HMACOptions{})); v.Valid {
		t.Fatal("altered HMAC verifies")
	}
	_, err := e.HMAC(k, []byte("x"), HMACOptions{Algorithm: SHA1})
	wantReason(t, err, ReasonInvalidRequest)
	_, err = e.HMAC(k, []byte("x"), HMACOptions{Algorithm: HashNone})
	wantReason(t, err, ReasonInvalidRequest)
}

// TestSignaturesAgainstRawPrimitives checks the signature bytes inside the
// text with Go's primitives directly: DER for asn1, r‖s for jws, PSS and
// PKCS #1 v1.5 over the hash Vault names.
func TestSignaturesAgainstRawPrimitives(t *testing.T) {
	e := testEngine(t)
	msg := []byte("sign me")
	t.Run("ecdsa-p384", func(t *testing.T) {
		k := newKey(t, e, ECDSAP384, CreateOptions{})
		pub := k.latest().ecPub
		digest := SHA2_512.appendSum(nil, msg)
		s := must[SignResult](t)(e.Sign(ctx, k, msg, SignOptions{HashAlgorithm: SHA2_512}))
		der, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(s.Signature, "vault:v1:"))
		if !ecdsa.VerifyASN1(pub, digest, der) {
			t.Fatal("asn1 signature")
		}
		s = must[SignResult](t)(e.Sign(ctx, k, msg, SignOptions{HashAlgorithm: SHA2_512, Marshaling: MarshalJWS}))
		p1363, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(s.Signature, "vault:v1:"))
		if err != nil || len(p1363) != 96 {
			t.Fatalf("jws signature of %d bytes: %v", len(p1363), err)
		}
		// A jws signature of the wrong length never verifies.
		short := "vault:v1:" + base64.RawURLEncoding.EncodeToString(p1363[1:])
		if v, err := e.Verify(ctx, k, msg, short, SignOptions{HashAlgorithm: SHA2_512, Marshaling: MarshalJWS}); err != nil || v.Valid {
			t.Fatal("short jws signature")
		}
	})
	t.Run("rsa-2048", func(t *testing.T) {
		k := newKey(t, e, RSA2048, CreateOptions{})
		pub := k.latest().rsaPub
		digest := SHA2_256.appendSum(nil, msg)
		s := must[SignResult](t)(e.Sign(ctx, k, msg, SignOptions{}))
		sig, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(s.Signature, "vault:v1:"))
		// Vault signs PSS with salt length auto: as long as the key allows.
		if err := rsa.VerifyPSS(pub, 5, digest, sig, &rsa.PSSOptions{SaltLength: 256 - 2 - 32}); err != nil {
			t.Fatalf("pss auto salt: %v", err)
		}
		s = must[SignResult](t)(e.Sign(ctx, k, msg, SignOptions{SignatureAlgorithm: PKCS1v15}))
		sig, _ = base64.StdEncoding.DecodeString(strings.TrimPrefix(s.Signature, "vault:v1:"))
		if err := rsa.VerifyPKCS1v15(pub, 5, digest, sig); err != nil {
			t.Fatal(err)
		}
		_, err := e.Sign(ctx, k, msg, SignOptions{SaltLength: 223})
		wantReason(t, err, ReasonInvalidRequest)
		_, err = e.Sign(ctx, k, msg, SignOptions{HashAlgorithm: HashNone})
		wantReason(t, err, ReasonInvalidRequest)
		_, err = e.Sign(ctx, k, []byte("not a digest"), SignOptions{Prehashed: true})
		wantReason(t, err, ReasonInvalidRequest)
	})
	t.Run("public key text", func(t *testing.T) {
		k := newKey(t, e, ECDSAP256, CreateOptions{})
		blk, _ := pem.Decode([]byte(k.latest().pubText))
		pk, err := x509.ParsePKIXPublicKey(blk.Bytes)
		if err != nil || !pk.(*ecdsa.PublicKey).Equal(k.latest().ecPub) {
			t.Fatal("ECDSA public key PEM")
		}
	})
}
