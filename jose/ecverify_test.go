package jose

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"math/big"
	mrand "math/rand/v2"
	"sync"
	"testing"

	"filippo.io/nistec"
	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"
)

// p256Pair is one key's two paths: with its table and without one.
type p256Pair struct {
	priv          *ecdsa.PrivateKey
	table, direct *P256Verifier
}

// newP256Pair prepares pub twice: one verifier with its table built now, one
// that never builds one (every call takes nistec's ScalarMult for u2·Q).
func newP256Pair(t testing.TB, priv *ecdsa.PrivateKey, pub *ecdsa.PublicKey) p256Pair {
	t.Helper()
	p := p256Pair{priv: priv, table: NewP256Verifier(pub), direct: NewP256Verifier(pub)}
	if !p.table.Prepared() || !p.direct.Prepared() {
		t.Fatalf("P-256 key (%x, %x) not prepared", pub.X, pub.Y)
	}
	// Built outside the bound (whose own tests are TestP256TableBound and
	// TestP256VerifierTableLifecycle), so that the many keys of the vector
	// files need not wait for the collector to free earlier tables.
	p.table.table.Store(newP256Table(p.table.q))
	p.direct.building.Store(true) // never builds
	return p
}

// stdVerify is crypto/ecdsa's verdict on a signature given as r and s bytes.
func stdVerify(pub *ecdsa.PublicKey, digest, r, s []byte) bool {
	return ecdsa.Verify(pub, digest, new(big.Int).SetBytes(r), new(big.Int).SetBytes(s))
}

// stdVerifyP1363 is crypto/ecdsa's verdict on a fixed-width r‖s signature.
func stdVerifyP1363(pub *ecdsa.PublicKey, digest, sig []byte) bool {
	return len(sig) == 64 && stdVerify(pub, digest, sig[:32], sig[32:])
}

// parseDERSig reads an ASN.1 ECDSA signature as crypto/ecdsa does (the same
// cryptobyte calls); ok false means crypto/ecdsa refuses it unparsed.
func parseDERSig(sig []byte) (r, s []byte, ok bool) {
	var inner cryptobyte.String
	in := cryptobyte.String(sig)
	if !in.ReadASN1(&inner, cbasn1.SEQUENCE) || !in.Empty() ||
		!inner.ReadASN1Integer(&r) || !inner.ReadASN1Integer(&s) || !inner.Empty() {
		return nil, nil, false
	}
	return r, s, true
}

// check compares both paths of p with crypto/ecdsa on (digest, r, s) and
// returns the common verdict.
func (p p256Pair) check(t testing.TB, id string, digest, r, s []byte) bool {
	t.Helper()
	want := stdVerify(&p.priv.PublicKey, digest, r, s)
	if got := p.table.Verify(digest, r, s); got != want {
		t.Errorf("%s: with the table %v, crypto/ecdsa %v (digest %x r %x s %x)", id, got, want, digest, r, s)
	}
	if got := p.direct.Verify(digest, r, s); got != want {
		t.Errorf("%s: without a table %v, crypto/ecdsa %v (digest %x r %x s %x)", id, got, want, digest, r, s)
	}
	return want
}

// checkP1363 is check for a JWS signature, through VerifyP1363.
func (p p256Pair) checkP1363(t testing.TB, id string, digest, sig []byte) bool {
	t.Helper()
	want := stdVerifyP1363(&p.priv.PublicKey, digest, sig)
	if got := p.table.VerifyP1363(digest, sig); got != want {
		t.Errorf("%s: with the table %v, crypto/ecdsa %v (digest %x sig %x)", id, got, want, digest, sig)
	}
	if got := p.direct.VerifyP1363(digest, sig); got != want {
		t.Errorf("%s: without a table %v, crypto/ecdsa %v (digest %x sig %x)", id, got, want, digest, sig)
	}
	return want
}

var (
	p256NInt      = elliptic.P256().Params().N
	p256PInt      = elliptic.P256().Params().P
	p256NMinusOne = new(big.Int).Sub(p256NInt, big.NewInt(1))
	p256NPlusOne  = new(big.Int).Add(p256NInt, big.NewInt(1))
	two256Minus1  = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))
)

func fixed32(x *big.Int) []byte { return x.FillBytes(make([]byte, 32)) }

