package transit

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

// queued is how many operations wait in p's queues, counted in them (and
// checked against the count p keeps).
func (p *pool) queued() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, t := range p.tenants.flows {
		for _, c := range t.callers.flows {
			n += len(c.waiters)
		}
	}
	if n != p.waiting {
		panic(fmt.Sprintf("%d operations queued, %d counted", n, p.waiting))
	}
	return n
}

// idle reports whether p has all its workers free and forgets every flow.
func (p *pool) idle(workers int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.free == workers && len(p.tenants.flows) == 0 && p.tenants.active.Len() == 0
}

// waitFor polls cond until it holds, failing the test after a while.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// fakeOp is an operation of the scheduler tests: it holds a worker until
// told to finish.
type fakeOp struct {
	name   string
	tenant string
	caller string
	cost   int64
}

// serviceOrder runs ops through a pool of the given workers: the first ones
// take the free workers, the rest queue in the order given; then the
// workers are freed one at a time (the longest-running first), and the
// order in which the operations got a worker is returned.
func serviceOrder(t *testing.T, workers int, ops []fakeOp) []string {
	t.Helper()
	p := newPool(workers, 1000, 1000)
	started := make(chan string)
	finish := map[string]chan struct{}{}
	var wg sync.WaitGroup
	for _, o := range ops {
		finish[o.name] = make(chan struct{})
	}
	var order, running []string
	for i, o := range ops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk, err := p.enter(Caller{Tenant: o.tenant, Principal: o.caller})
			if err != nil {
				t.Error(err)
				return
			}
			defer tk.leave()
			if err := p.acquire(context.Background(), &tk, o.cost); err != nil {
				t.Error(err)
				return
			}
			started <- o.name
			<-finish[o.name]
			p.release()
		}()
		if i < workers {
			name := <-started
			order, running = append(order, name), append(running, name)
			continue
		}
		waitFor(t, fmt.Sprintf("%s queues", o.name), func() bool { return p.queued() == i-workers+1 })
	}
	for len(running) > 0 {
		next := running[0]
		running = running[1:]
		close(finish[next])
		if len(order) < len(ops) {
			name := <-started
			order, running = append(order, name), append(running, name)
		}
	}
	wg.Wait()
	if !p.idle(workers) {
		t.Errorf("the pool keeps state after every operation ended: %+v", p)
	}
	return order
}

func names(ops []fakeOp) []string {
	out := make([]string, len(ops))
	for i, o := range ops {
		out[i] = o.name
	}
	return out
}

// flood is n operations of one caller.
func flood(prefix, tenant, caller string, cost int64, n int) []fakeOp {
	out := make([]fakeOp, n)
	for i := range out {
		out[i] = fakeOp{name: fmt.Sprintf("%s%d", prefix, i+1), tenant: tenant, caller: caller, cost: cost}
	}
	return out
}

// TestFairOrder: the order in which queued operations get a worker. A FIFO
// would serve them in the order given (the "fifo" column); the pool serves
// a newcomer after at most the operations in progress, alternates between
// flooding tenants and between the callers of one tenant, and shares by
// cost.
func TestFairOrder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		workers int
		ops     []fakeOp
		want    []string
	}{
		{"a newcomer goes before a flood", 1,
			append(flood("a", "A", "x", 10, 6), fakeOp{"b1", "B", "y", 10}),
			[]string{"a1", "b1", "a2", "a3", "a4", "a5", "a6"}},
		{"a newcomer waits for one of two workers", 2,
			append(flood("a", "A", "x", 10, 6), fakeOp{"b1", "B", "y", 10}),
			[]string{"a1", "a2", "b1", "a3", "a4", "a5", "a6"}},
		{"two floods alternate", 1,
			append(flood("a", "A", "x", 10, 4), flood("b", "B", "y", 10, 4)...),
			[]string{"a1", "b1", "a2", "b2", "a3", "b3", "a4", "b4"}},
		{"shares follow cost", 1,
			append(flood("a", "A", "x", 30, 3), flood("b", "B", "y", 10, 6)...),
			[]string{"a1", "b1", "b2", "b3", "a2", "b4", "b5", "b6", "a3"}},
		{"callers of one tenant alternate, below the tenants", 1,
			append(append(flood("a", "A", "x", 10, 4), fakeOp{"z1", "A", "z", 10}), fakeOp{"b1", "B", "y", 10}),
			[]string{"a1", "b1", "z1", "a2", "a3", "a4"}},
		{"a tenant's many callers get one tenant's share", 1,
			append(append(flood("p", "A", "p", 10, 2), flood("q", "A", "q", 10, 2)...), flood("b", "B", "y", 10, 3)...),
			[]string{"p1", "b1", "q1", "b2", "p2", "b3", "q2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := serviceOrder(t, tc.workers, tc.ops)
			if !slices.Equal(got, tc.want) {
				t.Errorf("served %v, want %v (fifo: %v)", got, tc.want, names(tc.ops))
			}
		})
	}
}

