package jose

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"strings"
	"sync"
	"testing"
)

// The RSA keys of these tests were made once and kept (Go's rsa.GenerateKey
// ignores its reader, so it cannot make them again deterministically):
// 2048, 3072 and 4096 bits with
//
//	openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:$bits -out testdata/rsa/rsa-$bits.pem
//
// and 2049 bits, which openssl rounds down, with rsa.GenerateKey(rand.Reader,
// 2049) and x509.MarshalPKCS8PrivateKey. 2049 bits is the size where PSS's
// encoding (emBits = modBits-1 = 2048) is one octet shorter than the modulus.
var testRSABits = []int{2048, 2049, 3072, 4096}

var (
	testRSAKeysOnce sync.Once
	testRSAKeys     map[int]*rsa.PrivateKey
	testRSAKeysErr  error
)

func testRSAKey(t testing.TB, bits int) *rsa.PrivateKey {
	t.Helper()
	testRSAKeysOnce.Do(func() {
		testRSAKeys = map[int]*rsa.PrivateKey{}
		for _, b := range testRSABits {
			k, err := readTestRSAKey(fmt.Sprintf("testdata/rsa/rsa-%d.pem", b))
			if err == nil && k.N.BitLen() != b {
				err = fmt.Errorf("rsa-%d.pem holds a %d-bit key", b, k.N.BitLen())
			}
			if err != nil {
				testRSAKeysErr = err
				return
			}
			testRSAKeys[b] = k
		}
	})
	if testRSAKeysErr != nil {
		t.Fatal(testRSAKeysErr)
	}
	return testRSAKeys[bits]
}

func readTestRSAKey(path string) (*rsa.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, fmt.Errorf("%s: no PEM block", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: %T, not RSA", path, k)
	}
	return rk, nil
}

// rsaScheme is one way of verifying: a padding, a hash (0: PKCS #1 v1.5 over
// the message itself, as transit's "none"), and for PSS the salt length
// option. digest hashes msg the way the scheme's caller does.
type rsaScheme struct {
	name string
	pss  bool
	hash crypto.Hash
	salt int // rsa.PSSOptions.SaltLength
}

// rsaSchemes are those of JWS (RS*, PS* with the salt as long as the hash)
// and those transit offers besides (other hashes, no hash, PSS salt lengths
// "auto" and explicit).
var rsaSchemes = []rsaScheme{
	{"RS256", false, crypto.SHA256, 0},
	{"RS384", false, crypto.SHA384, 0},
	{"RS512", false, crypto.SHA512, 0},
	{"PS256", true, crypto.SHA256, rsa.PSSSaltLengthEqualsHash},
	{"PS384", true, crypto.SHA384, rsa.PSSSaltLengthEqualsHash},
	{"PS512", true, crypto.SHA512, rsa.PSSSaltLengthEqualsHash},
	{"PKCS1v15-none", false, 0, 0},
	{"PKCS1v15-SHA1", false, crypto.SHA1, 0},
	{"PKCS1v15-SHA224", false, crypto.SHA224, 0},
	{"PKCS1v15-SHA3-256", false, crypto.SHA3_256, 0},
	{"PSS-SHA256-auto", true, crypto.SHA256, rsa.PSSSaltLengthAuto},
	{"PSS-SHA256-salt0", true, crypto.SHA256, 0},
	{"PSS-SHA256-salt20", true, crypto.SHA256, 20},
	{"PSS-SHA1-hash", true, crypto.SHA1, rsa.PSSSaltLengthEqualsHash},
	{"PSS-SHA3-512-auto", true, crypto.SHA3_512, rsa.PSSSaltLengthAuto},
	{"PSS-SHA512-negative", true, crypto.SHA512, -7},
}

// jwsAlg is the jose algorithm the scheme is, or 0.
func (s rsaScheme) jwsAlg() Alg {
	a, err := ParseAlg(s.name)
	if err != nil {
		return 0
	}
	return a
}

func (s rsaScheme) digest(msg []byte) []byte {
	if s.hash == 0 {
		return msg
	}
	h := s.hash.New()
	h.Write(msg)
	return h.Sum(nil)
}

