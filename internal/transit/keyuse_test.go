package transit

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"math/big"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// Key material must stay intact while an operation uses it, however the
// keys it came from are evicted, trimmed or collected meanwhile.

// collectAtKeyUse makes every beforeKeyUse evict e's derived keys and
// collect garbage until the bytes the operation holds are overwritten or
// 100ms pass: wherever a wipe can reach bytes in use, it does so before
// the operation goes on. It returns how many times the hook ran.
func collectAtKeyUse(t *testing.T, e *Engine) *atomic.Int32 {
	var calls atomic.Int32
	beforeKeyUse = func(key []byte) {
		calls.Add(1)
		e.ForgetDerived()
		zero := make([]byte, len(key))
		for end := time.Now().Add(100 * time.Millisecond); time.Now().Before(end) && !bytes.Equal(key, zero); {
			runtime.GC()
			time.Sleep(time.Millisecond)
		}
	}
	t.Cleanup(func() { beforeKeyUse = nil })
	return &calls
}

// derivedOKM is what Vault's hkdf_sha256 derives from a version's key
// (a copy taken by the test) for ctx.
func derivedOKM(t *testing.T, key, ctx []byte, n int) []byte {
	t.Helper()
	okm, err := hkdf.Key(sha256.New, key, nil, string(ctx), n)
	if err != nil {
		t.Fatal(err)
	}
	return okm
}

func vaultText(payload []byte) string {
	return "vault:v1:" + base64.StdEncoding.EncodeToString(payload)
}

