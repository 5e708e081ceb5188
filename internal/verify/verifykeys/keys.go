// Package verifykeys supplies the verification keys of each trusted issuer as
// immutable [jose.KeySet] snapshots: a [Files] set read from PEM, JWK and
// JWKS files and read again when they change, a [Static] set fixed by the
// caller, and a [Remote] set fetched from a JWKS URL, configured or found by
// OpenID Connect discovery ([Discover], [NewDiscovered]), and refreshed in
// the background.
//
// # Guarantees
//
//   - Key files are read again on [Files.Reload] and when [Files.Poll] finds
//     the content of one changed (by SHA-256, so a same-size edit or an
//     atomic rename is seen whatever the modification time says). A key
//     removed from a file stops verifying on the first request after that
//     load. A load that fails (unreadable file, bad key, no key) never
//     empties the set: the last good keys keep serving, and the failure is
//     returned, logged once per broken content, reported to OnLoad and kept
//     in Status until a load succeeds.
//   - Current never blocks, takes no lock and never returns nil. It loads an
//     atomic pointer to a set that is never modified once published, so a
//     request sees the old set or the new one, never a mix of the two.
//   - A remote set is refreshed when the identity provider's Cache-Control
//     max-age (or Expires) says it goes stale, clamped to [MinRefresh,
//     MaxRefresh], so a key removed at the provider stops verifying within
//     one refresh period.
//   - A failed fetch (network error, timeout, status other than 200, body over
//     MaxBody, invalid JSON, or not one usable key) never replaces the last
//     good set; it is retried with jittered exponential backoff. The last good
//     set serves until MaxStale past its refresh time; after that Current
//     returns an empty set, so the source fails closed rather than trusting
//     old keys for ever.
//   - Unknown-kid refetches are collapsed: concurrent callers share one
//     request, and at most one such request starts per RefetchInterval, so
//     tokens with made-up kids cannot be turned against the provider.
//   - A discovered source asks the discovery document again after three
//     JWKS fetches in a row fail, so a provider that moves its jwks_uri is
//     followed; the last good set serves meanwhile.
//   - Keys are fetched only over https, or plain http to a loopback host.
//     Discovery insists that the document names the configured issuer
//     exactly (OpenID Connect Discovery 1.0 §4.3). A remote JWKS may hold
//     only public keys: secret (oct) keys in it are skipped. Each key is
//     bound to one algorithm, its "alg" or the one its type and curve imply
//     (jose.ParsePublicKeySet), never to every algorithm it could serve.
//   - Every key a fetch leaves out is logged, with its kid, thumbprint and
//     reason, and reported in FetchEvent.Skipped once: not again while
//     later fetches keep leaving it out for the same reason.
//   - Where keys come from is configuration only: nothing in a token (jku,
//     x5u, jwk, x5c, or an issuer it names) makes a source fetch a URL.
//   - Logs name URLs, kids and RFC 7638 thumbprints, never key material.
//
// # Errors
//
// A failed fetch is a [*FetchError] whose Result ("http_error", "timeout",
// "too_large", "bad_json", "no_keys", "network", "bad_discovery") is also
// what [FetchEvent] reports to metrics. Callers branch with errors.Is against
// [ErrTooLarge], [ErrNoKeys], [ErrIssuerMismatch], [ErrInsecureURL] and
// [ErrClosed].
package verifykeys

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

// emptySet is what Current returns when a source has no keys in force. A
// KeySet is immutable, so one value serves every source.
var emptySet = jose.NewKeySet()

var (
	_ Source = (*Files)(nil)
	_ Source = (*Static)(nil)
	_ Source = (*Remote)(nil)
)