func (s rsaScheme) opts() *rsa.PSSOptions { return &rsa.PSSOptions{SaltLength: s.salt, Hash: s.hash} }

func (s rsaScheme) sign(t testing.TB, priv *rsa.PrivateKey, msg []byte) []byte {
	t.Helper()
	var sig []byte
	var err error
	if s.pss {
		o := s.opts()
		if o.SaltLength < rsa.PSSSaltLengthEqualsHash {
			o.SaltLength = s.hash.Size() // a negative length verifies nothing; sign with some salt
		}
		sig, err = rsa.SignPSS(rand.Reader, priv, s.hash, s.digest(msg), o)
	} else {
		sig, err = rsa.SignPKCS1v15(nil, priv, s.hash, s.digest(msg))
	}
	if err != nil {
		t.Fatalf("%s: signing: %v", s.name, err)
	}
	return sig
}

// ours verifies with v; theirs with crypto/rsa.
func (s rsaScheme) ours(v *RSAVerifier, msg, sig []byte) error {
	if s.pss {
		return v.VerifyPSS(s.hash, s.digest(msg), sig, s.opts())
	}
	return v.VerifyPKCS1v15(s.hash, s.digest(msg), sig)
}

func (s rsaScheme) theirs(pub *rsa.PublicKey, msg, sig []byte) error {
	if s.pss {
		return rsa.VerifyPSS(pub, s.hash, s.digest(msg), sig, s.opts())
	}
	return rsa.VerifyPKCS1v15(pub, s.hash, s.digest(msg), sig)
}

// agree verifies (msg, sig) with v, with crypto/rsa and, for a JWS
// algorithm, through a jose Key, and fails unless all three give the same
// verdict. It returns RSAVerifier's error.
func (s rsaScheme) agree(t testing.TB, what string, v *RSAVerifier, pub *rsa.PublicKey, msg, sig []byte) error {
	t.Helper()
	ours, theirs := s.ours(v, msg, sig), s.theirs(pub, msg, sig)
	if (ours == nil) != (theirs == nil) {
		t.Fatalf("%s %d-bit %s: RSAVerifier says %v, crypto/rsa says %v", what, pub.N.BitLen(), s.name, ours, theirs)
	}
	if alg := s.jwsAlg(); alg != 0 {
		k, err := cachedKey(alg, pub)
		if err == nil {
			if ok := k.verify(msg, sig); ok != (theirs == nil) {
				t.Fatalf("%s %d-bit %s: Key.verify says %v, crypto/rsa says %v", what, pub.N.BitLen(), s.name, ok, theirs)
			}
		}
	}
	return ours
}

var (
	keyCacheMu sync.Mutex
	keyCache   = map[string]*Key{}
)

// cachedKey is NewKey(alg, "", pub), made once per key and algorithm so that
// the fuzz target does not spend its time preparing keys.
func cachedKey(alg Alg, pub *rsa.PublicKey) (*Key, error) {
	id := fmt.Sprintf("%v %d %x", alg, pub.E, pub.N)
	keyCacheMu.Lock()
	defer keyCacheMu.Unlock()
	if k, ok := keyCache[id]; ok {
		return k, nil
	}
	k, err := NewKey(alg, "", pub)
	if err == nil {
		keyCache[id] = k
	}
	return k, err
}

// rawSign returns em^d mod n as a k-byte signature: the "signature" whose
// recovered encoding is em, so that tests reach every padding check with
// encodings no signer would make. ok is false if em is not below n.
func rawSign(priv *rsa.PrivateKey, em []byte) (sig []byte, ok bool) {
	k := priv.Size()
	c := new(big.Int).SetBytes(em)
	if c.Cmp(priv.N) >= 0 {
		return nil, false
	}
	pc := priv.Precomputed
	if len(priv.Primes) != 2 || pc.Dp == nil {
		return new(big.Int).Exp(c, priv.D, priv.N).FillBytes(make([]byte, k)), true
	}
	// CRT, as the keys here are two-prime: four times faster than c^d mod n.
	p, q := priv.Primes[0], priv.Primes[1]
	m1 := new(big.Int).Exp(c, pc.Dp, p)
	m2 := new(big.Int).Exp(c, pc.Dq, q)
	h := m1.Sub(m1, m2)
	h.Mul(h, pc.Qinv).Mod(h, p)
	m := h.Mul(h, q).Add(h, m2)
	return m.FillBytes(make([]byte, k)), true
}

