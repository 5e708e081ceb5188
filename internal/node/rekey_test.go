package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/rootkey"
	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/store/snapshot"
	"github.com/keygate/keygate/internal/store/sqlite"
	"github.com/keygate/keygate/internal/testnet"
)

// rekeyRig is a data directory and the root key files of a rotation.
type rekeyRig struct {
	t              *testing.T
	dir            string
	oldKey, newKey string // key files
	ts             config.TokenService
}

func newRekeyRig(t *testing.T, ts config.TokenService) *rekeyRig {
	dir := t.TempDir()
	r := &rekeyRig{t: t, dir: dir, oldKey: filepath.Join(dir, "old.key"), newKey: filepath.Join(dir, "new.key"), ts: ts}
	for _, f := range []string{r.oldKey, r.newKey} {
		if err := rootkey.GenerateKeyFile(f, nil); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// open opens a node on the rig's store with the root key in keyFile and
// runs its schedule until the test ends or the returned stop is called.
func (r *rekeyRig) open(name, keyFile string) (*Node, func()) {
	r.t.Helper()
	ts := r.ts
	ts.RootKeyFile = keyFile
	n, err := Open(r.t.Context(), Config{DataDir: filepath.Join(r.dir, name), Issuer: "https://keygate.test", Audience: "api", TokenService: ts})
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); n.Run(ctx) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done; n.Close() }) }
	r.t.Cleanup(stop)
	return n, stop
}

func loadKey(t *testing.T, path string) rootkey.Key {
	t.Helper()
	k, err := rootkey.LoadKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Destroy)
	return k
}

