package transit

import (
	"encoding/base64"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func TestDecryptBadInput(t *testing.T) {
	e := testEngine(t)
	k := rotated(t, e, AES256GCM96, 2, CreateOptions{})
	k, _, _ = e.Configure(k, ConfigUpdate{MinDecryptionVersion: ptr(2)})
	other := newKey(t, e, AES256GCM96, CreateOptions{})
	conv := newKey(t, e, AES256GCM96, CreateOptions{Derived: true, ConvergentEncryption: true})
	rsaKey := newKey(t, e, RSA2048, CreateOptions{})
	good := must[Result](t)(e.Encrypt(ctx, k, []byte("secret"), EncryptOptions{AssociatedData: []byte("ad")})).Text
	payload := strings.TrimPrefix(good, "vault:v2:")
	raw, _ := base64.StdEncoding.DecodeString(payload)
	alter := func(i int) string {
		b := append([]byte(nil), raw...)
		b[i] ^= 0x10
		return "vault:v2:" + base64.StdEncoding.EncodeToString(b)
	}
	convCT := must[Result](t)(e.Encrypt(ctx, conv, []byte("p"), EncryptOptions{Context: []byte("c")})).Text
	for _, tc := range []struct {
		name   string
		k      *Key
		text   string
		o      DecryptOptions
		reason Reason
	}{
		{"invalid base64", k, "vault:v2:" + payload[:10] + "*" + payload[11:], DecryptOptions{AssociatedData: []byte("ad")}, ReasonMalformed},
		{"no prefix", k, payload, DecryptOptions{}, ReasonMalformed},
		{"v0", k, "vault:v0:" + payload, DecryptOptions{}, ReasonMalformed},
		{"v-1", k, "vault:v-1:" + payload, DecryptOptions{}, ReasonMalformed},
		{"huge version", k, "vault:v99999999999:" + payload, DecryptOptions{}, ReasonMalformed},
		{"newer version", k, "vault:v3:" + payload, DecryptOptions{}, ReasonUnknownVersion},
		{"below min_decryption_version", k, "vault:v1:" + payload, DecryptOptions{}, ReasonVersionTooOld},
		{"ciphertext of another key", other, strings.Replace(good, "v2", "v1", 1), DecryptOptions{AssociatedData: []byte("ad")}, ReasonDecryptionFailed},
		{"truncated to the nonce", k, "vault:v2:" + base64.StdEncoding.EncodeToString(raw[:12]), DecryptOptions{}, ReasonMalformed},
		{"truncated by one byte", k, "vault:v2:" + base64.StdEncoding.EncodeToString(raw[:len(raw)-1]), DecryptOptions{AssociatedData: []byte("ad")}, ReasonDecryptionFailed},
		{"truncated base64", k, good[:len(good)-2], DecryptOptions{AssociatedData: []byte("ad")}, ReasonMalformed},
		{"altered nonce", k, alter(0), DecryptOptions{AssociatedData: []byte("ad")}, ReasonDecryptionFailed},
		{"altered ciphertext", k, alter(13), DecryptOptions{AssociatedData: []byte("ad")}, ReasonDecryptionFailed},
		{"altered tag", k, alter(len(raw) - 1), DecryptOptions{AssociatedData: []byte("ad")}, ReasonDecryptionFailed},
		{"wrong associated data", k, good, DecryptOptions{AssociatedData: []byte("AD")}, ReasonDecryptionFailed},
		{"missing associated data", k, good, DecryptOptions{}, ReasonDecryptionFailed},
		{"convergent without context", conv, convCT, DecryptOptions{}, ReasonMissingContext},
		{"convergent with another context", conv, convCT, DecryptOptions{Context: []byte("d")}, ReasonDecryptionFailed},
		{"associated data for RSA", rsaKey, good, DecryptOptions{AssociatedData: []byte("ad")}, ReasonUnsupported},
		{"RSA garbage", rsaKey, "vault:v1:" + base64.StdEncoding.EncodeToString(make([]byte, 256)), DecryptOptions{}, ReasonDecryptionFailed},
		{"context too long", k, good, DecryptOptions{Context: make([]byte, MaxContextBytes+1)}, ReasonTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.Decrypt(ctx, tc.k, tc.text, tc.o)
			wantReason(t, err, tc.reason)
			// The byte-slice path gives the same answer and leaves dst.
			dst := []byte("keep")
			out, _, err := e.AppendDecrypt(ctx, dst, tc.k, []byte(tc.text), tc.o)
			wantReason(t, err, tc.reason)
			if string(out) != "keep" {
				t.Fatalf("dst changed to %q", out)
			}
		})
	}
}