// recover returns sig^e mod n as k bytes (the encoding a signature carries).
func recoverEM(pub *rsa.PublicKey, sig []byte) []byte {
	s := new(big.Int).SetBytes(sig)
	return s.Exp(s, big.NewInt(int64(pub.E)), pub.N).FillBytes(make([]byte, pub.Size()))
}

// TestRSAVerifierAgreesWithCryptoRSA signs with every test key and scheme and
// checks that RSAVerifier, crypto/rsa and jose's Key accept the signature, and
// refuse it alike once it or the message is changed, or the signature is out
// of range.
func TestRSAVerifierAgreesWithCryptoRSA(t *testing.T) {
	msg := []byte("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ0ZXN0In0")
	for _, bits := range testRSABits {
		priv := testRSAKey(t, bits)
		pub := &priv.PublicKey
		v := NewRSAVerifier(pub)
		if v.n == nil {
			t.Fatalf("%d-bit key: not on the prepared path", bits)
		}
		k := pub.Size()
		nBytes := pub.N.FillBytes(make([]byte, k))
		nPlus := new(big.Int).Add(pub.N, big.NewInt(1)).FillBytes(make([]byte, k))
		nMinus := new(big.Int).Sub(pub.N, big.NewInt(1)).FillBytes(make([]byte, k))
		for _, s := range rsaSchemes {
			t.Run(fmt.Sprintf("%d/%s", bits, s.name), func(t *testing.T) {
				sig := s.sign(t, priv, msg)
				valid := s.salt >= rsa.PSSSaltLengthEqualsHash || !s.pss
				if err := s.agree(t, "valid signature", v, pub, msg, sig); (err == nil) != valid {
					t.Fatalf("valid signature: %v", err)
				}
				flip := func(b []byte, i int) []byte { c := bytes.Clone(b); c[i] ^= 1; return c }
				bad := []struct {
					what     string
					msg, sig []byte
				}{
					{"last bit flipped", msg, flip(sig, k-1)},
					{"first byte changed", msg, flip(sig, 0)},
					{"message changed", flip(msg, 3), sig},
					{"one byte short", msg, sig[1:]},
					{"one byte short (last dropped)", msg, sig[:k-1]},
					{"leading zero added", msg, append([]byte{0}, sig...)},
					{"empty", msg, nil},
					{"zero", msg, make([]byte, k)},
					{"one", msg, append(make([]byte, k-1), 1)},
					{"n-1", msg, nMinus},
					{"n", msg, nBytes},
					{"n+1", msg, nPlus},
					{"all ones", msg, bytes.Repeat([]byte{0xff}, k)},
				}
				if s.hash == 0 {
					// The message is the "digest"; one as long as the
					// modulus can never fit.
					bad = append(bad, struct {
						what     string
						msg, sig []byte
					}{"message as long as the modulus", make([]byte, k), sig})
				}
				for _, c := range bad {
					if err := s.agree(t, c.what, v, pub, c.msg, c.sig); err == nil {
						t.Errorf("%s: accepted", c.what)
					}
				}
			})
		}
	}
}

// TestRSAVerifierLeadingZero: a signature whose value is shorter than the
// modulus still has the modulus's length, with leading zero octets, and
// verifies; without them it is refused.
func TestRSAVerifierLeadingZero(t *testing.T) {
	for _, bits := range []int{2048, 2049} {
		priv := testRSAKey(t, bits)
		pub := &priv.PublicKey
		v := NewRSAVerifier(pub)
		s := rsaSchemes[0]
		found := false
		for i := 0; i < 4096 && !found; i++ {
			msg := []byte(fmt.Sprintf("message %d", i))
			sig := s.sign(t, priv, msg)
			if sig[0] != 0 {
				continue
			}
			found = true
			if err := s.agree(t, "leading zero", v, pub, msg, sig); err != nil {
				t.Errorf("%d-bit: signature with a leading zero octet refused: %v", bits, err)
			}
			if err := s.agree(t, "leading zero dropped", v, pub, msg, sig[1:]); err == nil {
				t.Errorf("%d-bit: signature one octet short accepted", bits)
			}
		}
		if !found {
			t.Fatalf("%d-bit: no signature with a leading zero in 4096 messages", bits)
		}
	}
}

