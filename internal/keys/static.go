package keys

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/keygate/keygate/internal/keyfile"
	"github.com/keygate/keygate/jose"
)

// Static is a key set fixed at construction, typically read from files.
// It is always as fresh as it will ever be: Refetch returns Current.
type Static struct {
	set    *jose.KeySet
	loaded time.Time
}

// NewStatic serves set; a nil set serves no keys.
func NewStatic(set *jose.KeySet) *Static {
	if set == nil {
		set = emptySet
	}
	return &Static{set: set, loaded: time.Now()}
}

// LoadStatic reads verification keys from PEM (public or private key), JWK
// and JWKS files, binding each key to every algorithm of algs that fits it,
// or with no algs to the one the key implies (see [keyfile.LoadKeys]). A key
// without a kid gets its RFC 7638 thumbprint. Every file must yield at least
// one key; an error names the file at fault.
func LoadStatic(paths []string, algs []jose.Alg) (*Static, error) {
	if len(paths) == 0 {
		return nil, errors.New("keys: no key files given")
	}
	var all []*jose.Key
	for _, p := range paths {
		ks, err := keyfile.LoadKeys(p, algs, "")
		if err != nil {
			return nil, fmt.Errorf("keys: %w", err)
		}
		all = append(all, ks...)
	}
	return NewStatic(jose.NewKeySet(all...)), nil
}

// Current returns the set. It never returns nil.
func (s *Static) Current() *jose.KeySet { return s.set }

// Refetch returns Current: a static set has nothing to fetch.
func (s *Static) Refetch(context.Context) *jose.KeySet { return s.set }

// Status reports the set's size and when it was loaded.
func (s *Static) Status() Status {
	return Status{Keys: s.set.Len(), LastSuccess: s.loaded, LastAttempt: s.loaded}
}
