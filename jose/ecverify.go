package jose

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/fips140"
	"encoding/binary"
	"math/big"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"

	"filippo.io/nistec"
)

// P256Verifier checks ECDSA P-256 signatures with one public key Q,
// accepting and refusing exactly what crypto/ecdsa does with the same
// arguments (FIPS 186-5 §6.4.2):
//
//   - r and s must both lie in [1, n-1]; a high s is accepted, as
//     crypto/ecdsa accepts it;
//   - the digest becomes an integer by its leftmost 256 bits (bits2int,
//     SEC 1 §4.1.3 step 5), reduced once modulo n; a shorter digest is taken
//     whole;
//   - R = u1·G + u2·Q with w = s⁻¹, u1 = e·w, u2 = r·w (mod n); R at infinity
//     is refused, otherwise the signature holds when R's x-coordinate,
//     reduced modulo n, equals r.
//
// crypto/ecdsa builds a fresh table of multiples of Q on every call; that
// scalar multiplication, a few hundred doublings and additions, is most of a
// verification. A P256Verifier keeps a signed-digit fixed-window table of Q
// (j·2^(5i)·Q for j in 1..16 and each of the 52 windows of a scalar, 80 KB),
// so that u2·Q becomes at most 52 additions and no doublings. The table is
// built lazily, on the second verification with the key (about half a
// millisecond, once), so keys that are never or only once used cost nothing;
// at most MaxP256Tables tables exist at a time (see there). Without a table
// the same arithmetic runs with nistec's constant-time ScalarMult for u2·Q.
//
// Every input here is public (the key, the digest, the signature), so the
// variable-time parts (window recoding, skipping zero digits, the scalar
// inverse in math/big) reveal nothing secret; the point arithmetic itself is
// filippo.io/nistec, the standard library's own P-256 implementation
// exported as a module.
//
// In FIPS 140-3 mode, and for a key whose curve is not P-256, every call goes
// to crypto/ecdsa. A P256Verifier is safe for concurrent use.
type P256Verifier struct {
	pub ecdsa.PublicKey   // a copy of the key, for what goes to crypto/ecdsa
	q   *nistec.P256Point // nil: every call goes to crypto/ecdsa

	table    atomic.Pointer[p256Table]
	calls    atomic.Uint32 // verifications before the table exists (saturating)
	building atomic.Bool   // one goroutine builds the table; the others go on without it
}

// MaxP256Tables bounds how many P256Verifier tables (80 KB each) exist at a
// time, 20 MB in all. A key verified a second time gets a table if fewer
// exist; later keys verify without one (at about crypto/ecdsa's speed) until
// a verifier holding a table is garbage collected. A gateway's key sets hold
// tens of keys, a transit engine one per key version in use; 256 covers both
// with room, while a process fed an unbounded stream of fresh keys cannot
// spend unbounded memory on them.
const MaxP256Tables = 256

// p256TablesLive counts the tables that exist.
var p256TablesLive atomic.Int64

// P256Tables returns how many P256Verifier tables exist now (at most
// MaxP256Tables), for monitoring.
func P256Tables() int { return int(p256TablesLive.Load()) }

// p256BuildAfter is the number of verifications with a key after which its
// table is built (on the second): a key used once never pays for one.
const p256BuildAfter = 1

const (
	p256Window  = 5
	p256Windows = (256 + p256Window - 1) / p256Window // 52
	p256Digits  = 1 << (p256Window - 1)               // 16: digits are -15..16
)

// p256Table[i][j-1] = j·2^(5i)·Q.
type p256Table [p256Windows][p256Digits]nistec.P256Point

// NewP256Verifier prepares pub for verification. It copies pub, so later
// changes to pub do not reach the verifier. A nil pub, or one not on P-256,
// gives a verifier that defers every call to crypto/ecdsa (which refuses
// them for a nil or invalid key).
func NewP256Verifier(pub *ecdsa.PublicKey) *P256Verifier {
	v := &P256Verifier{}
	if pub == nil {
		return v
	}
	v.pub = ecdsa.PublicKey{Curve: pub.Curve}
	if pub.X != nil {
		v.pub.X = new(big.Int).Set(pub.X)
	}
	if pub.Y != nil {
		v.pub.Y = new(big.Int).Set(pub.Y)
	}
	if pub.Curve != elliptic.P256() || pub.X == nil || pub.Y == nil || fips140.Enabled() {
		return v
	}
	// SEC 1 uncompressed encoding; SetBytes refuses points off the curve.
	var enc [65]byte
	enc[0] = 4
	if pub.X.Sign() < 0 || pub.Y.Sign() < 0 || pub.X.BitLen() > 256 || pub.Y.BitLen() > 256 {
		return v
	}
	pub.X.FillBytes(enc[1:33])
	pub.Y.FillBytes(enc[33:])
	q, err := nistec.NewP256Point().SetBytes(enc[:])
	if err != nil {
		return v
	}
	v.q = q
	return v
}