// TestRSAVerifierEncodings builds encodings by hand (the signature is then
// made with the raw private operation) and checks each padding rule, RSAVerifier
// against crypto/rsa.
func TestRSAVerifierEncodings(t *testing.T) {
	msg := []byte("payload")
	for _, bits := range testRSABits {
		priv := testRSAKey(t, bits)
		pub := &priv.PublicKey
		v := NewRSAVerifier(pub)
		k := pub.Size()
		d := sha256.Sum256(msg)
		pkcs := func() []byte { // the correct RS256 encoding
			em := bytes.Repeat([]byte{0xff}, k)
			em[0], em[1] = 0, 1
			t := append(bytes.Clone(digestInfoPrefixes[crypto.SHA256]), d[:]...)
			em[k-len(t)-1] = 0
			copy(em[k-len(t):], t)
			return em
		}
		type edit struct {
			what  string
			valid bool
			f     func(em []byte) []byte
		}
		edits := []edit{
			{"as made", true, func(em []byte) []byte { return em }},
			{"first octet 1", false, func(em []byte) []byte { em[0] = 1; return em }},
			{"block type 2", false, func(em []byte) []byte { em[1] = 2; return em }},
			{"padding octet 0xfe", false, func(em []byte) []byte { em[5] = 0xfe; return em }},
			{"separator 0xff", false, func(em []byte) []byte { em[k-52] = 0xff; return em }},
			{"DigestInfo NULL missing", false, func(em []byte) []byte {
				// 30 2f 30 0b 06 09 <oid> 04 20 <hash>: two octets shorter,
				// one more 0xff of padding.
				t := []byte{0x30, 0x2f, 0x30, 0x0b, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01, 0x04, 0x20}
				t = append(t, d[:]...)
				em = bytes.Repeat([]byte{0xff}, k)
				em[0], em[1] = 0, 1
				em[k-len(t)-1] = 0
				copy(em[k-len(t):], t)
				return em
			}},
			{"digest in the wrong place (garbage after)", false, func(em []byte) []byte {
				copy(em[k-52-2:], em[k-52:])
				em[k-2], em[k-1] = 0xab, 0xcd
				return em
			}},
		}
		for _, e := range edits {
			sig, ok := rawSign(priv, e.f(pkcs()))
			if !ok {
				t.Fatalf("%d %s: encoding not below n", bits, e.what)
			}
			err := rsaSchemes[0].agree(t, e.what, v, pub, msg, sig)
			if (err == nil) != e.valid {
				t.Errorf("%d-bit RS256 %s: verdict %v, want valid=%v", bits, e.what, err, e.valid)
			}
		}

		// PSS: take a valid signature's encoding and break one rule at a
		// time. emLen is k-1 for the 2049-bit key, where the leading octet
		// of the k-octet recovered value must be 0.
		ps := rsaSchemes[3] // PS256
		sig := ps.sign(t, priv, msg)
		good := recoverEM(pub, sig)
		emBits := bits - 1
		emLen := (emBits + 7) / 8
		off := k - emLen
		pssEdits := []edit{
			{"as made", true, func(em []byte) []byte { return em }},
			{"trailer 0xbd", false, func(em []byte) []byte { em[k-1] = 0xbd; return em }},
			{"every maskedDB octet changed", false, func(em []byte) []byte {
				// Flip a bit of every octet of maskedDB: DB then has
				// nonzero padding and no separator where it was.
				for i := off; i < k-33; i++ {
					em[i] ^= 0x01
				}
				return em
			}},
			{"H changed", false, func(em []byte) []byte { em[k-2] ^= 1; return em }},
			{"maskedDB changed", false, func(em []byte) []byte { em[off+3] ^= 1; return em }},
			{"salt changed", false, func(em []byte) []byte { em[k-33-10] ^= 1; return em }},
		}
		if 8*emLen > emBits {
			// The leftmost 8*emLen-emBits bits of maskedDB must be zero,
			// even though step 9 clears them in DB.
			pssEdits = append(pssEdits, edit{"top bit of maskedDB set", false, func(em []byte) []byte { em[off] |= 0x80; return em }})
		}
		if off == 1 {
			// The octet above emLen must be zero. Setting it to 1 gives a
			// value below n only for some encodings: look for a message
			// whose encoding allows it.
			for i := 0; ; i++ {
				if i == 256 {
					t.Fatalf("%d-bit: no PSS encoding in %d messages stays below n with its top octet set", bits, i)
				}
				m := fmt.Appendf(nil, "payload %d", i)
				em := recoverEM(pub, ps.sign(t, priv, m))
				em[0] = 1
				s, ok := rawSign(priv, em)
				if !ok {
					continue
				}
				for _, sch := range []rsaScheme{ps, rsaSchemes[10]} {
					if err := sch.agree(t, "octet above emLen set", v, pub, m, s); err == nil {
						t.Errorf("%d-bit %s: encoding with a nonzero octet above emLen accepted", bits, sch.name)
					}
				}
				break
			}
		}
		for _, e := range pssEdits {
			s, ok := rawSign(priv, e.f(bytes.Clone(good)))
			if !ok {
				continue // an edit that makes the value not below n is refused like any such signature
			}
			for _, sch := range []rsaScheme{ps, rsaSchemes[10]} { // salt = hash, salt auto
				err := sch.agree(t, e.what, v, pub, msg, s)
				if (err == nil) != e.valid {
					t.Errorf("%d-bit %s %s: verdict %v, want valid=%v", bits, sch.name, e.what, err, e.valid)
				}
			}
		}
	}
}

