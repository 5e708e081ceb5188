package totp

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/secrets"
)

// memStore is the part of the secret store Keys uses, in memory: the
// latest version of each path, with check-and-set.
type memStore struct {
	mu   sync.Mutex
	data map[string]json.RawMessage
	ver  map[string]int
}

func newMemStore() *memStore {
	return &memStore{data: map[string]json.RawMessage{}, ver: map[string]int{}}
}

func (m *memStore) Read(_ context.Context, tenant, path string, _ int) (*secrets.Secret, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.data[tenant+"|"+path]
	if !ok {
		return nil, secrets.ErrNotFound
	}
	return &secrets.Secret{Data: d, Meta: secrets.VersionMeta{Version: m.ver[tenant+"|"+path]}}, nil
}

func (m *memStore) Write(_ context.Context, tenant, path string, data json.RawMessage, cas *int) (secrets.Written, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := tenant + "|" + path
	if cas != nil && *cas != m.ver[k] {
		return secrets.Written{}, secrets.ErrCASMismatch
	}
	m.ver[k]++
	m.data[k] = data
	return secrets.Written{VersionMeta: secrets.VersionMeta{Version: m.ver[k]}}, nil
}

func (m *memStore) SetMetadata(context.Context, string, string, secrets.MetadataUpdate) error {
	return nil
}

func (m *memStore) DeleteMetadata(_ context.Context, tenant, path string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.data, tenant+"|"+path)
	delete(m.ver, tenant+"|"+path)
	return nil
}

func (m *memStore) List(_ context.Context, tenant, prefix string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for k := range m.data {
		if rest, ok := strings.CutPrefix(k, tenant+"|"+prefix); ok {
			out = append(out, rest)
		}
	}
	if len(out) == 0 {
		return nil, secrets.ErrNotFound
	}
	slices.Sort(out)
	return out, nil
}

func TestKeys(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_700_000_000, 0)
	ks := NewKeys(newMemStore(), "@totp/", func() time.Time { return now })
	out, err := ks.Create(ctx, "acme", "ana", CreateRequest{Generate: true, Exported: true, QRSize: 200, Issuer: "Acme", AccountName: "ana@acme.example"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.URL, "otpauth://totp/Acme:ana@acme.example?") || len(out.Barcode) == 0 {
		t.Errorf("created %q with a %d-byte barcode", out.URL, len(out.Barcode))
	}
	info, err := ks.Read(ctx, "acme", "ana")
	if err != nil || info.Issuer != "Acme" || info.Algorithm != "SHA1" || info.Digits != 6 || info.Period != 30*time.Second {
		t.Errorf("read %+v, %v", info, err)
	}
	if _, err := ks.Read(ctx, "other", "ana"); !errors.Is(err, ErrNotFound) {
		t.Errorf("another tenant's read: %v", err)
	}
	k, _ := ParseURL(out.URL)
	code := k.Code(now)
	if got, _ := ks.Code(ctx, "acme", "ana"); got != code {
		t.Errorf("code %s, the URL's key gives %s", got, code)
	}
	for _, c := range []struct {
		name string
		code string
		at   time.Time
		ok   bool
		err  error
	}{
		{"wrong", strings.Repeat("0", 6), now, false, nil},
		{"right", code, now, true, nil},
		{"replayed", code, now, false, ErrUsed},
		{"the step before, afterwards", k.Code(now.Add(-30 * time.Second)), now, false, ErrUsed},
		{"the next step", k.Code(now.Add(30 * time.Second)), now.Add(30 * time.Second), true, nil},
		{"empty", "", now, false, ErrInvalid},
	} {
		now = c.at
		if c.name == "wrong" && c.code == code {
			continue
		}
		ok, err := ks.Validate(ctx, "acme", "ana", c.code)
		if ok != c.ok || !errors.Is(err, c.err) {
			t.Errorf("%s: %v, %v; want %v, %v", c.name, ok, err, c.ok, c.err)
		}
	}
	if names, err := ks.List(ctx, "acme"); err != nil || !slices.Equal(names, []string{"ana"}) {
		t.Errorf("list %v, %v", names, err)
	}
	if names, err := ks.List(ctx, "empty"); err != nil || len(names) != 0 {
		t.Errorf("an empty tenant's list %v, %v", names, err)
	}
	if err := ks.Delete(ctx, "acme", "ana"); err != nil {
		t.Fatal(err)
	}
	if _, err := ks.Code(ctx, "acme", "ana"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a deleted key's code: %v", err)
	}
}

