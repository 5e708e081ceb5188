package vaultapi

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/keygate/keygate/internal/audit"
	"github.com/keygate/keygate/internal/audit/httpaudit"
	"github.com/keygate/keygate/internal/httperr"
	"github.com/keygate/keygate/internal/rootkey"
	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/transit"
	"github.com/keygate/keygate/internal/transit/keystore"
	"github.com/keygate/keygate/internal/vaultauth"
	"github.com/keygate/keygate/internal/verify"
)

// Prefix is where the API is mounted.
const Prefix = "/v1/transit/"

// Documented limits.
const (
	// DefaultMaxBodyBytes bounds a request body (Options.MaxBodyBytes).
	DefaultMaxBodyBytes = 4 << 20
	// DefaultMaxBatchItems bounds a batch_input (Options.MaxBatchItems).
	DefaultMaxBatchItems = 10_000
)

// Verifier checks a bearer token: the token service's own tokens only
// (verify.Pipeline over the node's signing keys).
type Verifier = vaultauth.Verifier

// Outcome describes one request for an audit record: what was asked, by
// whom, on what, and how it ended. It never holds plaintext, ciphertext,
// key material or tokens.
type Outcome struct {
	RequestID  string // the response's request_id
	Operation  string // "transit.encrypt", "transit.keys.create", ...; "transit" when no route matched
	Tenant     string // the caller's tenant; "" until the token is verified
	Principal  string // the token's client_id claim, else its sub
	Key        string // the key the path names; "" for none
	KeyVersion int    // the version used or made; 0 when none, or several (batches)
	Items      int    // batch items (0: not a batch)
	Failed     int    // batch items that failed
	Status     int    // the HTTP status answered
	Reason     string // "" on success; else machine-readable: "permission_denied", "not_found", "decryption_failed", ...
}

// Options configure a Handler.
type Options struct {
	Keys     *keystore.Service
	Verifier Verifier
	Logger   *slog.Logger // nil discards
	// Observe, if set, is told of every request, once it is decided and
	// before anything is written: the seam for the audit log. If it
	// returns an error, the request is answered 500 instead (fail-closed):
	// nothing is answered as done that was not recorded. It must not keep
	// o's strings past the call unless it copies them.
	Observe func(w http.ResponseWriter, r *http.Request, o Outcome) error
	// Measure, if set, is told of every request once it is answered, with
	// the time the handler took (metrics). It must not keep o's strings.
	Measure func(o *Outcome, elapsed time.Duration)
	// MaxBodyBytes bounds a request body (default DefaultMaxBodyBytes);
	// a larger one is refused with 413.
	MaxBodyBytes int64
	// MaxBatchItems bounds a batch_input (default DefaultMaxBatchItems);
	// a longer one is refused with 413.
	MaxBatchItems int
}

// Handler serves Vault's transit API under Prefix. Create it with New.
type Handler struct {
	keys     *keystore.Service
	eng      *transit.Engine
	verifier Verifier
	observe  func(http.ResponseWriter, *http.Request, Outcome) error
	measure  func(*Outcome, time.Duration)
	log      *slog.Logger
	errs     httperr.Writer
	maxBody  int64
	maxBatch int
	pool     sync.Pool // *call
}

var _ http.Handler = (*Handler)(nil)