// TestPoolQueueBounds: a caller or tenant at its bound is refused with
// ErrBusy at once; other callers and tenants are not.
func TestPoolQueueBounds(t *testing.T) {
	p := newPool(1, 3, 2)
	var held []ticket
	take := func(tenant, caller string) error {
		tk, err := p.enter(Caller{tenant, caller})
		if err == nil {
			held = append(held, tk)
		}
		return err
	}
	for _, tc := range []struct {
		tenant, caller string
		busy           bool
	}{
		{"A", "x", false},
		{"A", "x", false},
		{"A", "x", true}, // caller x at 2
		{"A", "y", false},
		{"A", "z", true}, // tenant A at 3
		{"B", "x", false},
		{"B", "x", false},
		{"B", "y", false},
	} {
		err := take(tc.tenant, tc.caller)
		if got := err != nil; got != tc.busy {
			t.Fatalf("%s/%s: busy %v, want %v (%v)", tc.tenant, tc.caller, got, tc.busy, err)
		}
		if tc.busy {
			wantReason(t, err, ReasonBusy)
		}
	}
	held[0].leave()
	if err := take("A", "z"); err != nil {
		t.Fatalf("a place freed in A is not taken: %v", err)
	}
	for _, tk := range held[1:] {
		tk.leave()
	}
	if !p.idle(1) {
		t.Errorf("flows kept after every ticket left: %d tenants", len(p.tenants.flows))
	}
}

// TestPoolCancel: an operation whose context ends while it waits leaves the
// queue (ErrCanceled) and the others are served as if it had never come.
func TestPoolCancel(t *testing.T) {
	p := newPool(1, 10, 10)
	hold, err := p.enter(Caller{"A", "x"})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.acquire(ctx, &hold, 1); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	gone := make(chan error)
	go func() {
		tk, _ := p.enter(Caller{"B", "y"})
		err := p.acquire(cctx, &tk, 1)
		tk.leave()
		gone <- err
	}()
	served := make(chan error)
	go func() {
		waitFor(t, "B queues", func() bool { return p.queued() == 1 })
		tk, _ := p.enter(Caller{"C", "z"})
		err := p.acquire(ctx, &tk, 1)
		if err == nil {
			p.release()
		}
		tk.leave()
		served <- err
	}()
	waitFor(t, "B and C queue", func() bool { return p.queued() == 2 })
	cancel()
	wantReason(t, <-gone, ReasonCanceled)
	if p.queued() != 1 {
		t.Fatalf("%d waiting after B gave up, want 1", p.queued())
	}
	p.release()
	hold.leave()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if !p.idle(1) {
		t.Error("the pool keeps state")
	}
	// An ended context is not queued at all.
	tk, _ := p.enter(Caller{"A", "x"})
	if err := p.acquire(ctx, &tk, 1); err != nil {
		t.Fatal(err)
	}
	tk2, _ := p.enter(Caller{"A", "x"})
	wantReason(t, p.acquire(cctx, &tk2, 1), ReasonCanceled)
	tk2.leave()
	p.release()
	tk.leave()
	if !p.idle(1) {
		t.Error("the pool keeps state")
	}
}