func TestEncryptBadInput(t *testing.T) {
	e := testEngine(t)
	k := newKey(t, e, AES256GCM96, CreateOptions{})
	rsaKey := newKey(t, e, RSA2048, CreateOptions{})
	for _, tc := range []struct {
		name   string
		k      *Key
		pt     []byte
		o      EncryptOptions
		reason Reason
	}{
		{"plaintext too large", k, make([]byte, MaxInputBytes+1), EncryptOptions{}, ReasonTooLarge},
		{"associated data for RSA", rsaKey, []byte("x"), EncryptOptions{AssociatedData: []byte("a")}, ReasonUnsupported},
		{"RSA plaintext over OAEP's limit", rsaKey, make([]byte, 256), EncryptOptions{}, ReasonInvalidRequest},
		{"negative version", k, nil, EncryptOptions{KeyVersion: -1}, ReasonInvalidRequest},
		{"version not there yet", k, nil, EncryptOptions{KeyVersion: 2}, ReasonUnknownVersion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.Encrypt(ctx, tc.k, tc.pt, tc.o)
			wantReason(t, err, tc.reason)
		})
	}
	_, err := e.DataKey(ctx, k, 192, false, EncryptOptions{})
	wantReason(t, err, ReasonInvalidRequest)
	_, err = e.Random(0)
	wantReason(t, err, ReasonInvalidRequest)
	_, err = e.Random(MaxRandomBytes + 1)
	wantReason(t, err, ReasonInvalidRequest)
	if b, err := e.Random(MaxRandomBytes); err != nil || len(b) != MaxRandomBytes {
		t.Fatal("Random(MaxRandomBytes)")
	}
	_, err = Hash(SHA1, nil)
	wantReason(t, err, ReasonInvalidRequest)
}

func TestVerifyBadInput(t *testing.T) {
	e := testEngine(t)
	k := newKey(t, e, ECDSAP256, CreateOptions{})
	sig := must[SignResult](t)(e.Sign(ctx, k, []byte("m"), SignOptions{})).Signature
	// DER in standard base64 is malformed as JWS text only where it uses
	// '+', '/' or '=' (a 72-byte signature without them decodes as
	// base64url, to the wrong length: not valid, but not malformed): sign
	// until it does, as about 99 signatures in 100 do.
	asn1 := sig
	for i := 0; !strings.ContainsAny(strings.TrimPrefix(asn1, "vault:v1:"), "+/="); i++ {
		if i == 100 {
			t.Fatal("100 signatures in a row use only base64url's alphabet")
		}
		asn1 = must[SignResult](t)(e.Sign(ctx, k, []byte("m"), SignOptions{})).Signature
	}
	for _, tc := range []struct {
		name   string
		sig    string
		o      SignOptions
		reason Reason
	}{
		{"no prefix", "MEUC", SignOptions{}, ReasonMalformed},
		{"newer version", strings.Replace(sig, "v1", "v2", 1), SignOptions{}, ReasonUnknownVersion},
		{"asn1 text read as jws", asn1, SignOptions{Marshaling: MarshalJWS}, ReasonMalformed},
		{"bad hash", sig, SignOptions{HashAlgorithm: maxHash}, ReasonInvalidRequest},
		{"none without pkcs1v15", sig, SignOptions{HashAlgorithm: HashNone, Prehashed: true}, ReasonInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.Verify(ctx, k, []byte("m"), tc.sig, tc.o)
			wantReason(t, err, tc.reason)
		})
	}
	// A valid DER signature with trailing bytes is refused (strict DER).
	der, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(sig, "vault:v1:"))
	padded := "vault:v1:" + base64.StdEncoding.EncodeToString(append(der, 0))
	if v, err := e.Verify(ctx, k, []byte("m"), padded, SignOptions{}); err != nil || v.Valid {
		t.Fatal("DER with trailing data verifies")
	}
}

// TestConcurrentRotateEncryptDecrypt swaps snapshots while other goroutines
// encrypt and decrypt (run with -race). A ciphertext of a version newer than
// a reader's snapshot is retried once with the current snapshot.
func TestConcurrentRotateEncryptDecrypt(t *testing.T) {
	e := New(Options{Rand: seededRand(6)})
	var cur atomic.Pointer[Key]
	cur.Store(newKey(t, e, ChaCha20Poly1305, CreateOptions{Derived: true}))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var retries atomic.Int64
	errs := make(chan error, 16)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := []byte{byte(w)}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				// Decrypt with a snapshot taken before the one that
				// encrypts, which may be older.
				old := cur.Load()
				if i%2 == 0 {
					old = must[*Key](t)(LoadKey(old.Config(), old.Versions()...))
				}
				r, err := e.Encrypt(ctx, cur.Load(), []byte("payload"), EncryptOptions{Context: c})
				if err != nil {
					errs <- err
					return
				}
				d, err := e.Decrypt(ctx, old, r.Text, DecryptOptions{Context: c})
				if ReasonOf(err) == ReasonUnknownVersion {
					retries.Add(1)
					d, err = e.Decrypt(ctx, cur.Load(), r.Text, DecryptOptions{Context: c})
				}
				if err != nil || string(d.Plaintext) != "payload" {
					errs <- err
					return
				}
			}
		}()
	}
	for range 200 {
		nk, err := e.Rotate(ctx, cur.Load(), Caller{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Store(nk)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if cur.Load().LatestVersion() != 201 {
		t.Fatal("rotations lost")
	}
	t.Logf("%d decryptions met a newer version and were retried", retries.Load())
}
