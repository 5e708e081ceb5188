package transit

import (
	"errors"
	"strconv"
)

// Reason is a machine-readable error reason, stable across releases, for the
// HTTP layer's status mapping, metrics labels and logs.
type Reason uint8

// The reasons an operation can fail for. The comment says how the HTTP layer
// is expected to answer.
const (
	// ReasonInvalidRequest: a parameter is out of range or unknown (400).
	ReasonInvalidRequest Reason = iota + 1
	// ReasonMalformed: a "vault:vN:..." text (ciphertext, signature, HMAC)
	// or its base64 does not parse (400).
	ReasonMalformed
	// ReasonUnknownVersion: the text names a version newer than the key's
	// latest. Another node may have rotated the key: re-read the key from
	// storage and retry once, then answer 400.
	ReasonUnknownVersion
	// ReasonVersionTooOld: below min_decryption_version (for decrypt,
	// verify, verify-hmac, export) or min_encryption_version (for encrypt,
	// sign, hmac) (400).
	ReasonVersionTooOld
	// ReasonVersionNotLoaded: the version is valid but its material is not
	// in this snapshot (trimmed, or not loaded by the storage layer) (400 if
	// trimmed; the storage layer loads it otherwise).
	ReasonVersionNotLoaded
	// ReasonDecryptionFailed: authentication failed: a wrong key, context
	// or associated data, or altered ciphertext (400).
	ReasonDecryptionFailed
	// ReasonUnsupported: the key's type cannot do this operation (400).
	ReasonUnsupported
	// ReasonMissingContext: a derived key needs a context (400).
	ReasonMissingContext
	// ReasonNotExportable: the key is not exportable (400).
	ReasonNotExportable
	// ReasonNoPrivateKey: the version holds only a public key (400).
	ReasonNoPrivateKey
	// ReasonTooLarge: an input or a batch is over a documented limit (413).
	ReasonTooLarge
	// ReasonInvalidConfig: a configuration change Vault refuses (400).
	ReasonInvalidConfig
	// ReasonRotationNotAllowed: an imported key without allow_rotation
	// (400).
	ReasonRotationNotAllowed
	// ReasonImportFailed: the import ciphertext or key material is invalid
	// (400).
	ReasonImportFailed
	// ReasonCorrupt: stored key material or configuration does not parse
	// (500: storage or sealing is broken).
	ReasonCorrupt
	// ReasonBusy: the caller, or the caller's tenant, already has as many
	// private-key operations waiting or running as the engine takes from
	// one (Options.TenantQueue, Options.CallerQueue): 429 with Retry-After.
	ReasonBusy
	// ReasonInternal: a failure of the engine or the random source (500).
	ReasonInternal
	// ReasonCanceled: the caller's context ended while the operation
	// waited for a worker (the request is gone).
	ReasonCanceled
	// ReasonOverBudget: a batch's items together cost more than the
	// engine's budget (Options.MaxBatchCost); nothing of it was done (413).
	ReasonOverBudget
)

var reasonNames = [...]string{
	ReasonInvalidRequest:     "invalid_request",
	ReasonMalformed:          "malformed",
	ReasonUnknownVersion:     "unknown_version",
	ReasonVersionTooOld:      "version_too_old",
	ReasonVersionNotLoaded:   "version_not_loaded",
	ReasonDecryptionFailed:   "decryption_failed",
	ReasonUnsupported:        "unsupported",
	ReasonMissingContext:     "missing_context",
	ReasonNotExportable:      "not_exportable",
	ReasonNoPrivateKey:       "no_private_key",
	ReasonTooLarge:           "too_large",
	ReasonInvalidConfig:      "invalid_config",
	ReasonRotationNotAllowed: "rotation_not_allowed",
	ReasonImportFailed:       "import_failed",
	ReasonCorrupt:            "corrupt",
	ReasonBusy:               "busy",
	ReasonInternal:           "internal",
	ReasonCanceled:           "canceled",
	ReasonOverBudget:         "over_budget",
}

// String returns the reason's stable name, such as "unknown_version".
func (r Reason) String() string {
	if int(r) < len(reasonNames) && reasonNames[r] != "" {
		return reasonNames[r]
	}
	return "unknown"
}