func TestKeysCreate(t *testing.T) {
	ctx := context.Background()
	ks := NewKeys(newMemStore(), "@totp/", nil)
	zero := 0
	for _, c := range []struct {
		name string
		req  CreateRequest
		err  string
	}{
		{"url", CreateRequest{URL: "otpauth://totp/Example:alice?secret=JBSWY3DPEHPK3PXP&issuer=Example&digits=8"}, ""},
		{"key", CreateRequest{Key: "jbswy3dpehpk3pxp", Skew: &zero, Algorithm: "SHA256"}, ""},
		{"generated, not exported", CreateRequest{Generate: true, Issuer: "a", AccountName: "b"}, ""},
		{"generate with a key", CreateRequest{Generate: true, Key: "JBSWY3DPEHPK3PXP", Issuer: "a", AccountName: "b"}, "not passed when generate"},
		{"generate without issuer", CreateRequest{Generate: true, AccountName: "b"}, "issuer and account_name values are required"},
		{"no key", CreateRequest{}, "the key value is required"},
		{"bad key", CreateRequest{Key: "1!"}, "not base32"},
		{"bad digits", CreateRequest{Key: "JBSWY3DPEHPK3PXP", Digits: 7}, "digits must be 6 or 8"},
		{"negative qr", CreateRequest{Generate: true, Issuer: "a", AccountName: "b", QRSize: -1}, "qr_size"},
	} {
		out, err := ks.Create(ctx, "t", "k", c.req)
		if c.err == "" {
			if err != nil || out != nil {
				t.Errorf("%s: %+v, %v", c.name, out, err)
			}
			continue
		}
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %v, want %q", c.name, err, c.err)
		}
	}
	for _, name := range []string{"", "-a", "a-", ".a", "a b", "a/b", strings.Repeat("a", 129)} {
		if _, err := ks.Create(ctx, "t", name, CreateRequest{Key: "JBSWY3DPEHPK3PXP"}); !errors.Is(err, ErrInvalid) {
			t.Errorf("name %q: %v", name, err)
		}
	}
	for _, name := range []string{"a", "a-b.c@d", "_x_", "A9"} {
		if err := ValidName(name); err != nil {
			t.Errorf("name %q: %v", name, err)
		}
	}
}

// Two nodes checking the same code at once: one accepts it, the other
// finds it used.
func TestKeysValidateRace(t *testing.T) {
	ctx := context.Background()
	store := newMemStore()
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	a, b := NewKeys(store, "@totp/", clock), NewKeys(store, "@totp/", clock)
	if _, err := a.Create(ctx, "t", "k", CreateRequest{Key: "JBSWY3DPEHPK3PXPJBSWY3DP"}); err != nil {
		t.Fatal(err)
	}
	code, _ := a.Code(ctx, "t", "k")
	for round := range 50 {
		now = now.Add(30 * time.Second)
		code, _ = a.Code(ctx, "t", "k")
		var wg sync.WaitGroup
		results := make([]error, 2)
		oks := make([]bool, 2)
		for i, ks := range []*Keys{a, b} {
			wg.Go(func() { oks[i], results[i] = ks.Validate(ctx, "t", "k", code) })
		}
		wg.Wait()
		if oks[0] == oks[1] || !errors.Is(results[0], ErrUsed) && !errors.Is(results[1], ErrUsed) {
			t.Fatalf("round %d: %v %v, %v %v: want exactly one acceptance", round, oks[0], results[0], oks[1], results[1])
		}
	}
}

// A flood of wrong codes for one key is cut off after MaxFailures in a
// time step, even for the right code; the next step takes codes again, and
// another key is not affected.
func TestKeysFailureLimit(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_700_000_010, 0)
	ks := NewKeys(newMemStore(), "@totp/", func() time.Time { return now })
	for _, name := range []string{"a", "b"} {
		if _, err := ks.Create(ctx, "t", name, CreateRequest{Key: "JBSWY3DPEHPK3PXPJBSWY3DP", Skew: new(int)}); err != nil {
			t.Fatal(err)
		}
	}
	right, _ := ks.Code(ctx, "t", "a")
	wrong := "000000"
	if wrong == right {
		wrong = "111111"
	}
	for i := range MaxFailures {
		if ok, err := ks.Validate(ctx, "t", "a", wrong); ok || err != nil {
			t.Fatalf("wrong code %d: %v, %v", i, ok, err)
		}
	}
	if ok, err := ks.Validate(ctx, "t", "a", right); ok || !errors.Is(err, ErrTooMany) {
		t.Errorf("the right code after %d wrong ones: %v, %v; want ErrTooMany", MaxFailures, ok, err)
	}
	if ok, err := ks.Validate(ctx, "t", "b", right); !ok || err != nil {
		t.Errorf("another key: %v, %v", ok, err)
	}
	now = now.Add(30 * time.Second)
	right, _ = ks.Code(ctx, "t", "a")
	if ok, err := ks.Validate(ctx, "t", "a", right); !ok || err != nil {
		t.Errorf("the next step's code: %v, %v", ok, err)
	}
}

