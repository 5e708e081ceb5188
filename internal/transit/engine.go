package transit

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure an Engine. The zero value is ready for production.
type Options struct {
	// Rand is the source of keys, nonces, data keys and random bytes
	// (default crypto/rand.Reader). crypto/rsa and crypto/ecdsa signing
	// ignore it since Go 1.26 and use the system's.
	Rand io.Reader
	// Now is the clock for creation times and auto-rotation (default
	// time.Now).
	Now func() time.Time
	// DerivedCacheEntries bounds the cache of keys derived from a context
	// (default 4096; negative disables the cache).
	DerivedCacheEntries int
	// RSAWorkers is how many RSA private-key operations (sign, decrypt,
	// import unwrapping) run at once (default GOMAXPROCS).
	RSAWorkers int
	// RSAQueue is how many more may wait for a worker; beyond that the
	// operation fails at once with ErrBusy (default 4 × RSAWorkers).
	RSAQueue int
	// BatchWorkers is the most goroutines all batches together use, the
	// calling goroutines included (default GOMAXPROCS).
	BatchWorkers int
}

// Engine runs transit operations on Key snapshots. It holds no keys of its
// own: only the random source, the clock, the derived-key cache and the
// worker limits. It is safe for concurrent use.
type Engine struct {
	rand    io.Reader
	now     func() time.Time
	derived *derivedCache
	rsa     *limiter
	// helpers bounds the extra goroutines batches start, across all
	// batches; a batch that finds no free slot works on its own goroutine.
	helpers chan struct{}
	workers int
}

// DerivedCached is how many keys derived from a context the engine holds
// (for metrics and tests).
func (e *Engine) DerivedCached() int { return e.derived.len() }

// ForgetDerived drops every key derived from a context (the node seals:
// no key material outlives it). They are derived again at their next use.
func (e *Engine) ForgetDerived() { e.derived.clear() }

// ForgetKey drops the keys derived from k's versions (k was deleted). Trim
// drops those of the versions it removes by itself.
func (e *Engine) ForgetKey(k *Key) {
	if k == nil {
		return
	}
	ids := make(map[uint64]bool, len(k.versions))
	for _, v := range k.versions {
		ids[v.id] = true
	}
	e.derived.purge(ids)
}

// New returns an Engine.
func New(o Options) *Engine {
	e := &Engine{rand: o.Rand, now: o.Now}
	if e.rand == nil {
		e.rand = rand.Reader
	}
	if e.now == nil {
		e.now = time.Now
	}
	procs := runtime.GOMAXPROCS(0)
	if o.DerivedCacheEntries == 0 {
		o.DerivedCacheEntries = 4096
	}
	e.derived = newDerivedCache(o.DerivedCacheEntries)
	if o.RSAWorkers <= 0 {
		o.RSAWorkers = procs
	}
	if o.RSAQueue < 0 {
		o.RSAQueue = 0
	} else if o.RSAQueue == 0 {
		o.RSAQueue = 4 * o.RSAWorkers
	}
	e.rsa = newLimiter(o.RSAWorkers, o.RSAQueue)
	if o.BatchWorkers <= 0 {
		o.BatchWorkers = procs
	}
	e.workers = o.BatchWorkers
	e.helpers = make(chan struct{}, max(o.BatchWorkers-1, 0))
	return e
}

func (e *Engine) String() string { return "transit.Engine" }

// limiter admits at most run operations at once and queue more waiting;
// past that, acquire fails at once with ErrBusy instead of piling up
// goroutines. The waiting happens on the caller's goroutine.
type limiter struct {
	admit chan struct{} // running + waiting
	run   chan struct{} // running
}

func newLimiter(run, queue int) *limiter {
	return &limiter{admit: make(chan struct{}, run+queue), run: make(chan struct{}, run)}
}

var errBusy = newError(ReasonBusy, "RSA worker pool and its queue are full; retry later")

func (l *limiter) acquire(ctx context.Context) error {
	select {
	case l.admit <- struct{}{}:
	default:
		return errBusy
	}
	select {
	case l.run <- struct{}{}:
		return nil
	default:
	}
	if ctx == nil {
		ctx = context.Background()
	}
	select {
	case l.run <- struct{}{}:
		return nil
	case <-ctx.Done():
		<-l.admit
		return wrapError(ReasonCanceled, "waiting for an RSA worker", ctx.Err())
	}
}

func (l *limiter) release() {
	<-l.run
	<-l.admit
}

// withRSA runs f holding an RSA worker.
func (e *Engine) withRSA(ctx context.Context, f func() error) error {
	if err := e.rsa.acquire(ctx); err != nil {
		return err
	}
	defer e.rsa.release()
	return f()
}

// parallel calls fn(i) for every i in [0, n), on up to e.workers goroutines
// (the caller's included) taking chunks of items in turn; batches smaller
// than two chunks run on the caller's goroutine alone. chunk is the number
// of items worth a goroutine hand-off: large for cheap operations, 1 for
// RSA. fn must not panic; if it does, the panic is recovered and reported
// through onPanic for that item, and the other items go on.
func (e *Engine) parallel(n, chunk int, fn func(i int), onPanic func(i int, err error)) {
	call := func(i int) {
		defer func() {
			if r := recover(); r != nil {
				onPanic(i, wrapError(ReasonInternal, "recovered panic", fmt.Errorf("%v", r)))
			}
		}()
		fn(i)
	}
	workers := min(e.workers, n/max(chunk, 1))
	if workers <= 1 {
		for i := range n {
			call(i)
		}
		return
	}
	var next atomic.Int64
	work := func() {
		for {
			start := int(next.Add(int64(chunk))) - chunk
			if start >= n {
				return
			}
			for i := start; i < min(start+chunk, n); i++ {
				call(i)
			}
		}
	}
	var wg sync.WaitGroup
	helpers := 0
spawn:
	for w := 1; w < workers; w++ {
		select {
		case e.helpers <- struct{}{}:
			helpers++
			wg.Add(1)
			go func() {
				defer func() { <-e.helpers; wg.Done() }()
				work()
			}()
		default:
			break spawn
		}
	}
	if helpers == 0 {
		work()
		return
	}
	// The caller's share runs on a goroutine of its own too, queued behind
	// the helpers: the scheduler hands the caller's processor to the first
	// one at once when the caller blocks, and the others are free to be
	// stolen by idle processors without waiting for the caller to yield
	// (measured: the helper did a tenth of a 1,000-item batch when the
	// caller worked alongside it, about half this way).
	wg.Add(1)
	go func() { defer wg.Done(); work() }()
	wg.Wait()
}
