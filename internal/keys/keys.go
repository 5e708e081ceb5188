// Package keys provides the verification keys of each trusted issuer: static
// key files, remote JWKS documents refreshed in the background, and OIDC
// discovery. Every source hands out immutable jose.KeySet snapshots swapped
// atomically, so the request path reads keys without I/O or locks.
package keys

import (
	"context"
	"time"

	"github.com/keygate/keygate/jose"
)

// Source is one issuer's key supply.
type Source interface {
	// Current returns the key set in force. It never blocks and never
	// returns nil: before the first successful load, and after a remote
	// set has been stale for longer than allowed, it is an empty set.
	Current() *jose.KeySet
	// Refetch asks for the keys again because a token named a kid the
	// current set lacks. Concurrent calls share one fetch, and fetches
	// triggered this way are rate-limited per source, so a flood of unknown
	// kids cannot hammer the issuer. It returns the set in force afterwards.
	Refetch(ctx context.Context) *jose.KeySet
	// Status reports the source's health for readiness and metrics.
	Status() Status
}

// Status describes a source at one moment.
type Status struct {
	Keys        int       // keys in the current set
	LastSuccess time.Time // last successful load (zero if never)
	LastAttempt time.Time // last load attempt, successful or not
	LastError   error     // error of the last attempt, nil if it succeeded
	Stale       bool      // the set is older than its refresh interval because loads fail
}

// Ready reports whether the source has keys to verify with.
func (s Status) Ready() bool { return s.Keys > 0 }
