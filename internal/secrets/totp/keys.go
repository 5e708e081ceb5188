package totp

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/keygate/keygate/internal/secrets"
)

// Store is where Keys keeps its keys: the secret store, each key a record
// at Prefix+name, sealed under the tenant's data key like any secret. Its
// check-and-set makes a key's last accepted step one value that every node
// of a fleet agrees on.
type Store interface {
	Read(ctx context.Context, tenant, path string, version int) (*secrets.Secret, error)
	Write(ctx context.Context, tenant, path string, data json.RawMessage, cas *int) (secrets.Written, error)
	SetMetadata(ctx context.Context, tenant, path string, u secrets.MetadataUpdate) error
	DeleteMetadata(ctx context.Context, tenant, path string) error
	List(ctx context.Context, tenant, prefix string) ([]string, error)
}

// Errors of Keys, besides ErrInvalid.
var (
	ErrNotFound = errors.New("unknown key")
	// ErrUsed: the code's step is at or below the last one accepted for
	// the key (Vault: "code already used; wait until the next time period").
	ErrUsed = errors.New("code already used; wait until the next time period")
	// ErrTooMany: MaxFailures wrong codes were sent for the key in one
	// time step, and its lockout has not ended.
	ErrTooMany = errors.New("too many wrong codes; wait before trying again")
)

// MaxFailures is how many wrong codes a key takes per time step at one
// node: a six-digit code with a skew of one has three right answers in a
// million, so without a bound a flood finds one in minutes.
const MaxFailures = 5

// MaxLockout bounds a key's lockout. The first time a key reaches
// MaxFailures in a step it is locked for one period; each further time
// before it is forgotten (MaxLockout after its last lockout ends) doubles
// that, up to MaxLockout. A steady guesser thus gets MaxFailures tries an
// hour, not a step: about 120 a day at one node instead of 14,400, which
// at three right answers in a million is 1 in 3,000 a day rather than 1
// in 23. A right code ends the lockout history.
const MaxLockout = time.Hour

// Keys are a tenant's TOTP keys, as Vault's TOTP engine keeps them.
type Keys struct {
	store  Store
	prefix string
	now    func() time.Time

	mu       sync.Mutex
	failures map[string]failures // by tenant and key name
}

// failures counts a key's wrong codes in one time step, and the lockouts
// they have earned lately.
type failures struct {
	step    int64
	n       int
	strikes int       // lockouts since the key was last forgiven
	locked  time.Time // codes are refused until then
	forget  time.Time // after which the entry can go
}

// NewKeys returns the keys kept in store under prefix (a folder: it ends
// with '/').
func NewKeys(store Store, prefix string, now func() time.Time) *Keys {
	if now == nil {
		now = time.Now
	}
	return &Keys{store: store, prefix: prefix, now: now, failures: map[string]failures{}}
}

// CreateRequest is Vault's keys/:name write.
type CreateRequest struct {
	Generate    bool
	Exported    bool   // return the URL (and QR code) of a generated key
	KeySize     int    // bytes of a generated key (0: DefaultKeySize)
	QRSize      int    // pixels of the QR code; 0: none
	URL         string // an otpauth:// URL to import (not with Generate)
	Key         string // a base32 key to import (not with Generate)
	Issuer      string
	AccountName string
	Period      time.Duration
	Algorithm   string
	Digits      int
	Skew        *int // nil: DefaultSkew
}

// Created is what a generated, exported key returns.
type Created struct {
	URL     string
	Barcode []byte // PNG; nil when QRSize is 0
}

// record is a key as stored.
type record struct {
	Key         string `json:"key"` // base32
	Issuer      string `json:"issuer"`
	AccountName string `json:"account_name"`
	Period      int    `json:"period"` // seconds
	Algorithm   string `json:"algorithm"`
	Digits      int    `json:"digits"`
	Skew        int    `json:"skew"`
	LastStep    int64  `json:"last_step"` // the last step a code was accepted for; 0: none
}

