package audit

import (
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// A Record is what one request did. Every field is typed or checked so that
// no secret can ride along by mistake: identifiers are short printable ASCII
// without spaces, quotes or backslashes (at most MaxIDLen bytes, so no
// token fits), operations and reasons are lower-case machine names, result
// and principal kind are enumerations, the remote address is a netip.Addr,
// and a value that must be matchable but never stored goes in Hashed as a
// Digest, which only HMACKey.Sum makes. There is no free-form payload.
// Write refuses a Record that breaks these rules (ErrInvalidRecord).
type Record struct {
	// Time is when the request was decided; zero means the Log's clock
	// at Write. It is recorded in UTC to the nanosecond.
	Time time.Time
	// RequestID ties the record to the request's logs; optional.
	RequestID string
	// Tenant is optional.
	Tenant string
	// Principal is who asked: a client or user id, never a token.
	Principal Principal
	// Operation is required, e.g. "transit.encrypt".
	Operation Operation
	// Key is the key the operation used, if any.
	Key KeyRef
	// Result is required.
	Result Result
	// Reason says why a request was refused or failed, e.g.
	// "invalid_client"; optional.
	Reason Reason
	// Status is the HTTP status answered (100-599), or 0.
	Status int
	// Remote is the client's address; the zero Addr records none. Write
	// records an IPv4-mapped IPv6 address as IPv4; an address with a zone
	// is refused.
	Remote netip.Addr
	// Hashed holds at most MaxHashed HMAC'd values by name (a lower-case
	// name of at most 32 bytes, e.g. "jti").
	Hashed map[string]Digest
	// Count, when not 0, makes the record an aggregate: it stands for
	// Count requests alike (same address, operation, result, reason and
	// status) made from Since to Time, which a writer chose not to
	// record one by one (a flood of refusals before authentication). An
	// aggregate has no request id of its own. 0 is an ordinary record of
	// one request.
	Count uint64
	// Since is an aggregate's first request; zero for an ordinary record.
	Since time.Time
}

// Limits on a Record's fields.
const (
	MaxIDLen   = 128 // RequestID, Tenant, Principal.ID, Key.Name (and a Log's node)
	MaxNameLen = 64  // Operation, Reason
	MaxHashed  = 8   // entries in Hashed
	maxHashKey = 32
	maxVersion = 1<<31 - 1
)

// A Principal is who made a request.
type Principal struct {
	Kind PrincipalKind
	ID   string // a client or user id; empty for PrincipalNone
}

// PrincipalKind says what a Principal's ID names.
type PrincipalKind uint8

// The principal kinds. PrincipalNone is a request with no principal (not
// yet, or never, identified).
const (
	PrincipalNone PrincipalKind = iota
	PrincipalClient
	PrincipalUser
	PrincipalAdmin
	numPrincipalKinds
)

var principalNames = [...]string{"", "client", "user", "admin"}

// String returns the kind's name in a line ("client", "user", "admin"),
// or "" for PrincipalNone.
func (k PrincipalKind) String() string { return enumName(principalNames[:], k, "PrincipalKind") }

// Result is the outcome of an operation.
type Result uint8

// The results. A Record must have one.
const (
	resultUnset   Result = iota
	ResultOK             // done as asked
	ResultRefused        // refused: bad credentials, policy, input
	ResultError          // failed on the server's side
	// ResultPending is a request record: written before the operation
	// changes anything, so that no change is made unrecorded. The record
	// of its outcome, with the same request id, follows; a pending
	// record without one is an operation whose outcome was never
	// recorded (the node stopped, or the log failed, in between).
	ResultPending
	numResults
)

var resultNames = [...]string{"", "ok", "refused", "error", "pending"}

// String returns "ok", "refused", "error" or "pending".
func (r Result) String() string { return enumName(resultNames[:], r, "Result") }

// An Operation is a dotted, machine-readable name: two or more parts of
// lower-case letters, digits and underscores, each beginning with a letter,
// e.g. "transit.encrypt", "oauth2.token", "admin.clients.create".
type Operation string

// Valid reports whether o is a dotted lower-case name Validate accepts.
func (o Operation) Valid() bool { return validOperation(string(o)) }

// A Reason is a machine-readable cause: lower-case letters, digits,
// underscores and dots, beginning with a letter, e.g. "invalid_client".
type Reason string

// Valid reports whether r is a name Validate accepts as a Reason.
func (r Reason) Valid() bool { return validName(string(r), MaxNameLen, true) }

// ValidID reports whether s is an identifier Validate accepts (for
// RequestID, Tenant, Principal.ID and Key.Name): 1 to MaxIDLen bytes of
// printable ASCII without space, '"' and '\'.
func ValidID(s string) bool { return s != "" && checkID(s, true) == nil }

// ValidHashName reports whether name is a name Validate accepts in
// Hashed: lower-case letters, digits and underscores, beginning with a
// letter, at most 32 bytes.
func ValidHashName(name string) bool { return validName(name, maxHashKey, false) }

// A KeyRef names a key and its version. Version 0 records none; a version
// needs a name.
type KeyRef struct {
	Name    string
	Version int
}

// ErrInvalidRecord is returned by Write (and Record.Validate) for a record
// that breaks the rules above; the error names the field.
var ErrInvalidRecord = errors.New("invalid audit record")

// FieldError is a Record field that breaks its rules. It matches
// ErrInvalidRecord with errors.Is. It never repeats the field's value.
type FieldError struct {
	Field   string
	Problem string
}

func (e *FieldError) Error() string {
	return "invalid audit record: " + e.Field + ": " + e.Problem
}

// Is makes a FieldError match ErrInvalidRecord.
func (e *FieldError) Is(target error) bool { return target == ErrInvalidRecord }

func fieldErr(field, problem string) error { return &FieldError{Field: field, Problem: problem} }

// Validate reports the first field of r that breaks the rules, as a
// *FieldError. A zero Time is refused here; Write fills it first.
func (r *Record) Validate() error {
	if err := checkTime(r.Time); err != nil {
		return fieldErr("Time", err.Error())
	}
	if err := checkID(r.RequestID, false); err != nil {
		return fieldErr("RequestID", err.Error())
	}
	if err := checkID(r.Tenant, false); err != nil {
		return fieldErr("Tenant", err.Error())
	}
	if r.Principal.Kind >= numPrincipalKinds {
		return fieldErr("Principal.Kind", "unknown kind")
	}
	if err := checkID(r.Principal.ID, false); err != nil {
		return fieldErr("Principal.ID", err.Error())
	}
	if r.Principal.Kind == PrincipalNone && r.Principal.ID != "" {
		return fieldErr("Principal.ID", "set without a kind")
	}
	if !validOperation(string(r.Operation)) {
		return fieldErr("Operation", "not a dotted lower-case name")
	}
	if err := checkID(r.Key.Name, false); err != nil {
		return fieldErr("Key.Name", err.Error())
	}
	if r.Key.Version < 0 || r.Key.Version > maxVersion || (r.Key.Version != 0 && r.Key.Name == "") {
		return fieldErr("Key.Version", "out of range or without a name")
	}
	if r.Result == resultUnset || r.Result >= numResults {
		return fieldErr("Result", "not ok, refused, error or pending")
	}
	if r.Reason != "" && !validName(string(r.Reason), MaxNameLen, true) {
		return fieldErr("Reason", "not a lower-case name")
	}
	if r.Status != 0 && (r.Status < 100 || r.Status > 599) {
		return fieldErr("Status", "not an HTTP status")
	}
	if r.Remote.IsValid() && r.Remote.Zone() != "" {
		return fieldErr("Remote", "has a zone")
	}
	if len(r.Hashed) > MaxHashed {
		return fieldErr("Hashed", fmt.Sprintf("more than %d values", MaxHashed))
	}
	for name, d := range r.Hashed {
		if !validName(name, maxHashKey, false) {
			return fieldErr("Hashed", "a name is not a lower-case name")
		}
		if d.IsZero() {
			return fieldErr("Hashed["+name+"]", "zero Digest")
		}
	}
	return r.validateCount()
}

// validateCount checks an aggregate's Count and Since: both or neither,
// and Since in range and not after Time.
func (r *Record) validateCount() error {
	switch {
	case r.Count == 0 && r.Since.IsZero():
		return nil
	case r.Count == 0:
		return fieldErr("Since", "set without a Count")
	case r.Since.IsZero():
		return fieldErr("Since", "an aggregate (Count) needs one")
	case r.RequestID != "":
		return fieldErr("RequestID", "an aggregate (Count) has none")
	}
	if err := checkTime(r.Since); err != nil {
		return fieldErr("Since", err.Error())
	}
	if r.Since.After(r.Time) {
		return fieldErr("Since", "after Time")
	}
	return nil
}

func checkTime(t time.Time) error {
	switch y := t.UTC().Year(); {
	case t.IsZero():
		return errors.New("zero")
	case y < 1 || y > 9999:
		return errors.New("year out of range")
	}
	return nil
}

// checkID checks an identifier: printable ASCII other than space, '"' and
// '\', at most MaxIDLen bytes.
func checkID(s string, required bool) error {
	switch {
	case s == "" && required:
		return errors.New("empty")
	case len(s) > MaxIDLen:
		return fmt.Errorf("longer than %d bytes", MaxIDLen)
	}
	for i := 0; i < len(s); i++ {
		if !idByte(s[i]) {
			return errors.New("holds a byte other than printable ASCII without space, quote or backslash")
		}
	}
	return nil
}

func idByte(c byte) bool { return c > ' ' && c < 0x7f && c != '"' && c != '\\' }

// validName checks [a-z][a-z0-9_]* (with dots too when dots is set).
func validName(s string, max int, dots bool) bool {
	if s == "" || len(s) > max || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || dots && c == '.') {
			return false
		}
	}
	return true
}

// validOperation checks two or more dot-separated parts, each a name.
func validOperation(s string) bool {
	if !validName(s, MaxNameLen, true) {
		return false
	}
	parts := 1
	for i := 0; i < len(s); i++ {
		if s[i] != '.' {
			continue
		}
		if i+1 == len(s) || s[i+1] < 'a' || s[i+1] > 'z' {
			return false
		}
		parts++
	}
	return parts >= 2
}