// TestRSAVerifierExponents checks other public exponents on the prepared
// path (3, 17, 2^31-1: the largest crypto/rsa takes) and a 1024-bit key, and
// that keys crypto/rsa refuses (even modulus, even or too large exponent,
// under 1024 bits) go to crypto/rsa and are refused by both.
func TestRSAVerifierExponents(t *testing.T) {
	if testing.Short() {
		t.Skip("generates primes")
	}
	msg := []byte("exponents")
	mk := func(t *testing.T, bits, e int) *rsa.PrivateKey {
		eb := big.NewInt(int64(e))
		one := big.NewInt(1)
		for {
			p, err := rand.Prime(rand.Reader, bits/2)
			if err != nil {
				t.Fatal(err)
			}
			q, err := rand.Prime(rand.Reader, bits/2)
			if err != nil {
				t.Fatal(err)
			}
			n := new(big.Int).Mul(p, q)
			if p.Cmp(q) == 0 || n.BitLen() != bits {
				continue
			}
			phi := new(big.Int).Mul(new(big.Int).Sub(p, one), new(big.Int).Sub(q, one))
			d := new(big.Int).ModInverse(eb, phi)
			if d == nil {
				continue
			}
			priv := &rsa.PrivateKey{PublicKey: rsa.PublicKey{N: n, E: e}, D: d, Primes: []*big.Int{p, q}}
			if err := priv.Validate(); err != nil {
				t.Fatal(err)
			}
			return priv
		}
	}
	for _, c := range []struct{ bits, e int }{{2048, 3}, {2048, 17}, {2048, 1<<31 - 1}, {1024, 65537}} {
		t.Run(fmt.Sprintf("%d-bit e=%d", c.bits, c.e), func(t *testing.T) {
			priv := mk(t, c.bits, c.e)
			pub := &priv.PublicKey
			v := NewRSAVerifier(pub)
			if v.n == nil {
				t.Fatal("not on the prepared path")
			}
			for _, s := range []rsaScheme{rsaSchemes[0], rsaSchemes[3], rsaSchemes[6]} {
				em := recoverEM(pub, s.sign(t, priv, msg))
				sig, _ := rawSign(priv, em)
				if err := s.agree(t, "valid", v, pub, msg, sig); err != nil {
					t.Errorf("%s: %v", s.name, err)
				}
				sig[len(sig)-1] ^= 1
				if err := s.agree(t, "flipped", v, pub, msg, sig); err == nil {
					t.Errorf("%s: flipped signature accepted", s.name)
				}
			}
		})
	}
	good := &testRSAKey(t, 2048).PublicKey
	refused := []struct {
		what string
		pub  *rsa.PublicKey
	}{
		{"even modulus", &rsa.PublicKey{N: new(big.Int).Lsh(good.N, 1), E: 65537}},
		{"even exponent", &rsa.PublicKey{N: good.N, E: 65536}},
		{"exponent 1", &rsa.PublicKey{N: good.N, E: 1}},
		{"exponent 2^31", &rsa.PublicKey{N: good.N, E: 1 << 31}},
		{"512-bit modulus", &rsa.PublicKey{N: new(big.Int).Rsh(good.N, 1536), E: 65537}},
		{"nil modulus", &rsa.PublicKey{E: 65537}},
	}
	sig := rsaSchemes[0].sign(t, testRSAKey(t, 2048), msg)
	for _, c := range refused {
		v := NewRSAVerifier(c.pub)
		if v.n != nil {
			t.Errorf("%s: on the prepared path", c.what)
		}
		for _, s := range []rsaScheme{rsaSchemes[0], rsaSchemes[3]} {
			if err := s.agree(t, c.what, v, c.pub, msg, sig); err == nil {
				t.Errorf("%s %s: accepted", c.what, s.name)
			}
		}
	}
	if err := NewRSAVerifier(nil).VerifyPKCS1v15(crypto.SHA256, make([]byte, 32), sig); err == nil {
		t.Error("nil key: accepted")
	}
}