// Create makes or imports the key name (replacing one of that name, as
// Vault does); a generated, exported key returns its URL and QR code.
func (ks *Keys) Create(ctx context.Context, tenant, name string, r CreateRequest) (*Created, error) {
	if err := ValidName(name); err != nil {
		return nil, err
	}
	k, err := r.key()
	if err != nil {
		return nil, err
	}
	var out *Created
	if r.Generate && r.Exported {
		out = &Created{URL: k.URL()}
		if r.QRSize > 0 {
			if out.Barcode, err = k.QR(r.QRSize); err != nil {
				return nil, err
			}
		}
	}
	path := ks.prefix + name
	one := 1 // a key's history is of no use: keep its latest state only
	if err := ks.store.SetMetadata(ctx, tenant, path, secrets.MetadataUpdate{MaxVersions: &one}); err != nil {
		return nil, err
	}
	if _, err := ks.store.Write(ctx, tenant, path, encode(k, 0), nil); err != nil {
		return nil, err
	}
	return out, nil
}

func (r CreateRequest) key() (*Key, error) {
	skew := DefaultSkew
	if r.Skew != nil {
		skew = *r.Skew
	}
	base := Key{Issuer: r.Issuer, AccountName: r.AccountName, Period: r.Period, Algorithm: r.Algorithm, Digits: r.Digits, Skew: skew}
	switch {
	case r.Generate && (r.Key != "" || r.URL != ""):
		return nil, fmt.Errorf("%w: a key or url is not passed when generate is true", ErrInvalid)
	case r.Generate && (r.Issuer == "" || r.AccountName == ""):
		return nil, fmt.Errorf("%w: the issuer and account_name values are required for generated keys", ErrInvalid)
	case r.QRSize < 0:
		return nil, fmt.Errorf("%w: the qr_size value must be greater than or equal to zero", ErrInvalid)
	case r.Generate:
		return Generate(rand.Reader, r.KeySize, base)
	case r.URL != "":
		k, err := ParseURL(r.URL)
		if err != nil {
			return nil, err
		}
		k.Skew = skew
		return New(*k)
	case r.Key == "":
		return nil, fmt.Errorf("%w: the key value is required", ErrInvalid)
	}
	secret, err := DecodeSecret(r.Key)
	if err != nil {
		return nil, err
	}
	base.Secret = secret
	return New(base)
}

func encode(k *Key, last int64) json.RawMessage {
	b, _ := json.Marshal(record{Key: base32.StdEncoding.EncodeToString(k.Secret), Issuer: k.Issuer, AccountName: k.AccountName,
		Period: int(k.Period / time.Second), Algorithm: k.Algorithm, Digits: k.Digits, Skew: k.Skew, LastStep: last})
	return b
}

// load reads the key name and its state: the last accepted step and the
// record's version, for the check-and-set of the next.
func (ks *Keys) load(ctx context.Context, tenant, name string) (*Key, int64, int, error) {
	if err := ValidName(name); err != nil {
		return nil, 0, 0, err
	}
	s, err := ks.store.Read(ctx, tenant, ks.prefix+name, 0)
	if errors.Is(err, secrets.ErrNotFound) {
		return nil, 0, 0, fmt.Errorf("%w: %s", ErrNotFound, name)
	} else if err != nil {
		return nil, 0, 0, err
	}
	var rec record
	if err := json.Unmarshal(s.Data, &rec); err != nil {
		return nil, 0, 0, fmt.Errorf("stored TOTP key %s: %w", name, err)
	}
	secret, err := DecodeSecret(rec.Key)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("stored TOTP key %s: %w", name, err)
	}
	k, err := New(Key{Secret: secret, Issuer: rec.Issuer, AccountName: rec.AccountName, Period: time.Duration(rec.Period) * time.Second,
		Algorithm: rec.Algorithm, Digits: rec.Digits, Skew: rec.Skew})
	if err != nil {
		return nil, 0, 0, fmt.Errorf("stored TOTP key %s: %w", name, err)
	}
	return k, rec.LastStep, s.Meta.Version, nil
}

// Info is what a key read shows: everything but the key.
type Info struct {
	Issuer, AccountName, Algorithm string
	Period                         time.Duration
	Digits                         int
}

// Read describes the key name.
func (ks *Keys) Read(ctx context.Context, tenant, name string) (*Info, error) {
	k, _, _, err := ks.load(ctx, tenant, name)
	if err != nil {
		return nil, err
	}
	return &Info{Issuer: k.Issuer, AccountName: k.AccountName, Algorithm: k.Algorithm, Period: k.Period, Digits: k.Digits}, nil
}

// List returns the tenant's key names, sorted; none is not an error.
func (ks *Keys) List(ctx context.Context, tenant string) ([]string, error) {
	names, err := ks.store.List(ctx, tenant, ks.prefix)
	if errors.Is(err, secrets.ErrNotFound) {
		return nil, nil
	}
	return names, err
}