// p256SigMutations returns variants of the valid r‖s signature sig: itself,
// its high-s twin (also valid), r and s swapped, each of r and s set to 0,
// 1, n-1, n, n+1, p and 2^256-1, r+n where it fits in 32 bytes, one bit
// flipped at pos, and the wrong lengths (one byte short, one long, empty,
// each half alone, DER-style trimmed).
func p256SigMutations(sig []byte, pos int) [][]byte {
	r, s := sig[:32], sig[32:]
	cat := func(a, b []byte) []byte { return append(append([]byte{}, a...), b...) }
	sBig := new(big.Int).SetBytes(s)
	highS := fixed32(new(big.Int).Sub(p256NInt, sBig))
	out := [][]byte{cat(r, s), cat(r, highS), cat(s, r)}
	for _, x := range []*big.Int{big.NewInt(0), big.NewInt(1), p256NMinusOne, p256NInt, p256NPlusOne, p256PInt, two256Minus1} {
		out = append(out, cat(fixed32(x), s), cat(r, fixed32(x)))
	}
	if rn := new(big.Int).Add(new(big.Int).SetBytes(r), p256NInt); rn.BitLen() <= 256 {
		out = append(out, cat(fixed32(rn), s))
	}
	flipped := cat(r, s)
	flipped[(pos/8)%64] ^= 1 << (pos % 8)
	out = append(out, flipped, cat(r, s)[:63], cat([]byte{0}, cat(r, s)), nil, cat(r, nil), cat(nil, s))
	out = append(out, cat(trimInt(r), trimInt(s)))
	return out
}

// p256Digests returns digests of msg of the lengths crypto/ecdsa treats
// differently: SHA-256 (32 bytes), longer (SHA-512: truncated to the leftmost
// 32), shorter (20 bytes), empty, and all-ones (above n: reduced).
func p256Digests(msg []byte) [][]byte {
	d256 := sha256.Sum256(msg)
	d512 := sha512.Sum512(msg)
	return [][]byte{d256[:], d512[:], d256[:20], {}, bytes.Repeat([]byte{0xff}, 32), bytes.Repeat([]byte{0xff}, 33)}
}

// signP256 signs digest and returns r and s as 32 bytes each.
func signP256(t testing.TB, priv *ecdsa.PrivateKey, digest []byte, random bool) (r, s []byte) {
	t.Helper()
	var der []byte
	var err error
	if random {
		der, err = ecdsa.SignASN1(rand.Reader, priv, digest)
	} else {
		der, err = priv.Sign(nil, digest, crypto.SHA256) // RFC 6979
	}
	if err != nil {
		t.Fatal(err)
	}
	rb, sb, ok := parseDERSig(der)
	if !ok {
		t.Fatalf("crypto/ecdsa made an unparsable signature %x", der)
	}
	return fixed32(new(big.Int).SetBytes(rb)), fixed32(new(big.Int).SetBytes(sb))
}

// TestP256VerifierAgreesWithCryptoECDSA: over random keys, digests of every
// length class, and the mutations of each valid signature, the verifier with
// its table and without one accept exactly what crypto/ecdsa accepts; every
// valid signature and its high-s twin verify.
func TestP256VerifierAgreesWithCryptoECDSA(t *testing.T) {
	keys, msgs := 3, 12
	if testing.Short() || raceEnabled {
		keys, msgs = 2, 6
	}
	cases, valid := 0, 0
	for ki := range keys {
		priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		p := newP256Pair(t, priv, &priv.PublicKey)
		for mi := range msgs {
			msg := fmt.Appendf(nil, "message %d of key %d", mi, ki)
			for di, digest := range p256Digests(msg) {
				r, s := signP256(t, priv, digest, true)
				sig := append(append([]byte{}, r...), s...)
				for vi, m := range p256SigMutations(sig, mrand.IntN(512)) {
					id := fmt.Sprintf("key %d msg %d digest %d mutation %d", ki, mi, di, vi)
					ok := p.checkP1363(t, id, digest, m)
					cases++
					if ok {
						valid++
					}
					if vi < 2 && !ok {
						t.Errorf("%s: a valid signature (or its high-s twin) does not verify", id)
					}
					if h := len(m) / 2; len(m) > 0 {
						// The same halves as r and s of any width.
						p.check(t, id+" (r, s)", digest, m[:h], m[h:])
						cases++
					}
				}
			}
		}
	}
	t.Logf("%d cases, %d valid", cases, valid)
}