// TestPoolConcurrent: many callers acquiring, giving up and releasing at
// once (run with -race) never hold more workers than there are, and leave
// the pool as it started.
func TestPoolConcurrent(t *testing.T) {
	const workers = 3
	p := newPool(workers, 8, 4)
	var (
		mu      sync.Mutex
		running int
		wg      sync.WaitGroup
	)
	for g := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 200 {
				tk, err := p.enter(Caller{fmt.Sprint("t", r.IntN(3)), fmt.Sprint("c", r.IntN(3))})
				if err != nil {
					continue
				}
				cctx, cancel := context.WithCancel(ctx)
				if r.IntN(4) == 0 {
					cancel()
				}
				for range 1 + r.IntN(3) {
					if p.acquire(cctx, &tk, int64(1+r.IntN(50))) != nil {
						continue
					}
					mu.Lock()
					running++
					if running > workers {
						t.Errorf("%d running on %d workers", running, workers)
					}
					mu.Unlock()
					time.Sleep(time.Duration(r.IntN(20)) * time.Microsecond)
					mu.Lock()
					running--
					mu.Unlock()
					p.release()
				}
				cancel()
				tk.leave()
			}
		}()
	}
	wg.Wait()
	if !p.idle(workers) {
		t.Error("the pool keeps state after every caller left")
	}
}

// TestEngineBusy: an engine's pooled operations are refused ErrBusy when
// their caller or tenant is at its bound, wait otherwise, and give up when
// their context ends.
func TestEngineBusy(t *testing.T) {
	e := New(Options{Rand: seededRand(5), PrivateKeyWorkers: 1, TenantQueue: 2, CallerQueue: 1})
	k := newKey(t, e, RSA2048, CreateOptions{})
	aes := newKey(t, e, AES256GCM96, CreateOptions{})
	ct := must[Result](t)(e.Encrypt(ctx, k, []byte("m"), EncryptOptions{}))          // the first operation started
	sig := must[SignResult](t)(e.Sign(ctx, k, []byte("m"), SignOptions{})).Signature // the second
	x, y, z := Caller{"A", "x"}, Caller{"A", "y"}, Caller{"A", "z"}
	g, err := e.work(ctx, nil, x, 1) // x holds the worker
	if err != nil {
		t.Fatal(err)
	}
	for name, op := range map[string]func() error{
		"sign":    func() error { _, err := e.Sign(ctx, k, []byte("m"), SignOptions{Caller: x}); return err },
		"decrypt": func() error { _, err := e.Decrypt(ctx, k, ct.Text, DecryptOptions{Caller: x}); return err },
		"verify":  func() error { _, err := e.Verify(ctx, k, []byte("m"), sig, SignOptions{Caller: x}); return err },
		"encrypt": func() error { _, err := e.Encrypt(ctx, k, []byte("m"), EncryptOptions{Caller: x}); return err },
		"datakey": func() error { _, err := e.DataKey(ctx, k, 128, true, EncryptOptions{Caller: x}); return err },
		"verify batch": func() error {
			_, err := e.VerifyBatch(ctx, k, []VerifyItem{{Input: []byte("m"), Signature: []byte(sig)}}, SignOptions{Caller: x})
			return err
		},
		"encrypt batch": func() error {
			_, err := e.EncryptBatch(ctx, k, []EncryptItem{{Plaintext: []byte("m")}}, x)
			return err
		},
	} {
		if err := op(); ReasonOf(err) != ReasonBusy {
			t.Errorf("%s of a caller at its bound: %v, want busy", name, err)
		}
	}
	// An AES encryption takes no worker: nothing bounds it.
	if _, err := e.Encrypt(ctx, aes, []byte("m"), EncryptOptions{Caller: x}); err != nil {
		t.Errorf("aes encryption of a caller at its bound: %v", err)
	}
	if _, err := e.EncryptBatch(ctx, aes, []EncryptItem{{Plaintext: []byte("m")}}, x); err != nil {
		t.Errorf("aes encryption batch of a caller at its bound: %v", err)
	}
	queued := make(chan error, 2)
	go func() { _, err := e.Sign(ctx, k, []byte("m"), SignOptions{Caller: y}); queued <- err }()
	waitFor(t, "y queues", func() bool { return e.pool.queued() == 1 })
	_, err = e.Sign(ctx, k, []byte("m"), SignOptions{Caller: z}) // A holds 2
	wantReason(t, err, ReasonBusy)
	go func() { _, err := e.Decrypt(ctx, k, ct.Text, DecryptOptions{Caller: Caller{"B", "x"}}); queued <- err }()
	waitFor(t, "B queues", func() bool { return e.pool.queued() == 2 })
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = e.Sign(canceled, k, []byte("m"), SignOptions{Caller: Caller{"C", "x"}})
	wantReason(t, err, ReasonCanceled)
	if s, want := e.PrivateKeyStats(), (PrivateKeyStats{Workers: 1, Running: 1, Waiting: 2, Started: 3}); s != want {
		t.Errorf("stats %+v, want %+v", s, want)
	}
	_, err = e.SignBatch(ctx, k, []SignItem{{Input: []byte("m")}}, SignOptions{Caller: x})
	wantReason(t, err, ReasonBusy)
	g.done()
	for range 2 {
		if err := <-queued; err != nil {
			t.Fatal(err)
		}
	}
	if !e.pool.idle(1) {
		t.Error("the pool keeps state")
	}
	if s, want := e.PrivateKeyStats(), (PrivateKeyStats{Workers: 1, Started: 5}); s != want {
		t.Errorf("stats %+v, want %+v", s, want)
	}
}

