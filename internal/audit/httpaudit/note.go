package httpaudit

import (
	"context"
	"net/http"
	"time"

	"github.com/keygate/keygate/internal/audit"
)

// A Note is what a handler tells the record of its request. Get it with
// From; every method of a nil Note does nothing. A value that breaks the
// record's rules (see audit.Record) is left out rather than fail the
// request: a handler's annotation never costs the client its answer.
type Note struct {
	a      *Auditor
	rec    audit.Record
	code   string // the error code httperr answered
	hashed map[string]audit.Digest
	intent bool // a pending record is written

	throttled bool          // Attempt found the address past its limit
	wait      time.Duration // how long it is to wait, when throttled
}

// From returns the Note of the request w answers: w is the writer the
// Auditor gave the handler, or wraps it (an Unwrap() http.ResponseWriter
// method). It is nil for a request no Auditor wraps.
func From(w http.ResponseWriter) *Note {
	for range 8 {
		if rec, ok := w.(*recorder); ok {
			return &rec.note
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return nil
		}
		w = u.Unwrap()
	}
	return nil
}

// RequestID returns the request's id ("" for a nil Note).
func (n *Note) RequestID() string {
	if n == nil {
		return ""
	}
	return n.rec.RequestID
}

// Op names the operation, such as "admin.clients.create", in place of
// the one the handler was wrapped with.
func (n *Note) Op(op audit.Operation) {
	if n != nil && op.Valid() {
		n.rec.Operation = op
	}
}

// Tenant names the tenant the request acts in.
func (n *Note) Tenant(name string) {
	if n != nil && audit.ValidID(name) {
		n.rec.Tenant = name
	}
}

// Client names the authenticated client as the request's principal.
func (n *Note) Client(id string) { n.principal(audit.PrincipalClient, id) }

// User names a user as the request's principal: the user a login or a
// refresh acts for, once known.
func (n *Note) User(id string) { n.principal(audit.PrincipalUser, id) }

// Admin names the operator holding the admin token as the principal (the
// token itself is never recorded).
func (n *Note) Admin() { n.principal(audit.PrincipalAdmin, "") }

func (n *Note) principal(kind audit.PrincipalKind, id string) {
	if n != nil && (id == "" || audit.ValidID(id)) {
		n.rec.Principal = audit.Principal{Kind: kind, ID: id}
	}
}

// Key names the key the operation used and its version (0: none), such
// as the signing key's kid of an issued token or a transit key.
func (n *Note) Key(name string, version int) {
	if n != nil && audit.ValidID(name) && version >= 0 {
		n.rec.Key = audit.KeyRef{Name: name, Version: version}
	}
}

// Reason names why the request was refused or failed, in place of the
// error code answered.
func (n *Note) Reason(reason string) {
	if n != nil && audit.Reason(reason).Valid() {
		n.rec.Reason = audit.Reason(reason)
	}
}

// Hash records value, which must be matchable but never stored (a jti, a
// subject), as its HMAC under the deployment's audit key, named name (a
// lower-case name such as "jti"). Without that key (the node is sealed)
// nothing is recorded, nor for an empty value; at most audit.MaxHashed
// values are.
func (n *Note) Hash(name, value string) {
	if n == nil || value == "" || !audit.ValidHashName(name) {
		return
	}
	if _, ok := n.hashed[name]; !ok && len(n.hashed) >= audit.MaxHashed {
		return
	}
	d, ok := n.a.cfg.Log.Sum(value)
	if !ok {
		return
	}
	if n.hashed == nil {
		n.hashed = make(map[string]audit.Digest, 2)
	}
	n.hashed[name] = d
}

// Intent writes a pending record of the request, with what it is noted
// with so far, before the handler changes anything: call it right before
// the change, and return its error (ErrUnavailable) without making the
// change when it fails. It writes once per request; a nil Note's is nil.
func (n *Note) Intent(ctx context.Context) error {
	if n == nil || n.intent {
		return nil
	}
	r := n.rec
	r.Result = audit.ResultPending
	if len(n.hashed) > 0 {
		r.Hashed = n.hashed
	}
	if err := n.a.write(ctx, r); err != nil {
		return ErrUnavailable
	}
	n.intent = true
	return nil
}

// Attempt charges the request's address, before the handler tries a
// credential whose every attempt is recorded (a pending record first,
// Intent, as an unseal's), with the limit of refusals before
// authentication but a budget of its own: other refusals from the address
// do not spend it. Past the address's limit it returns a 429 error to
// return without trying, and the request is tallied rather than recorded
// on its own (see Auditor.Flush). It is nil without a limit, and for a nil
// Note.
func (n *Note) Attempt(ctx context.Context) error {
	if n == nil || n.a.refusals == nil || n.throttled {
		return nil
	}
	wait, ok := n.a.refusals.allow(ctx, budgetAttempts, n.rec.Remote)
	if ok {
		return nil
	}
	n.throttled, n.wait = true, wait
	return errThrottled(wait)
}