// tenantValues gives count tenants a data key each and seals a value
// under it; check opens every value again through the node's data keys.
func tenantValues(t *testing.T, n *Node, count int) (check func(n *Node) error) {
	t.Helper()
	ctx := t.Context()
	sealed := map[string][]byte{}
	for i := range count {
		name := fmt.Sprintf("t%03d", i)
		if err := n.Store().CreateTenant(ctx, store.Tenant{Name: name, CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		k, err := n.TenantKeys().Fresh(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if sealed[name], err = k.Seal([]byte("value of "+name), nil); err != nil {
			t.Fatal(err)
		}
	}
	return func(n *Node) error {
		for name, ct := range sealed {
			k, err := n.TenantKeys().Fresh(ctx, name)
			if err != nil {
				return fmt.Errorf("tenant %s: %w", name, err)
			}
			pt, err := k.Open(ct, nil)
			if err != nil || string(pt) != "value of "+name {
				return fmt.Errorf("tenant %s: opened %q, %v", name, pt, err)
			}
		}
		return nil
	}
}

// hammer runs check in a loop on two goroutines until the stop it returns
// is called, which fails t if a round failed and returns how many ran.
func hammer(t *testing.T, during string, check func() error) (stop func() int64) {
	t.Helper()
	var rounds, failures atomic.Int64
	var firstErr atomic.Value
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if err := check(); err != nil && ctx.Err() == nil {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
				rounds.Add(1)
			}
		}()
	}
	return func() int64 {
		t.Helper()
		cancel()
		wg.Wait()
		if n := failures.Load(); n > 0 {
			t.Fatalf("%d rounds failed during %s; the first: %v", n, during, firstErr.Load())
		}
		return rounds.Load()
	}
}

// waitRekey waits until the rotation's state satisfies ok.
func waitRekey(t *testing.T, n *Node, what string, ok func(RekeyStatus) bool) RekeyStatus {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, err := n.RekeyStatus(t.Context())
		if err == nil && ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the rotation is at %+v (%v)", what, st, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sealedUnder reports the root key IDs the store's sealed records are
// under, with how many each.
func sealedUnder(t *testing.T, st store.Store) map[string]int {
	t.Helper()
	out := map[string]int{}
	keys, err := st.ListSigningKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		id, _ := rootkey.CiphertextKeyID(k.Sealed)
		out[id.String()]++
	}
	tenants, err := st.ListTenants(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, tn := range tenants {
		if tn.DataKey != nil {
			id, _ := rootkey.CiphertextKeyID(tn.DataKey)
			out[id.String()]++
		}
	}
	return out
}

// TestRekey: a rotation rewraps every signing key and data key under the
// new root key, keeps every value readable, and then only the new key
// starts a node; the old one is refused with the reason.
func TestRekey(t *testing.T) {
	r := newRekeyRig(t, config.TokenService{})
	n, stop := r.open("a", r.oldKey)
	check := tenantValues(t, n, 20)
	oldK, newK := loadKey(t, r.oldKey), loadKey(t, r.newKey)

	// Refusals first: nothing may be stored for them.
	for _, bad := range []struct {
		name string
		req  RekeyRequest
		want string
	}{
		{"no current key", RekeyRequest{NewKey: newK}, "give the current root key"},
		{"no new key", RekeyRequest{CurrentKey: oldK}, "exactly one"},
		{"the current key again", RekeyRequest{NewKey: oldK, CurrentKey: oldK}, "holds already"},
		{"a passphrase on a key node", RekeyRequest{NewPassphrase: []byte(testPassphrase), CurrentKey: oldK}, "not derived from a passphrase"},
		{"a wrong current key", RekeyRequest{NewKey: newK, CurrentKey: newK}, "not the node's"},
	} {
		var refused *RefusedError
		if _, err := n.StartRekey(t.Context(), bad.req); !errors.As(err, &refused) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want a refusal saying %q", bad.name, err, bad.want)
		}
	}
	if _, err := n.Store().GetRekey(t.Context()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused rotation stored a state: %v", err)
	}

	st, err := n.StartRekey(t.Context(), RekeyRequest{NewKey: newK, CurrentKey: oldK})
	if err != nil {
		t.Fatal(err)
	}
	if st.OldKeyID != oldK.ID().String() || st.NewKeyID != newK.ID().String() || st.State != store.RekeyRewrapping {
		t.Fatalf("started %+v", st)
	}
	if _, err := n.StartRekey(t.Context(), RekeyRequest{NewKey: mustGenerate(t), CurrentKey: newK}); !errors.Is(err, ErrRekeyRunning) {
		t.Errorf("a second rotation meanwhile: %v, want ErrRekeyRunning", err)
	}
	done := waitRekey(t, n, "the rotation", func(s RekeyStatus) bool { return s.State == store.RekeyDone })
	if done.Done != done.Total || done.Total != 21 { // 20 data keys and the signing key
		t.Errorf("rewrapped %d of %d, want 21 of 21", done.Done, done.Total)
	}
	if !slices.Equal(done.Holds, []string{newK.ID().String()}) {
		t.Errorf("the node holds %v, want the new key only", done.Holds)
	}
	if got := sealedUnder(t, n.Store()); len(got) != 1 || got[newK.ID().String()] != 21 {
		t.Errorf("records under %v, want all 21 under the new key", got)
	}
	if err := check(n); err != nil {
		t.Errorf("after the rotation: %v", err)
	}
	// The audit log's checkpoint key follows the root key; the old public
	// key is kept to verify the files it signed.
	if prev, _ := filepath.Glob(filepath.Join(r.dir, "a", "audit-*.pub")); len(prev) != 1 {
		t.Errorf("previous audit keys kept: %v, want one", prev)
	}
	// A node still on the old key (as if it had missed the rotation) may
	// not start another one from it.
	st2, err := n.store.GetRekey(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	stale := st2
	stale.NewKeyID = "0badc0de"
	if err := n.store.PutRekey(t.Context(), stale, st2.Revision); err != nil {
		t.Fatal(err)
	}
	var refused *RefusedError
	if _, err := n.StartRekey(t.Context(), RekeyRequest{NewKey: mustGenerate(t), CurrentKey: newK}); !errors.As(err, &refused) ||
		!strings.Contains(err.Error(), "is not the store's, 0badc0de") {
		t.Errorf("a rotation from a key the store no longer uses: %v", err)
	}
	if err := n.store.PutRekey(t.Context(), st2, st2.Revision+1); err != nil {
		t.Fatal(err)
	}

	stop()

	// The old key no longer starts a node; the new one does, and opens all.
	ts := r.ts
	ts.RootKeyFile = r.oldKey
	_, err = Open(t.Context(), Config{DataDir: filepath.Join(r.dir, "a"), Issuer: "https://keygate.test", Audience: "api", TokenService: ts})
	if err == nil || !strings.Contains(err.Error(), "replaced by "+newK.ID().String()) {
		t.Fatalf("a start with the old key: %v, want a refusal naming the new key", err)
	}
	n2, _ := r.open("a", r.newKey)
	if err := check(n2); err != nil {
		t.Errorf("a node started with the new key: %v", err)
	}
}

// TestRekeyResumes: a rotation interrupted midway (the rewrapping node
// stopped) is carried on by a node started with either key — the old one
// (the file not yet replaced) or the new one (replaced early) — and every
// value opens at every step.
func TestRekeyResumes(t *testing.T) {
	r := newRekeyRig(t, config.TokenService{})
	n, stop := r.open("a", r.oldKey)
	check := tenantValues(t, n, 30)
	if _, err := n.StartRekey(t.Context(), RekeyRequest{NewKey: loadKey(t, r.newKey), CurrentKey: loadKey(t, r.oldKey), Rate: 10}); err != nil {
		t.Fatal(err)
	}
	mid := waitRekey(t, n, "partway", func(s RekeyStatus) bool { return s.Done >= 3 })
	stop()
	if mid.State != store.RekeyRewrapping || mid.Done >= mid.Total {
		t.Fatalf("stopped at %+v, want partway", mid)
	}

	// Started with the old key, the node takes the new one from the state.
	n, stop = r.open("a", r.oldKey)
	if err := check(n); err != nil {
		t.Fatalf("a node on the old key, partway: %v", err)
	}
	st, _ := n.RekeyStatus(t.Context())
	if len(st.Holds) != 2 || st.Holds[0] != st.NewKeyID {
		t.Errorf("a node on the old key holds %v, want the new key current and the old one", st.Holds)
	}
	waitRekey(t, n, "more progress", func(s RekeyStatus) bool { return s.Done > mid.Done })
	stop()

	// Started with the new key, it takes the old one and finishes.
	n, _ = r.open("a", r.newKey)
	if err := check(n); err != nil {
		t.Fatalf("a node on the new key, partway: %v", err)
	}
	done := waitRekey(t, n, "the end", func(s RekeyStatus) bool { return s.State == store.RekeyDone })
	if done.Done != done.Total || done.Total != 31 {
		t.Errorf("rewrapped %d of %d, want 31 of 31", done.Done, done.Total)
	}
	if err := check(n); err != nil {
		t.Errorf("after the rotation: %v", err)
	}
}

// TestRekeyFleet: two nodes on one PostgreSQL store and one Redis. A
// rotation started on a is followed by b within the notice's time, while b
// opens every tenant's values in a loop: not one open fails, from the
// start to the end of the rotation.
func TestRekeyFleet(t *testing.T) {
	base := os.Getenv("DATABASE_URL")
	if base == "" {
		t.Skip("needs PostgreSQL: DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	}
	redisURL, prefix := testnet.RedisPrefix(t)
	r := newRekeyRig(t, config.TokenService{DatabaseURL: testnet.PostgresSchema(t, base, "kgrekey"), RedisURL: redisURL, RedisPrefix: prefix})
	a, _ := r.open("a", r.oldKey)
	b, _ := r.open("b", r.oldKey)
	check := tenantValues(t, a, 40)
	if err := check(b); err != nil {
		t.Fatal(err)
	}

	stop := hammer(t, "the rotation", func() error { return check(b) })
	newK := loadKey(t, r.newKey)
	start := time.Now()
	if _, err := a.StartRekey(t.Context(), RekeyRequest{NewKey: newK, CurrentKey: loadKey(t, r.oldKey), Rate: 200}); err != nil {
		t.Fatal(err)
	}
	var switched time.Duration
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if cur, _ := b.Keyring().Current(); cur == newK.ID() {
			switched = time.Since(start)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("node b did not make the new key current within 10 s")
		}
	}
	waitRekey(t, a, "the rotation", func(s RekeyStatus) bool { return s.State == store.RekeyDone })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if ids, _ := b.Keyring().KeyIDs(); len(ids) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("node b still holds the old key 10 s after the rotation ended")
		}
	}
	rounds := stop()
	t.Logf("node b made the new key current %v after the start; %d rounds of 40 opens during the rotation", switched, rounds)
	if switched > RekeyPoll+time.Second {
		t.Errorf("node b switched after %v, want within %v", switched, RekeyPoll+time.Second)
	}
	if got := sealedUnder(t, a.Store()); len(got) != 1 {
		t.Errorf("records under %v, want all under the new key", got)
	}
}

// TestRekeyPassphrase: a node unsealed by passphrase rotates to a new
// passphrase: the current one must be given (the node cannot read it
// again), its keyring.json is replaced, and afterwards only the new
// passphrase unseals it.
func TestRekeyPassphrase(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	const newPass = "a new and longer passphrase"
	k, err := rootkey.InitPassphrase(filepath.Join(dir, KeyringFile), []byte(testPassphrase), nil)
	if err != nil {
		t.Fatal(err)
	}
	k.Destroy()
	open := func() (*Node, func()) {
		n, err := Open(t.Context(), Config{DataDir: dir, Issuer: "https://keygate.test", Audience: "api"})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); n.Run(ctx) }()
		var once sync.Once
		stop := func() { once.Do(func() { cancel(); <-done; n.Close() }) }
		t.Cleanup(stop)
		return n, stop
	}
	n, stop := open()
	if err := n.Unseal(t.Context(), []byte(testPassphrase)); err != nil {
		t.Fatal(err)
	}
	check := tenantValues(t, n, 5)
	for _, bad := range []struct {
		name string
		req  RekeyRequest
		want string
	}{
		{"no current passphrase", RekeyRequest{NewPassphrase: []byte(newPass)}, "give the current root key"},
		{"a wrong current passphrase", RekeyRequest{NewPassphrase: []byte(newPass), CurrentPassphrase: []byte("not the passphrase at all")}, "wrong current passphrase"},
		{"a key on a passphrase node", RekeyRequest{NewKey: mustGenerate(t), CurrentPassphrase: []byte(testPassphrase)}, "give a new passphrase"},
		{"a short passphrase", RekeyRequest{NewPassphrase: []byte("short"), CurrentPassphrase: []byte(testPassphrase)}, "passphrase"},
	} {
		var refused *RefusedError
		if _, err := n.StartRekey(t.Context(), bad.req); !errors.As(err, &refused) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want a refusal saying %q", bad.name, err, bad.want)
		}
	}
	if _, err := n.StartRekey(t.Context(), RekeyRequest{NewPassphrase: []byte(newPass), CurrentPassphrase: []byte(testPassphrase)}); err != nil {
		t.Fatal(err)
	}
	waitRekey(t, n, "the rotation", func(s RekeyStatus) bool { return s.State == store.RekeyDone })
	stop()

	n, _ = open()
	var refused *RefusedError
	if err := n.Unseal(t.Context(), []byte(testPassphrase)); !errors.As(err, &refused) {
		t.Fatalf("the old passphrase after the rotation: %v, want a refusal", err)
	}
	if err := n.Unseal(t.Context(), []byte(newPass)); err != nil {
		t.Fatalf("the new passphrase: %v", err)
	}
	if err := check(n); err != nil {
		t.Error(err)
	}
}