// TestKeyBytesIntactWhenCollectedDuringUse drives each operation that
// reads key bytes reached through a derived key or a version past a point
// where the test evicts every derived key and collects garbage, with the
// test holding no reference to the key: the operation's result must be
// the one the intact key gives. A wipe tied to the lifetime of the struct
// the bytes came from fails every case: a signature under a zeroed key, a
// convergent nonce that is HMAC(0, plaintext), a derived public key from a
// zeroed version key (which verifies a signature anyone can make).
func TestKeyBytesIntactWhenCollectedDuringUse(t *testing.T) {
	msg := []byte("transfer 100 to account 7")
	dctx := []byte("tenant-7")
	for _, tc := range []struct {
		name string
		typ  KeyType
		opts CreateOptions
		run  func(t *testing.T, e *Engine, k *Key, key []byte)
	}{
		{"derived ed25519 sign", Ed25519, CreateOptions{Derived: true}, func(t *testing.T, e *Engine, k *Key, key []byte) {
			want := ed25519.NewKeyFromSeed(derivedOKM(t, key, dctx, 32)).Public().(ed25519.PublicKey)
			res, err := e.Sign(ctx, k, msg, SignOptions{Context: dctx})
			if err != nil {
				t.Fatal(err)
			}
			sig, _ := base64.StdEncoding.DecodeString(res.Signature[len("vault:v1:"):])
			if !bytes.Equal(res.PublicKey, want) || !ed25519.Verify(want, msg, sig) {
				t.Fatal("the signature does not verify under the derived public key")
			}
		}},
		{"convergent encrypt", AES256GCM96, CreateOptions{Derived: true, ConvergentEncryption: true}, func(t *testing.T, e *Engine, k *Key, key []byte) {
			okm := derivedOKM(t, key, dctx, 64)
			res, err := e.Encrypt(ctx, k, msg, EncryptOptions{Context: dctx})
			if err != nil {
				t.Fatal(err)
			}
			block, _ := aes.NewCipher(okm[:32])
			gcm, _ := cipher.NewGCM(block)
			zeroNonce := hmacSum(make([]byte, 32), msg)[:12]
			nonce := hmacSum(okm[32:], msg)[:12]
			if got := res.Text; got != vaultText(gcm.Seal(nonce, nonce, msg, nil)) {
				if got == vaultText(gcm.Seal(zeroNonce, zeroNonce, msg, nil)) {
					t.Fatal("the convergent nonce is HMAC(0, plaintext): the nonce key was wiped")
				}
				t.Fatalf("convergent ciphertext %s is not the one the key gives", got)
			}
		}},
		{"derived ed25519 verify", Ed25519, CreateOptions{Derived: true}, func(t *testing.T, e *Engine, k *Key, key []byte) {
			priv := ed25519.NewKeyFromSeed(derivedOKM(t, key, dctx, 32))
			res, err := e.Verify(ctx, k, msg, vaultText(ed25519.Sign(priv, msg)), SignOptions{Context: dctx})
			if err != nil || !res.Valid {
				t.Fatalf("a genuine signature does not verify: %v", err)
			}
		}},
		{"derived ed25519 verify refuses a forgery", Ed25519, CreateOptions{Derived: true}, func(t *testing.T, e *Engine, k *Key, key []byte) {
			forger := ed25519.NewKeyFromSeed(derivedOKM(t, make([]byte, 64), dctx, 32))
			res, err := e.Verify(ctx, k, msg, vaultText(ed25519.Sign(forger, msg)), SignOptions{Context: dctx})
			if err != nil || res.Valid {
				t.Fatalf("a signature under a zeroed version key verifies (err %v)", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := testEngine(t)
			k := newKey(t, e, tc.typ, tc.opts)
			key := bytes.Clone(k.latest().key)
			calls := collectAtKeyUse(t, e)
			tc.run(t, e, k, key) // the last use of k: nothing but the operation holds the version
			if calls.Load() == 0 {
				t.Fatal("the operation never reached beforeKeyUse")
			}
		})
	}
}

func hmacSum(key, msg []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(msg)
	return m.Sum(nil)
}

// TestDerivedKeysUnderEvictionAndCollection signs and encrypts under
// derived keys while other goroutines churn contexts through a cache of
// one entry per shard (every new context evicts one) and the collector
// runs back to back: every signature must verify, every convergent
// ciphertext must be the one the key gives (deterministic, never under
// HMAC(0, …)) and decrypt.
func TestDerivedKeysUnderEvictionAndCollection(t *testing.T) {
	e := New(Options{Rand: seededRand(7), Now: func() time.Time { return testNow }, DerivedCacheEntries: 16})
	sk := newKey(t, e, Ed25519, CreateOptions{Derived: true})
	ck := newKey(t, e, AES256GCM96, CreateOptions{Derived: true, ConvergentEncryption: true})
	msg := []byte("pay 100 to account 7")
	const hot = 4
	var pubs [hot]ed25519.PublicKey
	var texts, zeroTexts [hot]string
	for i := range hot {
		c := []byte("hot-" + strconv.Itoa(i))
		pubs[i] = ed25519.NewKeyFromSeed(derivedOKM(t, sk.latest().key, c, 32)).Public().(ed25519.PublicKey)
		okm := derivedOKM(t, ck.latest().key, c, 64)
		block, _ := aes.NewCipher(okm[:32])
		gcm, _ := cipher.NewGCM(block)
		nonce, zero := hmacSum(okm[32:], msg)[:12], hmacSum(make([]byte, 32), msg)[:12]
		texts[i], zeroTexts[i] = vaultText(gcm.Seal(nonce, nonce, msg, nil)), vaultText(gcm.Seal(zero, zero, msg, nil))
	}

	budget := 2 * time.Second
	if testing.Short() {
		budget = 300 * time.Millisecond
	}
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Go(func() { // churn: every derivation evicts the entry of its shard, whatever its key
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_, _ = e.Encrypt(ctx, ck, msg, EncryptOptions{Context: []byte("churn-" + strconv.Itoa(i))})
		}
	})
	bg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				runtime.GC()
			}
		}
	})

	var ops, bad atomic.Int64
	var firstBad atomic.Value
	fail := func(s string) {
		bad.Add(1)
		firstBad.CompareAndSwap(nil, s)
	}
	var workers sync.WaitGroup
	end := time.Now().Add(budget)
	// More workers than cores: a worker preempted between taking a derived
	// key from the cache and reading its bytes is where a wipe tied to the
	// cache entry's lifetime struck.
	for w := range 8 * runtime.GOMAXPROCS(0) {
		workers.Go(func() {
			for i := w; time.Now().Before(end); i++ {
				ops.Add(1)
				h := i % hot
				c := []byte("hot-" + strconv.Itoa(h))
				res, err := e.Sign(ctx, sk, msg, SignOptions{Context: c})
				if err != nil {
					fail("sign: " + err.Error())
					continue
				}
				sig, _ := base64.StdEncoding.DecodeString(res.Signature[len("vault:v1:"):])
				if !bytes.Equal(res.PublicKey, pubs[h]) || !ed25519.Verify(pubs[h], msg, sig) {
					fail("a signature for context " + string(c) + " does not verify")
				}
				enc, err := e.Encrypt(ctx, ck, msg, EncryptOptions{Context: c})
				switch {
				case err != nil:
					fail("encrypt: " + err.Error())
					continue
				case enc.Text == zeroTexts[h]:
					fail("a convergent nonce is HMAC(0, plaintext)")
				case enc.Text != texts[h]:
					fail("convergent encryption is not deterministic")
				}
				dec, err := e.Decrypt(ctx, ck, enc.Text, DecryptOptions{Context: c})
				if err != nil || !bytes.Equal(dec.Plaintext, msg) {
					fail("a ciphertext does not decrypt")
				}
			}
		})
	}
	workers.Wait()
	close(stop)
	bg.Wait()
	if n := bad.Load(); n > 0 {
		t.Fatalf("%d of %d rounds went wrong; first: %v", n, ops.Load(), firstBad.Load())
	}
	t.Logf("%d rounds of sign, convergent encrypt and decrypt, all correct", ops.Load())
}