// TestP256VerifierInfinity: for the key d·G, digest e = -r·d (mod n) makes
// R = u1·G + u2·Q = s⁻¹(e + r·d)·G the point at infinity for every s;
// crypto/ecdsa refuses that, and so must the verifier.
func TestP256VerifierInfinity(t *testing.T) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p := newP256Pair(t, priv, &priv.PublicKey)
	d, err := priv.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		r, _ := rand.Int(rand.Reader, p256NMinusOne)
		r.Add(r, big.NewInt(1))
		s, _ := rand.Int(rand.Reader, p256NMinusOne)
		s.Add(s, big.NewInt(1))
		e := new(big.Int).Mul(r, new(big.Int).SetBytes(d))
		e.Neg(e).Mod(e, p256NInt)
		if p.check(t, fmt.Sprintf("infinity %d", i), fixed32(e), fixed32(r), fixed32(s)) {
			t.Fatal("crypto/ecdsa accepted R at infinity")
		}
	}
}

// TestP256VerifierRangeTwins: s + n and r + n are the same residues as s
// and r but outside [1, n-1], so crypto/ecdsa refuses them; so must the
// verifier. A random s or r is almost never below 2^256 - n, where the twin
// still fits in 32 bytes, so the signatures here are made with a small s: a
// random nonce k, r = x(k·G) mod n, and the digest solved from the signing
// equation, e = s·k - r·d (mod n).
func TestP256VerifierRangeTwins(t *testing.T) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p := newP256Pair(t, priv, &priv.PublicKey)
	db, err := priv.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	d := new(big.Int).SetBytes(db)
	for i := range 20 {
		k, _ := rand.Int(rand.Reader, p256NMinusOne)
		k.Add(k, big.NewInt(1))
		kG, err := nistec.NewP256Point().ScalarBaseMult(fixed32(k))
		if err != nil {
			t.Fatal(err)
		}
		kx, err := kG.BytesX()
		if err != nil {
			t.Fatal(err)
		}
		r := new(big.Int).Mod(new(big.Int).SetBytes(kx), p256NInt)
		s, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 200))
		s.Add(s, big.NewInt(1))
		e := new(big.Int).Mul(s, k)
		e.Sub(e, new(big.Int).Mul(r, d)).Mod(e, p256NInt)
		digest := fixed32(e)
		id := fmt.Sprintf("twin %d", i)
		if !p.check(t, id+" valid", digest, fixed32(r), fixed32(s)) {
			t.Fatalf("%s: the constructed signature does not verify", id)
		}
		sn := new(big.Int).Add(s, p256NInt)
		if p.check(t, id+" s+n", digest, fixed32(r), fixed32(sn)) {
			t.Errorf("%s: crypto/ecdsa accepted s + n", id)
		}
		if rn := new(big.Int).Add(r, p256NInt); rn.BitLen() <= 256 {
			p.check(t, id+" r+n", digest, fixed32(rn), fixed32(s))
		}
		sig := append(fixed32(r), fixed32(sn)...)
		p.checkP1363(t, id+" s+n P1363", digest, sig)
	}
}

// TestP256TableScalars: the table's signed-digit multiplication equals
// nistec's ScalarMult for scalars that stress the recoding (digits at 15,
// 16, 17, 31 and 32 with their carries, n-1, powers of two) and random ones.
func TestP256TableScalars(t *testing.T) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p := newP256Pair(t, priv, &priv.PublicKey)
	tbl := p.table.table.Load()
	var ks []*big.Int
	for _, x := range []int64{0, 1, 2, 15, 16, 17, 31, 32, 33, 47, 48, 1023, 1024, 1 << 40} {
		ks = append(ks, big.NewInt(x))
	}
	ks = append(ks, p256NMinusOne, new(big.Int).Sub(p256NInt, big.NewInt(2)), new(big.Int).Rsh(p256NInt, 1),
		new(big.Int).Lsh(big.NewInt(1), 255), new(big.Int).Lsh(big.NewInt(1), 254))
	for _, pattern := range []byte{0x10, 0x11, 0x1f, 0x0f, 0x84, 0x42, 0x21, 0xff, 0x7b} {
		// Repeated bytes give each 5-bit window many values in turn.
		k := new(big.Int).SetBytes(bytes.Repeat([]byte{pattern}, 32))
		ks = append(ks, k.Mod(k, p256NInt))
	}
	for range 200 {
		k, _ := rand.Int(rand.Reader, p256NInt)
		ks = append(ks, k)
	}
	for _, k := range ks {
		kb := [32]byte(fixed32(k))
		got := nistec.NewP256Point()
		tbl.addMult(got, &kb)
		want, err := nistec.NewP256Point().ScalarMult(p.table.q, kb[:])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Errorf("k = %x: table %x, ScalarMult %x", k, got.Bytes(), want.Bytes())
		}
	}
}