// TestRSAVerifierCopiesKey: changing the key after NewRSAVerifier changes
// nothing.
func TestRSAVerifierCopiesKey(t *testing.T) {
	priv := testRSAKey(t, 2048)
	pub := &rsa.PublicKey{N: new(big.Int).Set(priv.N), E: priv.E}
	v := NewRSAVerifier(pub)
	msg := []byte("m")
	sig := rsaSchemes[0].sign(t, priv, msg)
	pub.N.Add(pub.N, big.NewInt(2))
	pub.E = 3
	for _, s := range []rsaScheme{rsaSchemes[0]} {
		if err := s.ours(v, msg, sig); err != nil {
			t.Errorf("%s after the caller's key changed: %v", s.name, err)
		}
	}
	if v.Public().N.Cmp(priv.N) != 0 || v.Public().E != priv.E {
		t.Error("Public() is not the key the verifier was made with")
	}
}

// TestRSAVerifierConcurrent: one verifier used from many goroutines (run
// with -race).
func TestRSAVerifierConcurrent(t *testing.T) {
	priv := testRSAKey(t, 2049)
	v := NewRSAVerifier(&priv.PublicKey)
	msg := []byte("concurrent")
	sigs := map[int][]byte{}
	for i, s := range rsaSchemes[:6] {
		sigs[i] = s.sign(t, priv, msg)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				j := (g + i) % 6
				if err := rsaSchemes[j].ours(v, msg, sigs[j]); err != nil {
					t.Errorf("%s: %v", rsaSchemes[j].name, err)
				}
			}
		})
	}
	wg.Wait()
}

// TestRSAVerifierAllocations pins the prepared path's allocations: none for
// a 2048-bit key (crypto/rsa makes 9 for PKCS #1 v1.5 and 13 for PSS).
func TestRSAVerifierAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are checked without -race (.ci/run runs them)")
	}
	priv := testRSAKey(t, 2048)
	v := NewRSAVerifier(&priv.PublicKey)
	msg := []byte("allocations")
	for _, s := range rsaSchemes[:6] {
		sig := s.sign(t, priv, msg)
		d := s.digest(msg)
		o := s.opts()
		n := testing.AllocsPerRun(50, func() {
			var err error
			if s.pss {
				err = v.VerifyPSS(s.hash, d, sig, o)
			} else {
				err = v.VerifyPKCS1v15(s.hash, d, sig)
			}
			if err != nil {
				t.Fatal(err)
			}
		})
		if n != 0 {
			t.Errorf("%s: %v allocations per verify, want 0", s.name, n)
		}
	}
}

