package kvapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/keygate/keygate/internal/audit"
	"github.com/keygate/keygate/internal/audit/httpaudit"
	"github.com/keygate/keygate/internal/httperr"
	"github.com/keygate/keygate/internal/rootkey"
	"github.com/keygate/keygate/internal/secrets"
	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/vaultauth"
	"github.com/keygate/keygate/internal/verify"
)

// Prefix is where the API is mounted.
const Prefix = "/v1/secret/"

// DefaultMaxBodyBytes bounds a request body (Options.MaxBodyBytes): the
// largest value, and room for the JSON around it.
const DefaultMaxBodyBytes = secrets.MaxValueBytes + 64<<10

// Outcome describes one request for an audit record. It never holds a
// value, custom metadata or a token.
type Outcome struct {
	RequestID string // the response's request_id
	Operation string // "secret.read", "secret.write", ... (Operations); "secret" when no route matched
	Tenant    string // the caller's tenant; "" until the token is verified
	Principal string // the token's client_id claim, else its sub
	Path      string // the secret's path, or the listed folder; "" for none
	Version   int    // the version read or made; 0 when none or several
	Status    int    // the HTTP status answered
	Reason    string // "" on success; else machine-readable: "permission_denied", "not_found", "deleted", ...
}

// Options configure a Handler.
type Options struct {
	Secrets  secrets.Service    // required
	Verifier vaultauth.Verifier // required: the token service's own tokens only
	// Sealed, if set, reports whether the node is sealed: a sealed node
	// answers 503 before anything else.
	Sealed func() bool
	Logger *slog.Logger // nil discards
	// Observe, if set, is told of every request once it is decided and
	// before anything is written: the seam for the audit log. If it
	// returns an error, the request is answered 500 instead (fail-closed).
	// Note that a change is already made when Observe hears of it.
	Observe func(w http.ResponseWriter, r *http.Request, o Outcome) error
	// Measure, if set, is told of every request once it is answered, with
	// the time the handler took (metrics; Operations lists the names). It
	// must not keep o.
	Measure func(o *Outcome, elapsed time.Duration)
	// MaxBodyBytes bounds a request body (default DefaultMaxBodyBytes).
	MaxBodyBytes int64
}

// Handler serves Vault's KV version 2 API under Prefix. Create it with New.
type Handler struct {
	svc      secrets.Service
	verifier vaultauth.Verifier
	sealed   func() bool
	observe  func(http.ResponseWriter, *http.Request, Outcome) error
	measure  func(*Outcome, time.Duration)
	log      *slog.Logger
	errs     httperr.Writer
	maxBody  int64
}

var _ http.Handler = (*Handler)(nil)

// New returns the API's handler.
func New(o Options) (*Handler, error) {
	if o.Secrets == nil || o.Verifier == nil {
		return nil, errors.New("kvapi.Options: Secrets and Verifier are required")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	return &Handler{svc: o.Secrets, verifier: o.Verifier, sealed: o.Sealed, observe: o.Observe, measure: o.Measure, log: o.Logger,
		errs: httperr.Writer{Envelope: httperr.Vault, Log: o.Logger}, maxBody: o.MaxBodyBytes}, nil
}

// call is one request's state.
type call struct {
	w      http.ResponseWriter
	r      *http.Request
	ctx    context.Context
	id     string
	auth   *verify.Result
	tenant string
	path   string          // the secret's path (the folder, for a list)
	note   *httpaudit.Note // the request's audit record; nil when not audited
	o      Outcome
	status int // 0: 200, or 204 when out is nil
	out    any // the envelope's data (appendEnvelope); nil: 204
}

// ServeHTTP serves one KV request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := &call{w: w, r: r, ctx: r.Context(), note: httpaudit.From(w), o: Outcome{Operation: "secret"}}
	c.id = vaultauth.RequestID(c.note)
	start := time.Now()
	h.finish(c, h.serve(c))
	if h.measure != nil {
		h.measure(&c.o, time.Since(start))
	}
}

// intent writes the audit log's pending record of a request that is about
// to change a secret, with what is known of it so far: the change is made
// only once that record is kept (httpaudit.Note.Intent).
func (c *call) intent() error {
	if c.note == nil {
		return nil
	}
	c.annotate()
	return c.note.Intent(c.ctx)
}

// annotate tells the request's audit record what the outcome holds: the
// operation, the tenant, the caller, the path (as the record's key, left
// out when it is not a name the record takes) and the version, and the
// reason of a refusal. Nothing of a value or of custom metadata.
func (c *call) annotate() {
	n := c.note
	if n == nil {
		return
	}
	n.Op(audit.Operation(c.o.Operation))
	if c.o.Tenant != "" {
		n.Tenant(c.o.Tenant)
	}
	vaultauth.Caller(n, c.auth)
	if c.o.Path != "" {
		n.Key(c.o.Path, c.o.Version)
	}
	if c.o.Reason != "" {
		n.Reason(c.o.Reason)
	}
}

// serve decides the request, in this order: a sealed node answers 503; a
// request without a valid token 403; an unknown path 404, an unknown
// method 405; a bad path, or a wrapped answer asked for, 400; missing
// scopes 403 (from the scopes alone);
// then the route reads its parameters and asks the store.
func (h *Handler) serve(c *call) error {
	if h.sealed != nil && h.sealed() {
		return errSealed
	}
	res, tenant, err := vaultauth.Authenticate(c.ctx, c.r.Header, h.verifier)
	if err != nil {
		return err
	}
	c.auth, c.tenant, c.o.Tenant = res, tenant, tenant
	rt, path, err := resolve(c.r)
	if rt.op != nil {
		c.o.Operation = rt.name
	}
	if err != nil {
		return err
	}
	c.path, c.o.Path = path, path
	if vaultauth.WantsWrapping(c.r.Header) {
		return vaultauth.ErrWrapping
	}
	if !permits(res.Scope, rt.scope, path) {
		return scopeDenied(rt.scope, path)
	}
	if rt.changes {
		// before the body is read: what the record says so far is what
		// was asked, and a request refused after this is recorded as such
		if err := c.intent(); err != nil {
			return err
		}
	}
	return rt.op(h, c)
}