// secretAddrs are the addresses of the buffers holding v's secrets.
func secretAddrs(v *Version) []uintptr {
	var out []uintptr
	bytesAt := func(b []byte) {
		if len(b) > 0 {
			out = append(out, uintptr(unsafe.Pointer(unsafe.SliceData(b))))
		}
	}
	wordsAt := func(n *big.Int) {
		if n != nil && len(n.Bits()) > 0 {
			out = append(out, uintptr(unsafe.Pointer(unsafe.SliceData(n.Bits()))))
		}
	}
	bytesAt(v.key)
	if v.typ != HMAC {
		bytesAt(v.hmacKey)
	}
	if v.ec != nil {
		wordsAt(v.ec.D)
	}
	if v.rsa != nil {
		wordsAt(v.rsa.D)
		for _, p := range v.rsa.Primes {
			wordsAt(p)
		}
		wordsAt(v.rsa.Precomputed.Dp)
		wordsAt(v.rsa.Precomputed.Dq)
		wordsAt(v.rsa.Precomputed.Qinv)
	}
	return out
}

// wipeWatch records the addresses the self-wiping buffers report.
type wipeWatch struct {
	mu   sync.Mutex
	seen map[uintptr]bool
}

func watchWipes(t *testing.T) *wipeWatch {
	w := &wipeWatch{seen: map[uintptr]bool{}}
	f := func(addr uintptr) {
		w.mu.Lock()
		w.seen[addr] = true
		w.mu.Unlock()
	}
	wiped.Store(&f)
	t.Cleanup(func() { wiped.Store(nil) })
	return w
}

// arm forgets earlier wipes at addrs: live buffers occupy them now, so a
// wipe reported there from now on is theirs.
func (w *wipeWatch) arm(addrs []uintptr) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, a := range addrs {
		delete(w.seen, a)
	}
}

// wait collects garbage until every buffer at addrs was overwritten, or
// fails after five seconds.
func (w *wipeWatch) wait(t *testing.T, addrs []uintptr) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); ; {
		runtime.GC()
		w.mu.Lock()
		n := 0
		for _, a := range addrs {
			if w.seen[a] {
				n++
			}
		}
		w.mu.Unlock()
		if n == len(addrs) {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%d of %d secret buffers were overwritten once unreachable", n, len(addrs))
		}
		time.Sleep(time.Millisecond)
	}
}

// TestKeyMaterialWipedOnceUnreachable: every secret buffer of a version
// and of a derived key is overwritten once nothing refers to it (the
// version dropped, the derived key evicted).
func TestKeyMaterialWipedOnceUnreachable(t *testing.T) {
	for _, tc := range []struct {
		typ     KeyType
		buffers int // key, hmac key, private integers
	}{
		{AES128GCM96, 2}, {AES256GCM96, 2}, {ChaCha20Poly1305, 2}, {XChaCha20Poly1305, 2},
		{Ed25519, 2}, {ECDSAP256, 2}, {ECDSAP384, 2}, {ECDSAP521, 2},
		{RSA2048, 7}, {HMAC, 1},
	} {
		t.Run(tc.typ.String(), func(t *testing.T) {
			w := watchWipes(t)
			e := testEngine(t)
			addrs := secretAddrs(newKey(t, e, tc.typ, CreateOptions{}).latest())
			if len(addrs) != tc.buffers {
				t.Fatalf("%d secret buffers, want %d", len(addrs), tc.buffers)
			}
			w.arm(addrs)
			w.wait(t, addrs)
		})
	}
	for _, tc := range []struct {
		name string
		typ  KeyType
		opts CreateOptions
	}{
		{"derived ed25519", Ed25519, CreateOptions{Derived: true}},
		{"convergent", AES256GCM96, CreateOptions{Derived: true, ConvergentEncryption: true}},
	} {
		t.Run(tc.name+" evicted", func(t *testing.T) {
			w := watchWipes(t)
			e := testEngine(t)
			k := newKey(t, e, tc.typ, tc.opts)
			d, err := e.derived.get(k.latest(), []byte("c"), tc.opts.ConvergentEncryption)
			if err != nil {
				t.Fatal(err)
			}
			b := d.ed
			if tc.opts.ConvergentEncryption {
				b = d.nonceKey
			}
			addrs := []uintptr{uintptr(unsafe.Pointer(unsafe.SliceData(b)))}
			w.arm(addrs)
			e.ForgetDerived()
			w.wait(t, addrs)
			runtime.KeepAlive(k) // only the derived key is dropped
		})
	}
}
