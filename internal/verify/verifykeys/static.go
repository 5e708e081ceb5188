package verifykeys

import (
	"context"
	"time"

	"github.com/keygate/keygate/jose"
)

// Static is a key set fixed at construction (key files, which can change,
// are a [Files] source). Refetch returns Current.
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

// Current returns the set. It never returns nil.
func (s *Static) Current() *jose.KeySet { return s.set }

// Refetch returns Current: a static set has nothing to fetch.
func (s *Static) Refetch(context.Context) *jose.KeySet { return s.set }

// Status reports the set's size and when it was loaded.
func (s *Static) Status() Status {
	return Status{Keys: s.set.Len(), LastSuccess: s.loaded, LastAttempt: s.loaded}
}
