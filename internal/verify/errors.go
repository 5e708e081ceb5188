package verify

import (
	"errors"

	"github.com/keygate/keygate/jose"
)

// Error is a refusal the pipeline adds to jose's: a token that is genuine
// and valid but does not carry what the issuer's policy demands. Every
// other refusal is a *jose.Error.
type Error struct {
	reason string
	Detail string // which check failed, never echoing the token
}

func (e *Error) Error() string {
	if e.Detail == "" {
		return e.reason
	}
	return e.reason + ": " + e.Detail
}

// Reason returns the stable machine-readable name, such as
// "insufficient_scope", for metrics and RFC 6750 error codes.
func (e *Error) Reason() string { return e.reason }

// Is reports whether target is an *Error with the same reason, so that
// errors.Is(err, ErrInsufficientScope) matches whatever scope was missing.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.reason == e.reason
}

// ErrInsufficientScope refuses a valid token that lacks a scope the policy
// requires. Unlike every other refusal it means "authenticated but not
// allowed": forward-auth answers 403 rather than 401 (RFC 6750 §3.1).
var ErrInsufficientScope = &Error{reason: "insufficient_scope"}

// ErrKeysUnavailable refuses a token whose kid the issuer's keys lack
// while those keys cannot be loaded (the JWKS endpoint or key files fail):
// the token may be good, the issuer's keys are what is missing, and the
// reason says so rather than unknown_kid.
var ErrKeysUnavailable = &Error{reason: "jwks_unavailable", Detail: "the issuer's keys cannot be loaded"}

// ReasonOf returns the stable name of why err refused a token: one of
// jose's reasons ("expired", "unknown_kid", ...) or a verify reason
// ("insufficient_scope"). It returns "" for errors that are not token
// refusals, such as a cancelled context; callers treat those as internal.
func ReasonOf(err error) string {
	var ve *Error
	if errors.As(err, &ve) {
		return ve.reason
	}
	if r := jose.ReasonOf(err); r != 0 {
		return r.String()
	}
	return ""
}

// Static refusals, so that refusing allocates nothing.
var (
	errTooLarge      = &jose.Error{Reason: jose.ReasonTooLarge, Detail: "token exceeds the size limit"}
	errNoIssuer      = &jose.Error{Reason: jose.ReasonMissingClaim, Detail: "iss is missing"}
	errUnknownIssuer = &jose.Error{Reason: jose.ReasonWrongIssuer, Detail: "issuer is not trusted"}
	errAlgNotAllowed = &jose.Error{Reason: jose.ReasonUnsupportedAlg, Detail: "alg is not allowed for this issuer"}
	errNoKeys        = &jose.Error{Reason: jose.ReasonUnknownKID, Detail: "issuer has no keys"}
	errType          = &jose.Error{Reason: jose.ReasonMalformed, Detail: "typ header is not the expected type"}
	errRevoked       = &jose.Error{Reason: jose.ReasonRevoked, Detail: "token is revoked"}
)