// Delete deletes the key name; a missing one is no error.
func (ks *Keys) Delete(ctx context.Context, tenant, name string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	return ks.store.DeleteMetadata(ctx, tenant, ks.prefix+name)
}

// Code returns the key's code for now.
func (ks *Keys) Code(ctx context.Context, tenant, name string) (string, error) {
	k, _, _, err := ks.load(ctx, tenant, name)
	if err != nil {
		return "", err
	}
	return k.Code(ks.now()), nil
}

// maxRaces bounds how often Validate re-reads a key another node changed
// between its read and its write.
const maxRaces = 8

// Validate checks code against the key name now. A code that matches is
// accepted once: its step is recorded with check-and-set, and a code of
// that step or an earlier one is ErrUsed afterwards, at every node.
func (ks *Keys) Validate(ctx context.Context, tenant, name, code string) (bool, error) {
	if code == "" {
		return false, fmt.Errorf("%w: the code value is required", ErrInvalid)
	}
	id := tenant + "\x00" + name
	for i := range maxRaces {
		k, last, version, err := ks.load(ctx, tenant, name)
		if err != nil {
			return false, err
		}
		now := ks.now()
		// A call reserves one check: a right code re-read after another
		// node's write is the same attempt, not another.
		if i == 0 && !ks.try(id, k.Step(now), now, k.Period) {
			return false, ErrTooMany
		}
		step, ok := k.Check(code, now)
		switch {
		case !ok:
			return false, nil
		case step <= last:
			return false, ErrUsed
		}
		_, err = ks.store.Write(ctx, tenant, ks.prefix+name, encode(k, step), &version)
		if errors.Is(err, secrets.ErrCASMismatch) {
			continue // another node accepted a code, or the key changed: decide again on what it wrote
		}
		if err != nil {
			return false, err
		}
		ks.forgive(id)
		return true, nil
	}
	return false, fmt.Errorf("TOTP key %s: changed by others %d times while checking a code", name, maxRaces)
}

// try reserves one check of a code for the key id in step (of period, at
// now), or reports false while the key is locked. The check is counted as a
// failure before it is made, and a right code is forgiven afterwards, so
// that a flood sent at once cannot pass this test before any of its
// failures is counted: the MaxFailures-th of a step locks the key (see
// MaxLockout). Entries are dropped once forgotten as the map grows, so it
// holds about the keys that failed lately.
func (ks *Keys) try(id string, step int64, now time.Time, period time.Duration) bool {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	f := ks.failures[id]
	if now.After(f.forget) {
		f = failures{} // forgotten, whether or not the map was swept
	}
	if now.Before(f.locked) {
		return false
	}
	if f.step != step {
		f.step, f.n = step, 0
	}
	f.n++
	if f.n >= MaxFailures {
		f.strikes++
		f.locked = now.Add(lockout(period, f.strikes))
		f.n = 0
	}
	f.forget = later(f.locked, now).Add(MaxLockout)
	ks.failures[id] = f
	if len(ks.failures) > 4096 {
		for k, v := range ks.failures {
			if now.After(v.forget) {
				delete(ks.failures, k)
			}
		}
	}
	return true
}

// forgive drops the key id's failures: a right code was accepted.
func (ks *Keys) forgive(id string) {
	ks.mu.Lock()
	delete(ks.failures, id)
	ks.mu.Unlock()
}

// lockout is the n-th consecutive lockout's length: period doubled n-1
// times, at most MaxLockout (and never less than period).
func lockout(period time.Duration, n int) time.Duration {
	d := period
	for i := 1; i < n && d < MaxLockout; i++ {
		d *= 2
	}
	return max(min(d, MaxLockout), period)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// ValidName checks a key's name as Vault's TOTP engine takes it: 1 to 128
// characters of letters, digits, '_', '-', '.' and '@', beginning and
// ending with a letter, a digit or '_'.
func ValidName(name string) error {
	if len(name) == 0 || len(name) > 128 {
		return fmt.Errorf("%w: a key name is 1 to 128 characters", ErrInvalid)
	}
	for i := range len(name) {
		c := name[i]
		word := c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if !word && (i == 0 || i == len(name)-1 || c != '-' && c != '.' && c != '@') {
			return fmt.Errorf("%w: key name %q: letters, digits, '_', '-', '.' and '@', not beginning or ending with '-', '.' or '@'", ErrInvalid, name)
		}
	}
	return nil
}
