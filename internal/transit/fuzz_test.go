package transit

// Native fuzz targets for everything that parses bytes from outside:
// ciphertext texts (text_test.go), stored versions and configurations, and
// import ciphertexts and the key material inside them. Each checks a
// property beyond "never panics": what is accepted re-encodes to the same
// bytes (versions) or the same value (configurations), and imported
// material yields a version that survives storage.
//
//	go test -run='^$' -fuzz='^FuzzUnmarshalVersion$' -fuzztime=30s ./internal/transit

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"testing"
	"time"
)

func FuzzUnmarshalVersion(f *testing.F) {
	e := testEngine(f)
	for _, typ := range KeyTypes() {
		k := newKey(f, e, typ, CreateOptions{})
		f.Add(must[[]byte](f)(MarshalVersion(k.latest())))
	}
	pub := publicOnlyVersion(f)
	f.Add(must[[]byte](f)(MarshalVersion(pub)))
	f.Add([]byte("KGTV"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := UnmarshalVersion(b)
		if err != nil {
			if ReasonOf(err) != ReasonCorrupt {
				t.Fatalf("error %v is not corrupt", err)
			}
			return
		}
		again, err := MarshalVersion(v)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("accepted bytes re-encode differently: %v", err)
		}
		cfg := Config{Name: "f", Type: v.typ, LatestVersion: v.num, MinDecryptionVersion: v.num}
		if v.typ == HMAC {
			cfg.KeySize = len(v.key)
		}
		k, err := LoadKey(cfg, v)
		if err != nil {
			t.Fatalf("an accepted version does not load: %v", err)
		}
		if _, err := e.HMAC(k, []byte("m"), HMACOptions{}); err != nil {
			t.Fatalf("an accepted version cannot HMAC: %v", err)
		}
	})
}

func publicOnlyVersion(t testing.TB) *Version {
	priv, _ := ecdsa.GenerateKey(elliptic.P384(), seededRand(8))
	v := &Version{num: 2, typ: ECDSAP384, created: testNow, hmacKey: make([]byte, 32), ecPub: &priv.PublicKey}
	if err := v.finish(); err != nil {
		t.Fatal(err)
	}
	return v
}

func FuzzUnmarshalConfig(f *testing.F) {
	e := testEngine(f)
	for _, o := range []CreateOptions{
		{}, {Type: HMAC, KeySize: 64}, {Type: XChaCha20Poly1305, Derived: true, ConvergentEncryption: true},
		{Type: Ed25519, Derived: true, Exportable: true, AllowPlaintextBackup: true, AutoRotatePeriod: 24 * time.Hour},
	} {
		k := rotated(f, e, o.Type, 3, o)
		f.Add(must[[]byte](f)(MarshalConfig(k.Config())))
		k, _, _ = e.Configure(k, ConfigUpdate{MinDecryptionVersion: ptr(2), MinEncryptionVersion: ptr(3)})
		k = must[*Key](f)(e.Trim(k, 2))
		f.Add(must[[]byte](f)(MarshalConfig(k.Config())))
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"format":1,"format":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := UnmarshalConfig(b)
		if err != nil {
			if ReasonOf(err) != ReasonCorrupt {
				t.Fatalf("error %v is not corrupt", err)
			}
			return
		}
		again, err := MarshalConfig(c)
		if err != nil {
			t.Fatalf("an accepted configuration does not marshal: %v", err)
		}
		c2, err := UnmarshalConfig(again)
		if err != nil || c2 != c {
			t.Fatalf("round trip changed the configuration: %v", err)
		}
	})
}