// wycheproofP256Files are the P-256 SHA-256 ECDSA files: the JWS form r‖s
// and the DER form (parsed as crypto/ecdsa parses it).
var wycheproofP256Files = []struct{ file, groupType string }{
	{"ecdsa_secp256r1_sha256_p1363_test.json", "EcdsaP1363Verify"},
	{"ecdsa_secp256r1_sha256_test.json", "EcdsaVerify"},
}

// TestP256VerifierWycheproof runs every Wycheproof ECDSA P-256 SHA-256
// vector through the verifier with its table and without one: each verdict
// must be crypto/ecdsa's and Wycheproof's ("acceptable" cases: crypto/ecdsa's).
func TestP256VerifierWycheproof(t *testing.T) {
	total := 0
	for _, tc := range wycheproofP256Files {
		var f wpPrimitiveFile
		readVectorJSON(t, "wycheproof/"+tc.file, &f)
		c := newTally(tc.file, f.NumberOfTests)
		for gi := range f.TestGroups {
			g := &f.TestGroups[gi]
			if g.Type != tc.groupType || g.SHA != "SHA-256" {
				t.Fatalf("%s group %d: type %q sha %q", tc.file, gi, g.Type, g.SHA)
			}
			parsed, err := x509.ParsePKIXPublicKey(vecHex(t, tc.file, g.PublicKeyDer))
			pub, isEC := parsed.(*ecdsa.PublicKey)
			if err != nil || !isEC {
				t.Fatalf("%s group %d: %v (%T)", tc.file, gi, err, parsed)
			}
			p := newP256Pair(t, &ecdsa.PrivateKey{PublicKey: *pub}, pub)
			for _, v := range g.Tests {
				id := fmt.Sprintf("tcId %d (%s)", v.TcID, v.Comment)
				msg := vecHex(t, id, v.Msg)
				sig := vecHex(t, id, v.Sig)
				digest := sha256.Sum256(msg)
				var ok bool
				if tc.groupType == "EcdsaP1363Verify" {
					ok = p.checkP1363(t, id, digest[:], sig)
				} else if r, s, parsed := parseDERSig(sig); parsed {
					ok = p.check(t, id, digest[:], r, s)
				}
				if std := ecdsa.VerifyASN1(pub, digest[:], sig); tc.groupType == "EcdsaVerify" && std != ok {
					t.Errorf("%s: %v, crypto/ecdsa.VerifyASN1 %v", id, ok, std)
				}
				var err error
				if !ok {
					err = errSignature
				}
				c.judge(t, id, v.Result, err)
				total++
			}
		}
		c.report(t)
	}
	if total != 262+484 {
		t.Errorf("%d Wycheproof cases ran, want 746", total)
	}
}

// TestP256VerifierTableLifecycle: no table before the second verification,
// one after it; a verifier that is not P-256 or has no key defers to
// crypto/ecdsa; the count of live tables returns when verifiers are
// collected.
func TestP256VerifierTableLifecycle(t *testing.T) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	digest := sha256.Sum256([]byte("lifecycle"))
	r, s := signP256(t, priv, digest[:], false)
	sig := append(append([]byte{}, r...), s...)
	v := NewP256Verifier(&priv.PublicKey)
	if !v.VerifyP1363(digest[:], sig) {
		t.Fatal("first verification failed")
	}
	if v.table.Load() != nil {
		t.Fatal("a table was built on the first verification")
	}
	if !v.VerifyP1363(digest[:], sig) {
		t.Fatal("second verification failed")
	}
	if v.table.Load() == nil {
		t.Fatal("no table after the second verification")
	}
	if !v.VerifyP1363(digest[:], sig) {
		t.Fatal("verification with the table failed")
	}
	if NewP256Verifier(nil).VerifyP1363(digest[:], sig) {
		t.Error("a verifier without a key accepted a signature")
	}
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if w := NewP256Verifier(&p384.PublicKey); w.Prepared() || w.VerifyP1363(digest[:], sig) {
		t.Error("a P-384 key was prepared or accepted a P-256 signature")
	}
	// Concurrent first uses: exactly one table, every verdict right.
	w := NewP256Verifier(&priv.PublicKey)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 4 {
				if !w.VerifyP1363(digest[:], sig) {
					t.Error("concurrent verification failed")
				}
			}
		})
	}
	wg.Wait()
	if w.table.Load() == nil {
		t.Error("no table after concurrent verifications")
	}
}