// wycheproofRSAFiles are every Wycheproof RSA signature file in the vector
// set. The verify files run through RSAVerifier here as well as through Key
// in TestVectorsWycheproofPrimitives; the signing file's expected signatures
// (SHA-1 and SHA-224 among them, which JWS has not) must verify.
var wycheproofRSAFiles = []string{
	"rsa_signature_2048_sha256_test.json",
	"rsa_signature_3072_sha256_test.json",
	"rsa_signature_2048_sha384_test.json",
	"rsa_signature_3072_sha384_test.json",
	"rsa_signature_2048_sha512_test.json",
	"rsa_signature_3072_sha512_test.json",
	"rsa_pss_2048_sha256_mgf1_32_test.json",
	"rsa_pss_3072_sha256_mgf1_32_test.json",
	"rsa_pss_2048_sha384_mgf1_48_test.json",
	"rsa_pss_4096_sha512_mgf1_64_test.json",
	"rsa_pkcs1_2048_sig_gen_test.json",
}

var wycheproofHashes = map[string]crypto.Hash{
	"SHA-1": crypto.SHA1, "SHA-224": crypto.SHA224, "SHA-256": crypto.SHA256,
	"SHA-384": crypto.SHA384, "SHA-512": crypto.SHA512,
}

// TestVectorsWycheproofRSAVerifier runs every case of every Wycheproof RSA
// signature file through RSAVerifier on its prepared path: a valid case must
// verify, an invalid one must be refused, and an acceptable one (either is
// allowed) must get crypto/rsa's verdict; every verdict is also compared with
// crypto/rsa's. PSS cases run with the group's salt length and again with
// rsa.PSSSaltLengthAuto.
func TestVectorsWycheproofRSAVerifier(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: every Wycheproof RSA vector; run without -short")
	}
	for _, file := range wycheproofRSAFiles {
		t.Run(strings.TrimSuffix(file, ".json"), func(t *testing.T) {
			t.Parallel()
			var f struct {
				NumberOfTests int `json:"numberOfTests"`
				TestGroups    []struct {
					Type         string `json:"type"`
					SHA          string `json:"sha"`
					MGFSHA       string `json:"mgfSha"`
					SLen         int    `json:"sLen"`
					PublicKeyDer string `json:"publicKeyDer"`
					KeyDer       string `json:"keyDer"` // the signing file's name
					Tests        []struct {
						TcID    int    `json:"tcId"`
						Comment string `json:"comment"`
						Msg     string `json:"msg"`
						Sig     string `json:"sig"`
						Result  string `json:"result"`
					} `json:"tests"`
				} `json:"testGroups"`
			}
			readVectorJSON(t, "wycheproof/"+file, &f)
			c := newTally(file, f.NumberOfTests)
			for gi, g := range f.TestGroups {
				gid := fmt.Sprintf("group %d", gi)
				h, ok := wycheproofHashes[g.SHA]
				if !ok {
					t.Fatalf("%s %s: hash %q", file, gid, g.SHA)
				}
				pss := g.Type == "RsassaPssVerify"
				if pss && g.MGFSHA != g.SHA {
					t.Fatalf("%s %s: MGF1 with %s, hash %s", file, gid, g.MGFSHA, g.SHA)
				}
				der := g.PublicKeyDer
				if der == "" {
					der = g.KeyDer
				}
				pk, err := x509.ParsePKIXPublicKey(vecHex(t, gid, der))
				if err != nil {
					t.Fatalf("%s %s: %v", file, gid, err)
				}
				pub := pk.(*rsa.PublicKey)
				v := NewRSAVerifier(pub)
				if v.n == nil {
					t.Fatalf("%s %s: key is not on the prepared path", file, gid)
				}
				for _, tv := range g.Tests {
					id := fmt.Sprintf("tcId %d (%s)", tv.TcID, tv.Comment)
					msg, sig := vecHex(t, id, tv.Msg), vecHex(t, id, tv.Sig)
					hh := h.New()
					hh.Write(msg)
					digest := hh.Sum(nil)
					salts := []int{g.SLen}
					if pss {
						salts = append(salts, rsa.PSSSaltLengthAuto)
					}
					var verdict error
					for i, salt := range salts {
						var ours, theirs error
						if pss {
							o := &rsa.PSSOptions{SaltLength: salt}
							ours, theirs = v.VerifyPSS(h, digest, sig, o), rsa.VerifyPSS(pub, h, digest, sig, o)
						} else {
							ours, theirs = v.VerifyPKCS1v15(h, digest, sig), rsa.VerifyPKCS1v15(pub, h, digest, sig)
						}
						if (ours == nil) != (theirs == nil) {
							t.Errorf("%s %s salt %d: RSAVerifier %v, crypto/rsa %v", file, id, salt, ours, theirs)
						}
						if i == 0 {
							verdict = ours
						}
					}
					c.judge(t, id, tv.Result, verdict)
				}
			}
			c.report(t)
		})
	}
}