// New returns the API's handler.
func New(o Options) (*Handler, error) {
	if o.Keys == nil || o.Verifier == nil {
		return nil, errors.New("vaultapi.Options: Keys and Verifier are required")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.MaxBatchItems <= 0 {
		o.MaxBatchItems = DefaultMaxBatchItems
	}
	h := &Handler{keys: o.Keys, eng: o.Keys.Engine(), verifier: o.Verifier, observe: o.Observe, measure: o.Measure, log: o.Logger,
		errs: httperr.Writer{Envelope: httperr.Vault, Log: o.Logger}, maxBody: o.MaxBodyBytes, maxBatch: o.MaxBatchItems}
	h.pool.New = func() any { return new(call) }
	return h, nil
}

// call is one request's state, pooled: its buffers are reused.
type call struct {
	w      http.ResponseWriter
	r      *http.Request
	ctx    context.Context
	id     requestID
	note   *httpaudit.Note // the request's audit record; nil when not audited
	rt     *route
	args   args
	auth   *verify.Result
	tenant string
	o      Outcome
	start  time.Time // when the request began, when measured

	body     []byte  // the request body
	req      request // its parameters
	out      []byte  // the response
	status   int     // the response's status (0: 200)
	warnings []string
	scratch  [3][]byte // decoded inputs

	// batch storage, reused
	encItems []transit.EncryptItem
	encRes   []transit.EncryptResult
	pre      []string // per-item errors found before the key was used
	idx      []int
}

// maxPooled bounds the buffers a call keeps for the next request.
const maxPooled = 64 << 10

func (c *call) reset(w http.ResponseWriter, r *http.Request) {
	c.w, c.r, c.ctx = w, r, r.Context()
	c.id.fill()
	c.note = httpaudit.From(w)
	c.rt, c.args, c.auth, c.tenant = nil, args{}, nil, ""
	c.o = Outcome{Operation: "transit"}
	c.body, c.out = c.body[:0], c.out[:0]
	c.status, c.warnings = 0, nil
	for i := range c.scratch {
		c.scratch[i] = c.scratch[i][:0]
	}
	c.req.reset()
}

// release drops what the call must not keep: references to the request,
// and buffers that grew large.
func (c *call) release() {
	c.w, c.r, c.ctx, c.auth, c.rt, c.note = nil, nil, nil, nil, nil, nil
	c.o, c.tenant, c.args, c.warnings = Outcome{}, "", args{}, nil
	clear(c.out) // plaintexts and data keys pass through it
	for i := range c.scratch {
		clear(c.scratch[i])
		if cap(c.scratch[i]) > maxPooled {
			c.scratch[i] = nil
		}
	}
	clear(c.body)
	if cap(c.body) > maxPooled {
		c.body = nil
	}
	if cap(c.out) > maxPooled {
		c.out = nil
	}
	if cap(c.encItems) > 1024 {
		c.encItems, c.encRes, c.pre, c.idx = nil, nil, nil, nil
	}
	clear(c.encItems)
	clear(c.encRes)
	c.req = request{top: c.req.top[:0], items: c.req.items[:0], imem: c.req.imem[:0]}
	clear(c.req.top[:cap(c.req.top)])
	clear(c.req.imem[:cap(c.req.imem)])
}

// requestID is the request's id as its answer names it.
func (c *call) requestID() string {
	if id := c.note.RequestID(); id != "" {
		return id
	}
	return c.id.String()
}

// intent writes the audit log's pending record of a request that is about
// to change a key, with what is known of it so far: the change is made
// only once that record is kept (httpaudit.Note.Intent).
func (c *call) intent() error {
	if c.note == nil {
		return nil
	}
	c.annotate()
	return c.note.Intent(c.ctx)
}

// annotate tells the request's audit record what the outcome holds: the
// operation, the tenant, the caller (a client, or the user a login token
// was issued to), the key and its version, and the reason of a refusal.
// Batch counts have no place in a record; nothing of the data ever does.
func (c *call) annotate() {
	n := c.note
	if n == nil {
		return
	}
	if op := audit.Operation(c.o.Operation); op.Valid() {
		n.Op(op)
	}
	if c.o.Tenant != "" {
		n.Tenant(c.o.Tenant)
	}
	vaultauth.Caller(n, c.auth)
	if c.o.Key != "" {
		n.Key(c.o.Key, c.o.KeyVersion)
	}
	if c.o.Reason != "" {
		n.Reason(c.o.Reason)
	}
}

// ServeHTTP serves one transit request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := h.pool.Get().(*call)
	c.reset(w, r)
	defer h.pool.Put(c)
	defer c.release() // even if the answer panics: the buffers hold plaintexts
	if h.measure != nil {
		c.start = time.Now()
	}
	h.finish(c, h.serve(c))
	if h.measure != nil {
		h.measure(&c.o, time.Since(c.start))
	}
}

// serve decides the request, in this order: a sealed node answers 503; a
// request without a valid token 403; an unknown path 404, an unknown
// method 405; missing scopes 403 (from the scopes alone); then the route.
func (h *Handler) serve(c *call) error {
	if h.keys.Sealed() {
		return errSealed
	}
	if err := h.authenticate(c); err != nil {
		return err
	}
	rt, a, err := resolve(c.r)
	if rt != nil {
		c.o.Operation = rt.name
	}
	if err != nil {
		return err
	}
	c.rt, c.args = rt, a
	c.o.Key = a.name
	if !permits(c.auth.Scope, rt.scope, a.name) {
		return scopeDenied(rt.scope, a.name)
	}
	if err := h.readParams(c); err != nil {
		return err
	}
	if w := paramWarnings(rt, a, &c.req); w != nil {
		c.warnings = append(c.warnings, w...)
	}
	if rt.changes {
		if err := c.intent(); err != nil {
			return err
		}
	}
	return rt.serve(h, c)
}