// A key that keeps earning lockouts is locked for twice as long each time,
// up to MaxLockout, so a steady guesser gets MaxFailures tries an hour; a
// right code ends the history, and a long quiet forgets it.
func TestKeysLockoutGrows(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_700_000_010, 0)
	ks := NewKeys(newMemStore(), "@totp/", func() time.Time { return now })
	if _, err := ks.Create(ctx, "t", "a", CreateRequest{Key: "JBSWY3DPEHPK3PXPJBSWY3DP", Skew: new(int)}); err != nil {
		t.Fatal(err)
	}
	codes := func() (right, wrong string) {
		right, _ = ks.Code(ctx, "t", "a")
		wrong = "000000"
		if wrong == right {
			wrong = "111111"
		}
		return right, wrong
	}
	flood := func(round int) {
		t.Helper()
		_, wrong := codes()
		for i := range MaxFailures {
			if ok, err := ks.Validate(ctx, "t", "a", wrong); ok || err != nil {
				t.Fatalf("round %d, wrong code %d: %v, %v", round, i, ok, err)
			}
		}
	}
	refusedFor := func(round int, d time.Duration) {
		t.Helper()
		now = now.Add(d - time.Second)
		right, _ := codes()
		if ok, err := ks.Validate(ctx, "t", "a", right); ok || !errors.Is(err, ErrTooMany) {
			t.Fatalf("round %d: the right code %v into a %v lockout: %v, %v; want ErrTooMany", round, d-time.Second, d, ok, err)
		}
		now = now.Add(time.Second)
	}
	want := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute,
		16 * time.Minute, 32 * time.Minute, time.Hour, time.Hour}
	for round, d := range want {
		flood(round)
		refusedFor(round, d)
	}
	right, _ := codes()
	if ok, err := ks.Validate(ctx, "t", "a", right); !ok || err != nil {
		t.Fatalf("the right code once the lockout ended: %v, %v", ok, err)
	}
	// Forgiven: the next lockout is one period again.
	now = now.Add(30 * time.Second)
	flood(len(want))
	refusedFor(len(want), 30*time.Second)
	right, _ = codes()
	if ok, err := ks.Validate(ctx, "t", "a", right); !ok || err != nil {
		t.Fatalf("after a one-period lockout: %v, %v", ok, err)
	}
	// Forgotten after a quiet MaxLockout: locked again, once is one period.
	flood(len(want) + 1)
	now = now.Add(30*time.Second + MaxLockout + time.Second)
	flood(len(want) + 2)
	refusedFor(len(want)+2, 30*time.Second)
	if ok, err := ks.Validate(ctx, "t", "a", func() string { r, _ := codes(); return r }()); !ok || err != nil {
		t.Fatalf("after the forgotten key's lockout: %v, %v", ok, err)
	}
}

// barrierStore holds every Read until n are waiting, so that n Validates
// of one key all have their key in hand before any of them checks a code.
type barrierStore struct {
	*memStore
	arrive sync.WaitGroup
}

func (b *barrierStore) Read(ctx context.Context, tenant, path string, v int) (*secrets.Secret, error) {
	b.arrive.Done()
	b.arrive.Wait()
	return b.memStore.Read(ctx, tenant, path, v)
}

// Concurrent wrong codes for one key get MaxFailures checks in all, not
// one each: a flood sent at once must not pass the lockout's test before
// any of its failures is counted.
func TestKeysConcurrentFlood(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_700_000_010, 0)
	mem := newMemStore()
	ks := NewKeys(mem, "@totp/", func() time.Time { return now })
	if _, err := ks.Create(ctx, "t", "a", CreateRequest{Key: "JBSWY3DPEHPK3PXPJBSWY3DP", Skew: new(int)}); err != nil {
		t.Fatal(err)
	}
	right, _ := ks.Code(ctx, "t", "a")
	wrong := "000000"
	if wrong == right {
		wrong = "111111"
	}
	const n = 40
	bs := &barrierStore{memStore: mem}
	bs.arrive.Add(n)
	ks.store = bs
	var checked, refused atomic.Int32
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			switch ok, err := ks.Validate(ctx, "t", "a", wrong); {
			case ok:
				t.Error("a wrong code was accepted")
			case err == nil:
				checked.Add(1)
			case errors.Is(err, ErrTooMany):
				refused.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if c := checked.Load(); c > MaxFailures || refused.Load() != n-c {
		t.Errorf("%d concurrent wrong codes: %d checked, %d refused; want at most %d checked", n, c, refused.Load(), MaxFailures)
	}
}