// FuzzRSAVerifyDifferential asserts that RSAVerifier (and jose's Key, for
// the JWS algorithms) accepts and refuses exactly the (key, message,
// signature) triples crypto/rsa does. The input picks one of the test keys
// (2048, 2049, 3072, 4096 bits) and one of rsaSchemes, and gives the message
// and the signature; with raw set, the signature bytes are instead the
// encoding to be signed (left-padded or cut to the modulus size) and the
// signature is made from them with the private key, so that the fuzzer
// explores the padding checks rather than failing at random values.
//
//	go test -run='^$' -fuzz='^FuzzRSAVerifyDifferential$' -fuzztime=30s ./jose
func FuzzRSAVerifyDifferential(f *testing.F) {
	msg := []byte("eyJhbGciOiJQUzI1NiJ9.eyJzdWIiOiJmdXp6In0")
	for ki, bits := range testRSABits {
		priv := testRSAKey(f, bits)
		for si, s := range rsaSchemes {
			if bits > 2049 && si != 0 && si != 5 {
				continue // the larger keys seed RS256 and PS512 only
			}
			sig := s.sign(f, priv, msg)
			em := recoverEM(&priv.PublicKey, sig)
			f.Add(uint8(ki), uint8(si), false, msg, sig)
			f.Add(uint8(ki), uint8(si), false, msg, flipBit(sig, len(sig)*8-1))
			f.Add(uint8(ki), uint8(si), true, msg, em)
			f.Add(uint8(ki), uint8(si), true, msg, flipBit(em, len(em)*4))
		}
	}
	f.Fuzz(func(t *testing.T, ki, si uint8, raw bool, msg, sig []byte) {
		priv := testRSAKey(t, testRSABits[int(ki)%len(testRSABits)])
		pub := &priv.PublicKey
		s := rsaSchemes[int(si)%len(rsaSchemes)]
		if raw {
			em := make([]byte, pub.Size())
			if len(sig) > len(em) {
				sig = sig[len(sig)-len(em):]
			}
			copy(em[len(em)-len(sig):], sig)
			var ok bool
			if sig, ok = rawSign(priv, em); !ok {
				return
			}
		}
		s.agree(t, "fuzz", fuzzRSAVerifier(pub), pub, msg, sig)
	})
}

func flipBit(b []byte, bit int) []byte {
	c := bytes.Clone(b)
	c[bit/8] ^= 1 << (bit % 8)
	return c
}

var (
	fuzzVerifiersMu sync.Mutex
	fuzzVerifiers   = map[*rsa.PublicKey]*RSAVerifier{}
)

func fuzzRSAVerifier(pub *rsa.PublicKey) *RSAVerifier {
	fuzzVerifiersMu.Lock()
	defer fuzzVerifiersMu.Unlock()
	v, ok := fuzzVerifiers[pub]
	if !ok {
		v = NewRSAVerifier(pub)
		fuzzVerifiers[pub] = v
	}
	return v
}