// TestP256TableBound: once MaxP256Tables tables exist, further keys verify
// without one, correctly.
func TestP256TableBound(t *testing.T) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	digest := sha256.Sum256([]byte("bound"))
	r, s := signP256(t, priv, digest[:], false)
	sig := append(append([]byte{}, r...), s...)
	// Far over the bound, so that tables of earlier tests' verifiers, freed
	// meanwhile by the garbage collector, cannot bring the count under it.
	const over = MaxP256Tables + 1<<20
	p256TablesLive.Add(over)
	defer p256TablesLive.Add(-over)
	v := NewP256Verifier(&priv.PublicKey)
	for range 3 {
		if !v.VerifyP1363(digest[:], sig) {
			t.Fatal("verification over the bound failed")
		}
	}
	if v.table.Load() != nil {
		t.Error("a table was built over the bound")
	}
}

// FuzzES256VerifyDifferential: for a key, a message and a signature — the
// fuzzer's own bytes, or a valid signature of the message mutated (high s,
// r and s swapped, r or s set to 0, n, n+1 and the like, a bit flipped, the
// wrong length) — ES256 verification through Key (table built), through a
// P256Verifier without a table, and crypto/ecdsa give the same verdict. The
// message also serves as a digest of any length, with the signature split
// into r and s of any widths.
func FuzzES256VerifyDifferential(f *testing.F) {
	keys := fuzzP256Keys(f)
	f.Add(uint8(0), []byte("payload"), uint8(0x80), uint16(0), []byte{})
	f.Add(uint8(1), []byte("eyJhbGciOiJFUzI1NiJ9.e30"), uint8(0x81), uint16(77), []byte{})
	f.Add(uint8(2), []byte{}, uint8(0x85), uint16(300), []byte{1, 2})
	f.Add(uint8(3), []byte("x"), uint8(0), uint16(0), bytes.Repeat([]byte{0xff}, 64))
	for i := range 25 {
		f.Add(uint8(i), []byte("mutation"), uint8(0x80+i), uint16(i*37), []byte{})
	}
	f.Fuzz(func(t *testing.T, ki uint8, msg []byte, op uint8, pos uint16, raw []byte) {
		k := keys[int(ki)%len(keys)]
		digest := sha256.Sum256(msg)
		sig := raw
		mutation := -1
		if op&0x80 != 0 {
			r, s := signP256(t, k.pair.priv, digest[:], false)
			ms := p256SigMutations(append(r, s...), int(pos))
			mutation = int(op&0x7f) % len(ms)
			sig = ms[mutation]
		}
		want := stdVerifyP1363(&k.pair.priv.PublicKey, digest[:], sig)
		if got := k.key.verify(msg, sig); got != want {
			t.Errorf("Key (table): %v, crypto/ecdsa %v (msg %x sig %x)", got, want, msg, sig)
		}
		if got := k.pair.direct.VerifyP1363(digest[:], sig); got != want {
			t.Errorf("no table: %v, crypto/ecdsa %v (msg %x sig %x)", got, want, msg, sig)
		}
		if (mutation == 0 || mutation == 1) && !want {
			t.Errorf("a valid signature (or its high-s twin) does not verify: msg %x sig %x", msg, sig)
		}
		// msg as a digest of any length; sig split at pos into r and s.
		h := 0
		if len(sig) > 0 {
			h = int(pos) % (len(sig) + 1)
		}
		k.pair.check(t, "raw digest", msg, sig[:h], sig[h:])
	})
}

type fuzzP256Key struct {
	key  *Key
	pair p256Pair
}

// fuzzP256Keys makes four fixed keys (private scalars from a hash), each as
// a Key with its table built and as a pair of verifiers.
func fuzzP256Keys(t testing.TB) []fuzzP256Key {
	var out []fuzzP256Key
	for i := range 4 {
		var seed [8]byte
		binary.BigEndian.PutUint64(seed[:], uint64(i))
		d := sha256.Sum256(append([]byte("jose fuzz P-256 key"), seed[:]...))
		priv, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), d[:])
		if err != nil {
			t.Fatal(err)
		}
		k, err := NewKey(ES256, "", &priv.PublicKey)
		if err != nil {
			t.Fatal(err)
		}
		if k.p256 == nil || !k.p256.Prepared() {
			t.Fatal("the ES256 key has no prepared P256Verifier")
		}
		k.p256.table.Store(newP256Table(k.p256.q))
		out = append(out, fuzzP256Key{key: k, pair: newP256Pair(t, priv, &priv.PublicKey)})
	}
	return out
}
