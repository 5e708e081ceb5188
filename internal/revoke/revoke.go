// Package revoke decides whether a verified token has been revoked, by its
// jti or by its subject ("everything issued to sub before T"). Checkers
// answer from memory; shared state arrives in the background (package
// redisfanout: Redis pub/sub plus periodic resync), so a check never waits on
// the network.
package revoke

import "time"

// Checker answers revocation questions from memory, without blocking.
type Checker interface {
	// Revoked reports whether the token identified by issuer and jti, or
	// any token issued to subject before its issued-at time, is revoked.
	// jti and subject may be empty; issuedAt is zero when unknown.
	// It is called on every request, cache hits included, so a revocation
	// takes effect on the next request.
	Revoked(issuer, jti, subject string, issuedAt time.Time) bool
}