// TestSignAllocations: taking a worker allocates nothing when one is free:
// an ed25519 signature allocates what it did before signing went through
// the pool (the signature, once), and a verification what it did before
// verifying did, for a caller seen before or a new one.
func TestSignAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are checked without -race (.ci/run runs them)")
	}
	e := New(Options{})
	k := newKey(t, e, Ed25519, CreateOptions{})
	dst, msg := make([]byte, 0, 256), []byte("m")
	callers := []Caller{{"A", "x"}, {"B", "y"}, {"C", "z"}}
	i := 0
	n := testing.AllocsPerRun(200, func() {
		i++
		if _, _, err := e.AppendSign(ctx, dst[:0], k, msg, SignOptions{Caller: callers[i%len(callers)]}); err != nil {
			t.Fatal(err)
		}
	})
	if n > 1 {
		t.Errorf("an ed25519 signature allocates %.0f objects, want at most 1", n)
	}
	// Verification allocates what it did before it went through the pool:
	// the decoded signature and what crypto/ed25519 allocates.
	sig := []byte(must[SignResult](t)(e.Sign(ctx, k, msg, SignOptions{})).Signature)
	n = testing.AllocsPerRun(200, func() {
		i++
		if _, err := e.VerifyBytes(ctx, k, msg, sig, SignOptions{Caller: callers[i%len(callers)]}); err != nil {
			t.Fatal(err)
		}
	})
	if n > 3 {
		t.Errorf("an ed25519 verification allocates %.0f objects, want at most 3", n)
	}
}

// waitingCosts returns the costs of who's operations waiting for a worker.
func (p *pool) waitingCosts(who Caller) []int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.tenants.flows[who.Tenant]
	if t == nil || t.callers.flows[who.Principal] == nil {
		return nil
	}
	var out []int64
	for _, w := range t.callers.flows[who.Principal].waiters {
		out = append(out, w.cost)
	}
	return out
}