// Prepared reports whether the verifier does its own arithmetic; false
// means every call goes to crypto/ecdsa (see P256Verifier).
func (v *P256Verifier) Prepared() bool { return v.q != nil }

// HasTable reports whether the key's table has been built.
func (v *P256Verifier) HasTable() bool { return v.table.Load() != nil }

// Public returns (a copy of) the key the verifier checks with.
func (v *P256Verifier) Public() *ecdsa.PublicKey {
	p := v.pub
	if p.X != nil {
		p.X = new(big.Int).Set(p.X)
	}
	if p.Y != nil {
		p.Y = new(big.Int).Set(p.Y)
	}
	return &p
}

// VerifyP1363 is ecdsa.VerifyASN1 for a signature in the fixed-width r‖s
// form of JWS (RFC 7518 §3.4) and IEEE P1363: exactly 64 bytes.
func (v *P256Verifier) VerifyP1363(digest, sig []byte) bool {
	if len(sig) != 64 {
		return false
	}
	return v.Verify(digest, sig[:32], sig[32:])
}

// Verify is ecdsa.Verify with r and s given as unsigned big-endian bytes of
// any length (leading zeros allowed).
func (v *P256Verifier) Verify(digest, r, s []byte) bool {
	if v.q == nil {
		return v.verifyStd(digest, r, s)
	}
	// r's bounds are also implied by the final comparison (x mod n is below
	// n, and 0 only for an x of n, whose discrete log nobody knows); they are
	// checked here as crypto/ecdsa checks them, before any arithmetic.
	var rl, sl [4]uint64
	if !p256ScalarInRange(&rl, r) || !p256ScalarInRange(&sl, s) {
		return false
	}
	return v.verify(digest, &rl, &sl, v.tableFor())
}

// verifyStd hands the call to crypto/ecdsa.
func (v *P256Verifier) verifyStd(digest, r, s []byte) bool {
	if v.pub.Curve == nil || v.pub.X == nil || v.pub.Y == nil {
		return false
	}
	return ecdsa.Verify(&v.pub, digest, new(big.Int).SetBytes(r), new(big.Int).SetBytes(s))
}

// tableFor returns the key's table, building it on the call after the first
// p256BuildAfter ones if fewer than MaxP256Tables exist; nil means verify
// without one. After the build the hot path is one atomic load.
func (v *P256Verifier) tableFor() *p256Table {
	if t := v.table.Load(); t != nil {
		return t
	}
	if c := v.calls.Load(); c < p256BuildAfter {
		v.calls.Add(1)
		return nil
	}
	if p256TablesLive.Load() >= MaxP256Tables || !v.building.CompareAndSwap(false, true) {
		return nil // over the bound, or another goroutine is building it
	}
	if p256TablesLive.Add(1) > MaxP256Tables {
		p256TablesLive.Add(-1)
		v.building.Store(false)
		return nil
	}
	t := newP256Table(v.q)
	v.table.Store(t)
	runtime.AddCleanup(v, func(c *atomic.Int64) { c.Add(-1) }, &p256TablesLive)
	return t
}

func newP256Table(q *nistec.P256Point) *p256Table {
	t := new(p256Table)
	var base nistec.P256Point
	base.Set(q)
	for i := range t {
		row := &t[i]
		row[0].Set(&base)
		for j := 1; j < p256Digits; j++ {
			row[j].Add(&row[j-1], &base)
		}
		// 2^5·base = 2·(16·base)
		base.Double(&row[p256Digits-1])
	}
	return t
}

// p256N is the order of P-256's base point, as little-endian 64-bit limbs.
var p256N = [4]uint64{0xf3b9cac2fc632551, 0xbce6faada7179e84, 0xffffffffffffffff, 0xffffffff00000000}

var p256NBig = elliptic.P256().Params().N

