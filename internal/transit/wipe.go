package transit

import (
	"math/big"
	"runtime"
	"sync/atomic"
	"unsafe"
)

// Key material lives in buffers that wipe themselves. newKeyBytes,
// takeKeyBytes and ownWords put a finalizer on the buffer's own
// allocation, which overwrites it once nothing refers to any part of it.
// Whoever holds a slice of the bytes (an operation, a cache entry, a
// closure, a crypto/* key built on them) keeps them intact, so no
// operation has to keep an owning struct alive, and evicting a derived key
// or trimming a version never pulls bytes from under an operation using
// them.
//
// The rule: key material is stored only in such buffers, and nothing
// overwrites it from a cleanup or finalizer attached to a struct that holds
// it. Such a cleanup runs once the struct is unreachable, which can be
// while a slice of its bytes is still being read: a signing key zeroed
// halfway through a signature gives the private key away, a convergent
// nonce key zeroed before the HMAC makes every nonce HMAC(0, plaintext).
// runtime.AddCleanup cannot watch the bytes themselves (its function must
// not reach the object it watches), so these buffers use
// runtime.SetFinalizer: a buffer holds no pointers, so it has no cycle for
// a finalizer to keep alive, and the one extra collection cycle a
// finalized object lives is harmless.

// minKeyBuffer is the smallest allocation given a finalizer: smaller
// pointer-free objects may share a memory block with others, and a
// finalizer must be set on the start of a block.
const minKeyBuffer = 16

// newKeyBytes returns n zero bytes that wipe themselves once unreachable.
func newKeyBytes(n int) []byte { return selfWiping[byte](n) }

// takeKeyBytes moves b into a buffer that wipes itself once unreachable
// and overwrites b, which the caller no longer uses. An empty b stays nil.
func takeKeyBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	k := newKeyBytes(len(b))
	copy(k, b)
	clear(b)
	return k
}

// ownWords moves the words of a private integer into a buffer that wipes
// itself once unreachable, and overwrites the words it had. The integer is
// the same *big.Int, so the key holding it needs no change.
func ownWords(n *big.Int) {
	if n == nil || len(n.Bits()) == 0 {
		return
	}
	old := n.Bits()
	w := selfWiping[big.Word](len(old))
	copy(w, old)
	n.SetBits(w)
	clear(old)
}

func selfWiping[T byte | big.Word](n int) []T {
	var zero T
	size := int(unsafe.Sizeof(zero))
	c := max(n, (minKeyBuffer+size-1)/size)
	s := make([]T, n, c)
	runtime.SetFinalizer(&s[:1][0], func(p *T) {
		clear(unsafe.Slice(p, c))
		if f := wiped.Load(); f != nil {
			(*f)(uintptr(unsafe.Pointer(p)))
		}
	})
	return s
}

// wiped, when a test sets it, hears the address of every buffer a
// finalizer overwrote.
var wiped atomic.Pointer[func(addr uintptr)]

// beforeKeyUse, when a test sets it, runs where an operation is about to
// read key bytes it reached through a struct it no longer uses (a derived
// key, a version): where a collection would pull the bytes from under the
// operation if their wipe were tied to that struct.
var beforeKeyUse func(key []byte)