// TestGenerateOnPool: making an asymmetric key, or a new version of one,
// waits for a worker in its caller's turn, charged its type's generation
// cost, and gives up when its context ends; a symmetric key is made at
// once, the workers all busy.
func TestGenerateOnPool(t *testing.T) {
	e := New(Options{PrivateKeyWorkers: 1})
	who := Caller{"B", "admin"}
	for _, tc := range []struct {
		typ   KeyType
		waits bool
	}{{AES256GCM96, false}, {ChaCha20Poly1305, false}, {HMAC, false}, {Ed25519, true}, {ECDSAP256, true}, {ECDSAP521, true}, {RSA2048, true}} {
		k := newKey(t, e, tc.typ, CreateOptions{}) // made with the worker free
		for _, g := range []struct {
			name string
			run  func(context.Context) error
		}{
			{"create", func(ctx context.Context) error {
				_, err := e.CreateKey(ctx, "k", CreateOptions{Type: tc.typ, Caller: who})
				return err
			}},
			{"rotate", func(ctx context.Context) error {
				nk, err := e.Rotate(ctx, k, who)
				if err == nil && nk.LatestVersion() != 2 {
					return fmt.Errorf("rotated to version %d", nk.LatestVersion())
				}
				return err
			}},
		} {
			t.Run(tc.typ.String()+"/"+g.name, func(t *testing.T) {
				held, err := e.work(ctx, nil, Caller{"A", "x"}, 1)
				if err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				wctx, cancel := context.WithTimeout(ctx, time.Minute)
				defer cancel()
				go func() { done <- g.run(wctx) }()
				if !tc.waits {
					if err := <-done; err != nil {
						t.Fatal(err)
					}
					if n := e.pool.queued(); n != 0 {
						t.Errorf("%d operations waited", n)
					}
					held.done()
					return
				}
				waitFor(t, "the generation queues", func() bool { return e.pool.queued() == 1 })
				if got, want := e.pool.waitingCosts(who), costs[tc.typ][opGenerate]; len(got) != 1 || got[0] != want {
					t.Errorf("waits as %v, want one operation of %s's generation cost %d", got, who, want)
				}
				held.done()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				// Given up: a context that ends while it waits.
				held, _ = e.work(ctx, nil, Caller{"A", "x"}, 1)
				cctx, cancel := context.WithCancel(ctx)
				go func() { done <- g.run(cctx) }()
				waitFor(t, "the generation queues again", func() bool { return e.pool.queued() == 1 })
				cancel()
				wantReason(t, <-done, ReasonCanceled)
				held.done()
			})
		}
	}
	if !e.pool.idle(1) {
		t.Error("the pool keeps state")
	}
}