// UserError reports whether the reason is the caller's fault (a 4xx) rather
// than the service's (corrupt storage, a failing random source, overload).
func (r Reason) UserError() bool {
	switch r {
	case ReasonCorrupt, ReasonBusy, ReasonInternal, ReasonCanceled:
		return false
	}
	return r != 0
}

// Error is a failed operation. Reason is for machines; Detail says, without
// echoing secret input, which check failed; Version is the key version
// involved when there is one (the version to load for ReasonUnknownVersion).
type Error struct {
	Reason  Reason
	Detail  string
	Version int
	Err     error // an underlying cause, if any
}

func (e *Error) Error() string {
	s := e.Reason.String()
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	if e.Version != 0 {
		s += " (version " + strconv.Itoa(e.Version) + ")"
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is an *Error with the same Reason, so that
// errors.Is(err, transit.ErrUnknownVersion) matches whatever the detail.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Reason == e.Reason
}

// Sentinels for errors.Is; each matches every *Error with its Reason.
var (
	ErrInvalidRequest     = &Error{Reason: ReasonInvalidRequest}
	ErrMalformed          = &Error{Reason: ReasonMalformed}
	ErrUnknownVersion     = &Error{Reason: ReasonUnknownVersion}
	ErrVersionTooOld      = &Error{Reason: ReasonVersionTooOld}
	ErrVersionNotLoaded   = &Error{Reason: ReasonVersionNotLoaded}
	ErrDecryptionFailed   = &Error{Reason: ReasonDecryptionFailed}
	ErrUnsupported        = &Error{Reason: ReasonUnsupported}
	ErrMissingContext     = &Error{Reason: ReasonMissingContext}
	ErrNotExportable      = &Error{Reason: ReasonNotExportable}
	ErrNoPrivateKey       = &Error{Reason: ReasonNoPrivateKey}
	ErrTooLarge           = &Error{Reason: ReasonTooLarge}
	ErrInvalidConfig      = &Error{Reason: ReasonInvalidConfig}
	ErrRotationNotAllowed = &Error{Reason: ReasonRotationNotAllowed}
	ErrImportFailed       = &Error{Reason: ReasonImportFailed}
	ErrCorrupt            = &Error{Reason: ReasonCorrupt}
	ErrBusy               = &Error{Reason: ReasonBusy}
	ErrInternal           = &Error{Reason: ReasonInternal}
	ErrCanceled           = &Error{Reason: ReasonCanceled}
	ErrOverBudget         = &Error{Reason: ReasonOverBudget}
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

func newError(r Reason, detail string) *Error { return &Error{Reason: r, Detail: detail} }

func versionError(r Reason, detail string, v int) *Error {
	return &Error{Reason: r, Detail: detail, Version: v}
}

func wrapError(r Reason, detail string, err error) *Error {
	return &Error{Reason: r, Detail: detail, Err: err}
}

// Static rejections of the hot paths: refusing bad input allocates nothing.
var (
	errNoPrefix        = newError(ReasonMalformed, `no "vault:v" prefix`)
	errBadVersion      = newError(ReasonMalformed, "version number is not a positive decimal integer in range")
	errNoSeparator     = newError(ReasonMalformed, `no ":" after the version`)
	errBadBase64       = newError(ReasonMalformed, "payload is not standard padded base64")
	errShort           = newError(ReasonMalformed, "payload shorter than nonce and tag")
	errOpenFailed      = newError(ReasonDecryptionFailed, "message authentication failed")
	errMissingContext  = newError(ReasonMissingContext, "the key is derived: a context is required")
	errNegativeVersion = newError(ReasonInvalidRequest, "key_version cannot be negative")
	errInputTooLarge   = newError(ReasonTooLarge, "input over MaxInputBytes")
	errContextTooLarge = newError(ReasonTooLarge, "context over MaxContextBytes")
	errADTooLarge      = newError(ReasonTooLarge, "associated_data over MaxInputBytes")
	errBatchTooLarge   = newError(ReasonTooLarge, "batch over MaxBatchItems")
)