func mustGenerate(t *testing.T) rootkey.Key {
	t.Helper()
	k, err := rootkey.Generate(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Destroy)
	return k
}

// TestRekeyBackupMidway: a snapshot taken in the middle of a rotation
// holds its state; restored into a new store, a node started there with
// the new key carries the rotation on to its end, and every value opens.
func TestRekeyBackupMidway(t *testing.T) {
	r := newRekeyRig(t, config.TokenService{})
	n, stop := r.open("a", r.oldKey)
	check := tenantValues(t, n, 30)
	if _, err := n.StartRekey(t.Context(), RekeyRequest{NewKey: loadKey(t, r.newKey), CurrentKey: loadKey(t, r.oldKey), Rate: 10}); err != nil {
		t.Fatal(err)
	}
	waitRekey(t, n, "partway", func(s RekeyStatus) bool { return s.Done >= 3 })
	var buf bytes.Buffer
	if err := n.Store().(interface {
		Snapshot(context.Context, io.Writer) error
	}).Snapshot(t.Context(), &buf); err != nil {
		t.Fatal(err)
	}
	stop()
	snap, err := snapshot.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(r.dir, "b"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := sqlite.RestoreFile(t.Context(), filepath.Join(r.dir, "b", StoreFile), snap); err != nil {
		t.Fatal(err)
	}
	b, _ := r.open("b", r.newKey)
	if err := check(b); err != nil {
		t.Fatalf("the restored store, partway: %v", err)
	}
	done := waitRekey(t, b, "the end", func(s RekeyStatus) bool { return s.State == store.RekeyDone })
	if done.Done != done.Total || done.Total != 31 {
		t.Errorf("rewrapped %d of %d, want 31 of 31", done.Done, done.Total)
	}
	if err := check(b); err != nil {
		t.Error(err)
	}
}