// TestFloodOrder: floods of verifications and RSA encryptions queue behind
// themselves as floods of signatures do. The one worker is held by an
// operation of tenant A's; A's flood (a batch, whose items wait
// BatchWorkers at a time, or many single operations) queues, and then a
// single operation of tenant B's. When the worker is freed, B's operation
// is the first to get it and all of A's follow: B waits for the operation
// in progress and nothing else. First come first served, it would wait
// for every item of A's queued before it. An AES encryption of B's takes
// no worker: it is done while the worker is still held.
func TestFloodOrder(t *testing.T) {
	const batchWorkers = 3
	e := New(Options{PrivateKeyWorkers: 1, BatchWorkers: batchWorkers})
	msg := []byte("m")
	type fn = func(Caller) error
	verifyOne := func(typ KeyType) fn {
		k := newKey(t, e, typ, CreateOptions{})
		sig := must[SignResult](t)(e.Sign(ctx, k, msg, SignOptions{})).Signature
		return func(who Caller) error {
			r, err := e.Verify(ctx, k, msg, sig, SignOptions{Caller: who})
			if err == nil && !r.Valid {
				err = fmt.Errorf("%v signature does not verify", typ)
			}
			return err
		}
	}
	verifyBatch := func(typ KeyType, n int) fn {
		k := newKey(t, e, typ, CreateOptions{})
		sig := must[SignResult](t)(e.Sign(ctx, k, msg, SignOptions{})).Signature
		items := slices.Repeat([]VerifyItem{{Input: msg, Signature: []byte(sig)}}, n)
		return func(who Caller) error {
			res, err := e.VerifyBatch(ctx, k, items, SignOptions{Caller: who})
			for i := 0; err == nil && i < len(res); i++ {
				if err = res[i].Err; err == nil && !res[i].Valid {
					err = fmt.Errorf("%v item %d does not verify", typ, i)
				}
			}
			return err
		}
	}
	encryptOne := func(typ KeyType) fn {
		k := newKey(t, e, typ, CreateOptions{})
		return func(who Caller) error {
			_, err := e.Encrypt(ctx, k, msg, EncryptOptions{Caller: who})
			return err
		}
	}
	encryptBatch := func(typ KeyType, n int) fn {
		k := newKey(t, e, typ, CreateOptions{})
		items := slices.Repeat([]EncryptItem{{Plaintext: msg}}, n)
		return func(who Caller) error {
			res, err := e.EncryptBatch(ctx, k, items, who)
			for i := 0; err == nil && i < len(res); i++ {
				err = res[i].Err
			}
			return err
		}
	}
	singles := func(n int, one fn) fn {
		return func(who Caller) error {
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() { errs[i] = one(who) })
			}
			wg.Wait()
			return errors.Join(errs...)
		}
	}
	aes := encryptOne(AES256GCM96)
	a, b := Caller{"A", "flood"}, Caller{"B", "single"}
	for _, tc := range []struct {
		name    string
		flood   fn
		waiting int // flood operations waiting at once
		items   int // flood operations in all
		probe   fn
	}{
		{"ed25519 verify batch / ed25519 verify", verifyBatch(Ed25519, 60), batchWorkers, 60, verifyOne(Ed25519)},
		{"ecdsa-p521 verify batch / ecdsa-p256 verify", verifyBatch(ECDSAP521, 20), batchWorkers, 20, verifyOne(ECDSAP256)},
		{"rsa-2048 verify batch / rsa-3072 verify", verifyBatch(RSA2048, 40), batchWorkers, 40, verifyOne(RSA3072)},
		{"rsa-4096 encrypt batch / rsa-2048 encrypt", encryptBatch(RSA4096, 30), batchWorkers, 30, encryptOne(RSA2048)},
		{"rsa-2048 encryptions / rsa-4096 encrypt", singles(8, encryptOne(RSA2048)), 8, 8, encryptOne(RSA4096)},
		{"ecdsa-p384 verifications / ed25519 verify", singles(8, verifyOne(ECDSAP384)), 8, 8, verifyOne(Ed25519)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				mu    sync.Mutex
				order []string
			)
			granted = func(tenant, _ string) { mu.Lock(); order = append(order, tenant); mu.Unlock() }
			t.Cleanup(func() { granted = nil })
			held, err := e.work(ctx, nil, a, 1)
			if err != nil {
				t.Fatal(err)
			}
			flooded, probed := make(chan error, 1), make(chan error, 1)
			go func() { flooded <- tc.flood(a) }()
			waitFor(t, "A's flood queues", func() bool { return e.pool.queued() == tc.waiting })
			go func() { probed <- tc.probe(b) }()
			waitFor(t, "B's operation queues", func() bool { return e.pool.queued() == tc.waiting+1 })
			if err := aes(b); err != nil {
				t.Errorf("B's aes encryption, the worker held: %v", err)
			}
			held.done()
			if err := <-probed; err != nil {
				t.Errorf("B's operation: %v", err)
			}
			if err := <-flooded; err != nil {
				t.Errorf("A's flood: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			want := append([]string{"A", "B"}, slices.Repeat([]string{"A"}, tc.items)...)
			if !slices.Equal(order, want) {
				t.Errorf("workers went to %v, want A's operation in progress, then B's, then A's %d", order, tc.items)
			}
		})
	}
	if !e.pool.idle(1) {
		t.Error("the pool keeps state")
	}
}

// Waits is true exactly for the keys whose encryption or decryption takes
// a worker in the caller's turn: the handler learns the caller only for
// those, so a key that waits without saying so would be served in no
// caller's turn.
func TestKeyWaits(t *testing.T) {
	e := testEngine(t)
	for _, tc := range []struct {
		typ   KeyType
		waits bool
	}{{AES128GCM96, false}, {AES256GCM96, false}, {ChaCha20Poly1305, false}, {RSA2048, true}, {RSA3072, true}, {RSA4096, true}} {
		k := newKey(t, e, tc.typ, CreateOptions{})
		if got := k.Waits(); got != tc.waits {
			t.Errorf("%s: Waits() = %v, want %v", tc.typ, got, tc.waits)
		}
	}
}