// readParams reads a write's JSON body, or a read's query parameters.
func (h *Handler) readParams(c *call) error {
	r := c.r
	if r.Method == http.MethodGet || r.Method == "LIST" || r.Method == http.MethodDelete {
		if r.URL.RawQuery != "" {
			c.req.fromQuery(r.URL.Query())
		}
		return nil
	}
	if r.ContentLength > h.maxBody {
		return errTooLarge
	}
	body := http.MaxBytesReader(c.w, r.Body, h.maxBody)
	if n := r.ContentLength; n > 0 && int64(cap(c.body)) < n {
		c.body = make([]byte, 0, n)
	}
	for {
		if len(c.body) == cap(c.body) {
			c.body = append(c.body, 0)[:len(c.body)]
		}
		n, err := body.Read(c.body[len(c.body):cap(c.body)])
		c.body = c.body[:len(c.body)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return bodyError(err)
		}
	}
	return c.req.decode(c.body)
}

// bodyError is the answer to a failed read of the body. (Apart, since
// errors.As moves its target to the heap: declared in the read loop, it
// was an allocation for every request, error or not.)
func bodyError(err error) error {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return errTooLarge
	}
	return badRequest("reading the request body: " + err.Error())
}

// authenticate verifies the bearer token and reads the caller's tenant
// (package vaultauth).
func (h *Handler) authenticate(c *call) error {
	res, tenant, err := vaultauth.Authenticate(c.ctx, c.r.Header, h.verifier)
	if err != nil {
		return err
	}
	c.auth, c.tenant = res, tenant
	c.o.Tenant = tenant
	return nil
}

// scopeDenied is the answer to a token whose scopes do not grant the
// route's operation, naming the scope that would.
func scopeDenied(o op, key string) *httperr.Error {
	need := "transit:" + o.String()
	if o != opAdmin && o != opRandom && o != opHash {
		need += ":" + key
	}
	return &httperr.Error{Status: http.StatusForbidden, Code: "insufficient_scope",
		Description: "permission denied: the token's scopes do not grant " + need}
}

// admin reports whether the caller holds transit:admin. Only an encrypt
// with a missing key asks (Vault's upsert), so it is not decided for every
// request.
func (c *call) admin() bool { return permits(c.auth.Scope, opAdmin, "") }

// caller is whom the engine does the request's asymmetric-key work for
// (signing, verification, RSA encryption and decryption, key generation and
// import): the engine shares its workers between tenants, then between
// their principals.
func (c *call) caller() transit.Caller {
	return transit.Caller{Tenant: c.tenant, Principal: vaultauth.Principal(c.auth)}
}

// finish answers the call: its response, or err's refusal; but first it
// completes the outcome and hands it to Observe, whose error turns the
// answer into a 500.
func (h *Handler) finish(c *call, err error) {
	status, reason := http.StatusOK, ""
	if c.status != 0 {
		status = c.status
	}
	var refusal *httperr.Error
	if err != nil {
		refusal = h.refusal(c, err)
		status, reason = refusal.Status, refusal.Code
		if c.o.Reason != "" { // a more precise reason set by the handler
			reason = c.o.Reason
		}
	} else if status >= 400 || c.o.Failed > 0 { // a batch item failed, whatever partial_failure_response_code made of it
		reason = c.o.Reason
		if reason == "" {
			reason = "batch_errors"
		}
	}
	c.o.Status, c.o.Reason = status, reason
	c.annotate()
	if h.observe != nil {
		c.o.RequestID = c.requestID()
		if c.auth != nil {
			c.o.Principal = vaultauth.Principal(c.auth)
		}
		if oerr := h.observe(c.w, c.r, c.o); oerr != nil {
			h.log.Error("transit request not recorded; answered 500", "request_id", c.requestID(), "op", c.o.Operation, "err", oerr)
			refusal = httperr.Internal
		}
	}
	hdr := c.w.Header()
	hdr["Cache-Control"] = noStore
	if refusal != nil {
		h.errs.Write(c.w, c.r, refusal)
		return
	}
	if status == http.StatusNoContent {
		c.w.WriteHeader(status)
		return
	}
	hdr["Content-Type"] = contentJSON
	c.w.WriteHeader(status)
	c.w.Write(c.out) //nolint:errcheck // the client went away
}

// Header values, shared by every answer: net/http only reads them, and
// an Add to one appends to a full slice, which copies it.
var (
	noStore     = []string{"no-store"}
	contentJSON = []string{"application/json"}
)

