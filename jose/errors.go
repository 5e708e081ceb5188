package jose

import "errors"

// Reason is a machine-readable rejection reason, stable across releases so
// that metrics labels and logs can use it.
type Reason uint8

// The reasons a token or key can be refused for.
const (
	ReasonMalformed Reason = iota + 1
	ReasonTooLarge
	ReasonUnsupportedAlg
	ReasonUnknownKID
	ReasonBadSignature
	ReasonExpired
	ReasonNotYetValid
	ReasonWrongIssuer
	ReasonWrongAudience
	ReasonRevoked
	ReasonMissingClaim
	ReasonInvalidKey
)

var reasonNames = [...]string{
	ReasonMalformed:      "malformed",
	ReasonTooLarge:       "too_large",
	ReasonUnsupportedAlg: "unsupported_alg",
	ReasonUnknownKID:     "unknown_kid",
	ReasonBadSignature:   "bad_signature",
	ReasonExpired:        "expired",
	ReasonNotYetValid:    "not_yet_valid",
	ReasonWrongIssuer:    "wrong_issuer",
	ReasonWrongAudience:  "wrong_audience",
	ReasonRevoked:        "revoked",
	ReasonMissingClaim:   "missing_claim",
	ReasonInvalidKey:     "invalid_key",
}

// String returns the reason's stable name, such as "bad_signature".
func (r Reason) String() string {
	if int(r) < len(reasonNames) && reasonNames[r] != "" {
		return reasonNames[r]
	}
	return "unknown"
}

// Error is a rejection. Its Reason is for machines; its Detail says, without
// echoing secret input, which check failed.
type Error struct {
	Reason Reason
	Detail string
	Err    error // an underlying cause, if any
}

func (e *Error) Error() string {
	s := e.Reason.String()
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is an *Error with the same Reason, so that
// errors.Is(err, jose.ErrExpired) matches every expiry rejection whatever its
// detail.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Reason == e.Reason
}

// Sentinels for errors.Is; each matches every *Error with its Reason.
var (
	ErrMalformed      = &Error{Reason: ReasonMalformed}
	ErrTooLarge       = &Error{Reason: ReasonTooLarge}
	ErrUnsupportedAlg = &Error{Reason: ReasonUnsupportedAlg}
	ErrUnknownKID     = &Error{Reason: ReasonUnknownKID}
	ErrBadSignature   = &Error{Reason: ReasonBadSignature}
	ErrExpired        = &Error{Reason: ReasonExpired}
	ErrNotYetValid    = &Error{Reason: ReasonNotYetValid}
	ErrWrongIssuer    = &Error{Reason: ReasonWrongIssuer}
	ErrWrongAudience  = &Error{Reason: ReasonWrongAudience}
	ErrRevoked        = &Error{Reason: ReasonRevoked}
	ErrMissingClaim   = &Error{Reason: ReasonMissingClaim}
	ErrInvalidKey     = &Error{Reason: ReasonInvalidKey}
)

// ReasonOf returns the Reason carried by err, or 0 if err is not (or does
// not wrap) an *Error.
func ReasonOf(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return 0
}

// reject builds a static rejection. Errors on the hot path are package-level
// values made with it, so refusing a forged token allocates nothing.
func reject(r Reason, detail string) *Error { return &Error{Reason: r, Detail: detail} }

func keyError(detail string) *Error { return &Error{Reason: ReasonInvalidKey, Detail: detail} }