// finish answers the call: its data in Vault's envelope, 204, or err's
// refusal; but first it completes the outcome and hands it to Observe,
// whose error turns the answer into a 500.
func (h *Handler) finish(c *call, err error) {
	status := c.status
	if status == 0 {
		status = http.StatusOK
		if c.out == nil {
			status = http.StatusNoContent
		}
	}
	var refusal *httperr.Error
	if err != nil {
		refusal = h.refusal(c, err)
		status = refusal.Status
		if c.o.Reason == "" {
			c.o.Reason = refusal.Code
		}
	}
	c.o.Status = status
	c.annotate()
	if h.observe != nil {
		c.o.RequestID = c.id
		if c.auth != nil {
			c.o.Principal = vaultauth.Principal(c.auth)
		}
		if oerr := h.observe(c.w, c.r, c.o); oerr != nil {
			h.log.Error("secret request not recorded; answered 500", "request_id", c.id, "op", c.o.Operation, "err", oerr)
			refusal = httperr.Internal
		}
	}
	hdr := c.w.Header()
	hdr.Set("Cache-Control", "no-store")
	if refusal != nil {
		h.errs.Write(c.w, c.r, refusal)
		return
	}
	if status == http.StatusNoContent {
		c.w.WriteHeader(status)
		return
	}
	size := 512
	if r, ok := c.out.(readOut); ok {
		size += len(r.Data)
	}
	b, err := appendEnvelope(make([]byte, 0, size), c.id, c.out)
	if err != nil { // our own types always marshal; a value is raw JSON the store checked
		h.log.Error("secret answer not encoded", "request_id", c.id, "op", c.o.Operation, "err", err)
		h.errs.Write(c.w, c.r, httperr.Internal)
		return
	}
	hdr.Set("Content-Type", "application/json")
	c.w.WriteHeader(status)
	c.w.Write(append(b, '\n')) //nolint:errcheck // the client went away
}

// Refusals.
var (
	errSealed   = &httperr.Error{Status: http.StatusServiceUnavailable, Code: "sealed", Description: "Vault is sealed"}
	errTooLarge = &httperr.Error{Status: http.StatusRequestEntityTooLarge, Code: "too_large", Description: "http: request body too large"}
	errNoPath   = &httperr.Error{Status: http.StatusNotFound, Code: "unsupported_path", Description: "unsupported path"}
	errMethod   = &httperr.Error{Status: http.StatusMethodNotAllowed, Code: "unsupported_operation", Description: "unsupported operation"}
	// errNotFound is Vault's answer to a read of nothing: 404 {"errors":[]}.
	errNotFound = &httperr.Error{Status: http.StatusNotFound, Code: "not_found"}
	errStore    = &httperr.Error{Status: http.StatusServiceUnavailable, Code: "store_unavailable", Description: "store unavailable", RetryAfter: time.Second}
	errCanceled = &httperr.Error{Status: http.StatusServiceUnavailable, Code: "canceled", Description: "request canceled"}
)

// badRequest is a 400 with its text.
func badRequest(desc string) *httperr.Error {
	return &httperr.Error{Status: http.StatusBadRequest, Code: "invalid_request", Description: desc}
}

// refusal maps an error to the answer: this package's refusals as they
// are, the store's by their kind; anything else is a 500 that reveals
// nothing, and is logged.
func (h *Handler) refusal(c *call, err error) *httperr.Error {
	e := refusalOf(err)
	if e == httperr.Internal {
		h.log.Error("secret request failed", "request_id", c.id, "op", c.o.Operation, "err", err)
	}
	return e
}

func refusalOf(err error) *httperr.Error {
	var he *httperr.Error
	switch {
	case errors.As(err, &he):
		return he
	case errors.Is(err, secrets.ErrNotFound):
		return errNotFound
	case errors.Is(err, secrets.ErrCASMismatch):
		return &httperr.Error{Status: http.StatusBadRequest, Code: "cas_mismatch", Description: secrets.ErrCASMismatch.Error()}
	case errors.Is(err, secrets.ErrCASRequired):
		return &httperr.Error{Status: http.StatusBadRequest, Code: "cas_required", Description: secrets.ErrCASRequired.Error()}
	case errors.Is(err, secrets.ErrTooLarge):
		return &httperr.Error{Status: http.StatusRequestEntityTooLarge, Code: "too_large", Description: storeText(err, secrets.ErrTooLarge)}
	case errors.Is(err, secrets.ErrInvalid):
		return badRequest(storeText(err, secrets.ErrInvalid))
	case errors.Is(err, secrets.ErrSealed), errors.Is(err, rootkey.ErrSealed):
		return errSealed
	case errors.Is(err, store.ErrUnavailable):
		return errStore
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return errCanceled
	}
	return httperr.Internal
}

// storeText is the text of the store's refusal of bad input, without the
// sentinel's own words in front ("invalid request: secret path ..." is
// "secret path ...").
func storeText(err, sentinel error) string {
	s := err.Error()
	if rest, ok := strings.CutPrefix(s, sentinel.Error()+": "); ok && rest != "" {
		return rest
	}
	return s
}