// p256ScalarInRange reads the unsigned big-endian b into l and reports
// whether it lies in [1, n-1].
func p256ScalarInRange(l *[4]uint64, b []byte) bool {
	for len(b) > 0 && b[0] == 0 {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 32 {
		return false
	}
	var buf [32]byte
	copy(buf[32-len(b):], b)
	limbsFromBytes(l, &buf)
	return lessThanN(l)
}

func limbsFromBytes(l *[4]uint64, b *[32]byte) {
	for i := range l {
		l[i] = binary.BigEndian.Uint64(b[24-8*i:])
	}
}

func bytesFromLimbs(b *[32]byte, l *[4]uint64) {
	for i := range l {
		binary.BigEndian.PutUint64(b[24-8*i:], l[i])
	}
}

// lessThanN reports whether l < n.
func lessThanN(l *[4]uint64) bool {
	_, borrow := sub256(l, &p256N)
	return borrow == 1
}

// sub256 returns a - b and the borrow out.
func sub256(a, b *[4]uint64) ([4]uint64, uint64) {
	var d [4]uint64
	var borrow uint64
	for i := range d {
		d[i], borrow = bits.Sub64(a[i], b[i], borrow)
	}
	return d, borrow
}

// reduceOnceN returns l mod n for l < 2n (every 256-bit value is).
func reduceOnceN(l *[4]uint64) {
	if d, borrow := sub256(l, &p256N); borrow == 0 {
		*l = d
	}
}

// p256Scalars holds math/big values for the scalar arithmetic mod n, reused
// across calls.
type p256Scalars struct {
	e, r, s, w, t, q big.Int
	buf              [32]byte
}

var p256ScalarPool = sync.Pool{New: func() any { return new(p256Scalars) }}

// verify runs FIPS 186-5 §6.4.2 steps 2–7 with r and s already in [1, n-1].
func (v *P256Verifier) verify(digest []byte, r, s *[4]uint64, t *p256Table) bool {
	// e = bits2int(digest) mod n: the leftmost 256 bits (n has exactly 256),
	// which are below 2n, so one conditional subtraction reduces them.
	var eb [32]byte
	if len(digest) >= 32 {
		copy(eb[:], digest[:32])
	} else {
		copy(eb[32-len(digest):], digest)
	}
	var e [4]uint64
	limbsFromBytes(&e, &eb)
	reduceOnceN(&e) // (u1 = e·w is reduced below as well)

	// w = s⁻¹, u1 = e·w, u2 = r·w (mod n), in math/big: the inverse of a
	// public value, variable-time.
	sc := p256ScalarPool.Get().(*p256Scalars)
	bytesFromLimbs(&sc.buf, s)
	sc.s.SetBytes(sc.buf[:])
	if sc.w.ModInverse(&sc.s, p256NBig) == nil {
		p256ScalarPool.Put(sc)
		return false // cannot happen: n is prime and 0 < s < n
	}
	var u1, u2 [32]byte
	bytesFromLimbs(&sc.buf, &e)
	sc.e.SetBytes(sc.buf[:])
	sc.t.Mul(&sc.e, &sc.w)
	sc.q.QuoRem(&sc.t, p256NBig, &sc.e)
	sc.e.FillBytes(u1[:])
	bytesFromLimbs(&sc.buf, r)
	sc.r.SetBytes(sc.buf[:])
	sc.t.Mul(&sc.r, &sc.w)
	sc.q.QuoRem(&sc.t, p256NBig, &sc.r)
	sc.r.FillBytes(u2[:])
	p256ScalarPool.Put(sc)

	// R = u1·G + u2·Q.
	var acc, p2 nistec.P256Point
	if _, err := acc.ScalarBaseMult(u1[:]); err != nil {
		return false
	}
	if t != nil {
		t.addMult(&acc, &u2)
	} else {
		if _, err := p2.ScalarMult(v.q, u2[:]); err != nil {
			return false
		}
		acc.Add(&acc, &p2)
	}
	// BytesX refuses the point at infinity.
	xb, err := acc.BytesX()
	if err != nil {
		return false
	}
	// x mod n == r; x < p < 2n.
	var x [4]uint64
	limbsFromBytes(&x, (*[32]byte)(xb))
	reduceOnceN(&x)
	return x == *r
}

// addMult adds k·Q to acc for the big-endian k < n, from the table: k is
// recoded into 52 signed 5-bit digits d_i in -15..16 (k = Σ d_i·2^(5i)), and
// each nonzero digit adds ±|d_i|·2^(5i)·Q. Variable-time: k is public.
func (t *p256Table) addMult(acc *nistec.P256Point, kb *[32]byte) {
	var k [4]uint64
	limbsFromBytes(&k, kb)
	var neg nistec.P256Point
	carry := uint64(0)
	for i := range p256Windows {
		d := window5(&k, uint(i*p256Window)) + carry
		carry = 0
		if d > p256Digits {
			// d - 32, and carry one into the next window.
			carry = 1
			d = 32 - d
			if d != 0 {
				acc.Add(acc, neg.Negate(&t[i][d-1]))
			}
			continue
		}
		if d != 0 {
			acc.Add(acc, &t[i][d-1])
		}
	}
	// k < n < 2^256, so the top window holds at most bit 255 plus a carry
	// (at most 2): no carry leaves it.
}

// window5 returns the 5 bits of k starting at bit pos (bits past 255 are 0).
func window5(k *[4]uint64, pos uint) uint64 {
	w, off := pos/64, pos%64
	v := k[w] >> off
	if off > 64-p256Window && w+1 < 4 {
		v |= k[w+1] << (64 - off)
	}
	return v & (1<<p256Window - 1)
}
