package transit

import (
	"crypto/rand"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Options.TenantQueue and Options.CallerQueue.
const (
	DefaultTenantQueue = 64
	DefaultCallerQueue = 16
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
	// PrivateKeyWorkers is how many asymmetric-key operations (signing and
	// verification, RSA encryption and decryption, key generation, import
	// unwrapping; see pooled) run at once, shared fairly between callers (see Caller). The
	// default is one fewer than GOMAXPROCS, at least 1, so that a core
	// stays for everything else the process does, such as the gateway's
	// decisions. (The name is older than the verifications and RSA
	// encryptions on the workers.)
	PrivateKeyWorkers int
	// TenantQueue and CallerQueue bound the requests with asymmetric-key
	// work one tenant, and one caller of a tenant, may have waiting or
	// running at once (defaults DefaultTenantQueue and DefaultCallerQueue;
	// a batch counts once). Beyond them the next fails at once with
	// ErrBusy; other tenants and callers are not affected.
	TenantQueue int
	CallerQueue int
	// MaxBatchCost bounds what one batch may cost (see DefaultMaxBatchCost
	// and the costs in cost.go); a batch over it fails with ErrOverBudget
	// before any of it is done.
	MaxBatchCost int64
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
	pool    *pool // asymmetric-key operations
	maxCost int64
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
	if o.PrivateKeyWorkers <= 0 {
		o.PrivateKeyWorkers = max(1, procs-1)
	}
	if o.TenantQueue <= 0 {
		o.TenantQueue = DefaultTenantQueue
	}
	if o.CallerQueue <= 0 {
		o.CallerQueue = DefaultCallerQueue
	}
	e.pool = newPool(o.PrivateKeyWorkers, o.TenantQueue, o.CallerQueue)
	e.maxCost = o.MaxBatchCost
	if e.maxCost <= 0 {
		e.maxCost = DefaultMaxBatchCost
	}
	if o.BatchWorkers <= 0 {
		o.BatchWorkers = procs
	}
	e.workers = o.BatchWorkers
	e.helpers = make(chan struct{}, max(o.BatchWorkers-1, 0))
	return e
}

func (e *Engine) String() string { return "transit.Engine" }

// parallel calls fn(i) for every i in [0, n), on up to e.workers goroutines
// (the caller's included) taking chunks of items in turn; batches smaller
// than two chunks run on the caller's goroutine alone. chunk is the number
// of items worth a goroutine hand-off: large for cheap operations, 1 for
// the asymmetric ones. fn must not panic; if it does, the panic is recovered and reported
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