// Refusals.
var (
	errSealed   = &httperr.Error{Status: http.StatusServiceUnavailable, Code: "sealed", Description: "Vault is sealed"}
	errTooLarge = &httperr.Error{Status: http.StatusRequestEntityTooLarge, Code: "too_large", Description: "http: request body too large"}
	errNoPath   = &httperr.Error{Status: http.StatusNotFound, Code: "unsupported_path", Description: "unsupported path"}
	errLongName = &httperr.Error{Status: http.StatusBadRequest, Code: "invalid_request",
		Description: "invalid key name: longer than " + strconv.Itoa(keystore.MaxNameBytes) + " bytes"}
	errMethod   = &httperr.Error{Status: http.StatusMethodNotAllowed, Code: "unsupported_operation", Description: "unsupported operation"}
	errNotFound = &httperr.Error{Status: http.StatusNotFound, Code: "not_found", Description: "key not found"}
	// errNothing is Vault's answer to a read of nothing: 404 {"errors":[]}.
	errNothing    = &httperr.Error{Status: http.StatusNotFound, Code: "not_found"}
	errBatchLarge = &httperr.Error{Status: http.StatusRequestEntityTooLarge, Code: "too_large", Description: "batch_input has too many items"}
	errStore      = &httperr.Error{Status: http.StatusServiceUnavailable, Code: "store_unavailable", Description: "store unavailable", RetryAfter: time.Second}
)

// refusal maps an error to the answer: this package's refusals as they
// are, the key service's and the engine's by their kind; anything else is
// a 500 that reveals nothing, and is logged.
func (h *Handler) refusal(c *call, err error) *httperr.Error {
	e := refusalOf(c, err)
	if e == httperr.Internal {
		h.log.Error("transit request failed", "request_id", c.requestID(), "op", c.o.Operation, "err", err)
	}
	return e
}

func refusalOf(c *call, err error) *httperr.Error {
	var he *httperr.Error
	var br badRequest
	var te *transit.Error
	switch {
	case errors.As(err, &he):
		return he
	case errors.As(err, &br):
		return &httperr.Error{Status: http.StatusBadRequest, Code: "invalid_request", Description: string(br)}
	case errors.Is(err, keystore.ErrNotFound):
		if c.rt != nil && c.rt.readNothing {
			return errNothing
		}
		return errNotFound
	case errors.Is(err, rootkey.ErrSealed):
		return errSealed
	case errors.Is(err, store.ErrUnavailable):
		return errStore
	case errors.Is(err, keystore.ErrDeletionNotAllowed):
		return &httperr.Error{Status: http.StatusBadRequest, Code: "deletion_not_allowed", Description: "deletion is not allowed for this key"}
	case errors.Is(err, keystore.ErrExists):
		return &httperr.Error{Status: http.StatusBadRequest, Code: "exists",
			Description: "the import path cannot be used with an existing key; use import-version to rotate an existing imported key"}
	case errors.Is(err, keystore.ErrInvalidName):
		return &httperr.Error{Status: http.StatusBadRequest, Code: "invalid_request", Description: "invalid key name"}
	case errors.As(err, &te):
		return transitRefusal(te)
	case errors.Is(err, keystore.ErrCorrupt):
		return httperr.Internal
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return &httperr.Error{Status: http.StatusServiceUnavailable, Code: "canceled", Description: "request canceled"}
	}
	return httperr.Internal
}

// transitRefusal maps an engine error: the caller's mistakes to 400 (413
// for a limit), a caller with too much in progress to 429 with Retry-After,
// the rest to 500.
func transitRefusal(te *transit.Error) *httperr.Error {
	switch te.Reason {
	case transit.ReasonTooLarge, transit.ReasonOverBudget:
		return &httperr.Error{Status: http.StatusRequestEntityTooLarge, Code: te.Reason.String(), Description: describe(te)}
	case transit.ReasonBusy:
		return &httperr.Error{Status: http.StatusTooManyRequests, Code: te.Reason.String(),
			Description: "too many asymmetric-key operations of this client or tenant in progress; retry later", RetryAfter: time.Second}
	case transit.ReasonCanceled:
		return &httperr.Error{Status: http.StatusServiceUnavailable, Code: te.Reason.String(), Description: "request canceled"}
	}
	if te.Reason.UserError() {
		return &httperr.Error{Status: http.StatusBadRequest, Code: te.Reason.String(), Description: describe(te)}
	}
	return httperr.Internal
}

// describe is an engine error's message for the caller: what failed,
// without the underlying cause (which may come from a library and say more
// than it should).
func describe(te *transit.Error) string {
	s := te.Detail
	if s == "" {
		s = strings.ReplaceAll(te.Reason.String(), "_", " ")
	}
	switch te.Reason {
	case transit.ReasonUnknownVersion, transit.ReasonVersionTooOld, transit.ReasonVersionNotLoaded:
		if te.Version != 0 {
			s += " (version " + itoa(te.Version) + ")"
		}
	}
	return s
}

// itemError is the error text of a batch item, and whether it was the
// caller's (else the service's).
func (h *Handler) itemError(c *call, err error) (string, bool) {
	e := h.refusal(c, err)
	return e.Description, e.Status < 500
}
