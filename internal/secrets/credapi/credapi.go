// Package credapi serves the credentials keygate makes, in Vault's shapes:
// one-time codes from Vault's TOTP engine at /v1/totp/ (package totp) and
// passwords from Vault's password policies at /v1/sys/policies/password/
// (package passwordpolicy), each tenant's kept as records beside its
// secrets, sealed like them. A request carries a keygate token as the
// other Vault APIs do (package vaultauth); its tenant's keys and policies
// are the only ones it can name, and another tenant's answer 404 as a
// missing one does.
//
// # Scopes
//
//	totp:admin                  create, read, list and delete TOTP keys
//	totp:code:<glob>            generate a code of a key the glob matches
//	totp:validate:<glob>        validate a code of such a key
//	passwords:admin             put, read, list and delete password policies
//	passwords:generate:<glob>   generate a password from such a policy
//
// A glob is a name, or a prefix followed by '*' ("*" alone: every name).
// The decision is made from the scopes alone, before anything is looked up.
//
// # Audit
//
// Each request's audit record names its operation (totp.keys.create,
// totp.code.validate, password_policy.generate, ...), tenant, caller and
// the key's or policy's name; never a key, a code, a URL or a password.
package credapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/keygate/keygate/internal/audit"
	"github.com/keygate/keygate/internal/audit/httpaudit"
	"github.com/keygate/keygate/internal/httperr"
	"github.com/keygate/keygate/internal/secrets"
	"github.com/keygate/keygate/internal/secrets/passwordpolicy"
	"github.com/keygate/keygate/internal/secrets/totp"
	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/vaultauth"
	"github.com/keygate/keygate/internal/verify"
)

// Where the APIs are mounted.
const (
	TOTPPrefix     = "/v1/totp/"
	PoliciesPrefix = "/v1/sys/policies/password/"
	// PoliciesList is the policies' list path without its slash.
	PoliciesList = "/v1/sys/policies/password"
)

// MaxBodyBytes bounds a request body.
const MaxBodyBytes = 64 << 10

// Where the records are kept, under the engine's internal view.
const (
	totpFolder   = secrets.InternalPrefix + "totp/"
	policyFolder = secrets.InternalPrefix + "password-policy/"
)

// Records is the secret store's view of keygate's own records
// (secrets.Engine.Internal).
type Records interface {
	totp.Store
}

// Options configure the handler.
type Options struct {
	Records  Records
	Verifier vaultauth.Verifier
	Sealed   func() bool // nil: never sealed
	Now      func() time.Time
	Logger   *slog.Logger
	// Measure, if set, is told of every request once it is answered: its
	// operation ("credentials" when no route matched), status, reason and
	// the time it took (metrics).
	Measure func(op string, status int, reason string, elapsed time.Duration)
}

// Operations lists the operations the handler names, for metrics.
func Operations() []string {
	return []string{"totp.keys.list", "totp.keys.read", "totp.keys.create", "totp.keys.delete", "totp.code.generate",
		"totp.code.validate", "password_policy.list", "password_policy.read", "password_policy.write",
		"password_policy.delete", "password_policy.generate"}
}

// Handler serves both APIs.
type Handler struct {
	keys     *totp.Keys
	policies *passwordpolicy.Policies
	verifier vaultauth.Verifier
	sealed   func() bool
	errs     httperr.Writer
	log      *slog.Logger
	measure  func(op string, status int, reason string, elapsed time.Duration)
}

// New returns the handler of TOTPPrefix, PoliciesPrefix and PoliciesList.
func New(o Options) (*Handler, error) {
	if o.Records == nil || o.Verifier == nil {
		return nil, errors.New("credapi.Options: Records and Verifier are required")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Sealed == nil {
		o.Sealed = func() bool { return false }
	}
	return &Handler{keys: totp.NewKeys(o.Records, totpFolder, o.Now), policies: passwordpolicy.NewPolicies(o.Records, policyFolder),
		verifier: o.Verifier, sealed: o.Sealed, errs: httperr.Writer{Envelope: httperr.Vault, Log: o.Logger}, log: o.Logger,
		measure: o.Measure}, nil
}

// call is one request.
type call struct {
	w      http.ResponseWriter
	r      *http.Request
	ctx    context.Context
	note   *httpaudit.Note
	auth   *verify.Result
	tenant string
	rt     *route
	params map[string]any
	out    any // the envelope's data; nil: 204
}

// ServeHTTP serves one request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	c := &call{w: w, r: r, ctx: r.Context(), note: httpaudit.From(w)}
	status, reason := h.answer(c, h.serve(c))
	if h.measure != nil {
		op := "credentials"
		if c.rt != nil {
			op = string(c.rt.op)
		}
		h.measure(op, status, reason, time.Since(start))
	}
}

// answer writes the call's answer, or err's refusal, and returns its
// status and reason.
func (h *Handler) answer(c *call, err error) (int, string) {
	w := c.w
	w.Header().Set("Cache-Control", "no-store")
	if err != nil {
		e := refusal(err)
		if e == httperr.Internal {
			h.log.Error("credentials request failed", "path", c.r.URL.Path, "err", err)
		}
		c.note.Reason(e.Code)
		h.errs.Write(w, c.r, e)
		return e.Status, e.Code
	}
	if c.out == nil {
		w.WriteHeader(http.StatusNoContent)
		return http.StatusNoContent, ""
	}
	b, _ := json.Marshal(vaultauth.Envelope{RequestID: vaultauth.RequestID(c.note), Data: c.out})
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(b, '\n')) //nolint:errcheck // the client went away
	return http.StatusOK, ""
}

// route is one operation: its audit name, the scope it needs, and what it
// does.
type route struct {
	op     audit.Operation
	scope  string // "totp:admin", or "totp:code:" + a name to match
	name   string
	run    func(c *call) error
	change bool // it writes: its pending record is kept first
}

func (h *Handler) serve(c *call) error {
	rt, err := h.route(c.r)
	if err != nil {
		return err
	}
	c.rt = rt
	c.note.Op(rt.op)
	if h.sealed() {
		return errSealed
	}
	if c.auth, c.tenant, err = vaultauth.Authenticate(c.ctx, c.r.Header, h.verifier); err != nil {
		return err
	}
	c.note.Tenant(c.tenant)
	vaultauth.Caller(c.note, c.auth)
	if rt.name != "" {
		c.note.Key(rt.name, 0)
	}
	if vaultauth.WantsWrapping(c.r.Header) {
		return vaultauth.ErrWrapping
	}
	if !permits(scopes(c.auth), rt.scope, rt.name) {
		return &httperr.Error{Status: http.StatusForbidden, Code: "insufficient_scope",
			Description: "permission denied: the token's scopes do not grant " + need(rt.scope, rt.name)}
	}
	if err := c.readParams(); err != nil {
		return err
	}
	if rt.change && c.note != nil {
		if err := c.note.Intent(c.ctx); err != nil {
			return err
		}
	}
	return rt.run(c)
}

// scopes is the token's scope claim.
func scopes(res *verify.Result) string {
	s, _ := res.Token.Claims.StringClaim("scope")
	return s
}

// permits reports whether one of the space-separated scopes grants need:
// an admin scope as it is, or a prefix ("totp:code:") followed by a glob
// that matches name.
func permits(scopes, need, name string) bool {
	for scopes != "" {
		var s string
		s, scopes, _ = strings.Cut(scopes, " ")
		if strings.HasSuffix(need, ":admin") {
			if s == need {
				return true
			}
			continue
		}
		glob, ok := strings.CutPrefix(s, need)
		switch {
		case !ok || glob == "":
		case strings.HasSuffix(glob, "*"):
			prefix := strings.TrimSuffix(glob, "*")
			if !strings.Contains(prefix, "*") && strings.HasPrefix(name, prefix) {
				return true
			}
		case glob == name:
			return true
		}
	}
	return false
}

func need(scope, name string) string {
	if strings.HasSuffix(scope, ":admin") {
		return scope
	}
	return scope + name
}

// readParams reads a JSON object body, if any (Vault's clients send
// numbers and booleans as strings too: see the param helpers).
func (c *call) readParams() error {
	c.params = map[string]any{}
	if c.r.Body == nil || c.r.Method == http.MethodGet || c.r.Method == http.MethodDelete || c.r.Method == "LIST" {
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(c.r.Body, MaxBodyBytes+1))
	switch {
	case err != nil:
		return badRequest("reading the request body: " + err.Error())
	case len(b) > MaxBodyBytes:
		return &httperr.Error{Status: http.StatusRequestEntityTooLarge, Code: "too_large", Description: "request body too large"}
	case len(strings.TrimSpace(string(b))) == 0:
		return nil
	}
	// A key given twice would be read one way here and another way by a
	// proxy or an audit reader in front: refused, as the KV API does.
	if err := secrets.CheckObject("the request body", b); err != nil {
		return badRequest(err.Error())
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	if err := dec.Decode(&c.params); err != nil {
		return badRequest("the request body is not a JSON object")
	}
	return nil
}

// Refusals.
var (
	errSealed  = &httperr.Error{Status: http.StatusServiceUnavailable, Code: "sealed", Description: "Vault is sealed"}
	errNoPath  = &httperr.Error{Status: http.StatusNotFound, Code: "unsupported_path", Description: "unsupported path"}
	errMethod  = &httperr.Error{Status: http.StatusMethodNotAllowed, Code: "unsupported_operation", Description: "unsupported operation"}
	errNothing = &httperr.Error{Status: http.StatusNotFound, Code: "not_found"}
	errStore   = &httperr.Error{Status: http.StatusServiceUnavailable, Code: "store_unavailable", Description: "store unavailable", RetryAfter: time.Second}
)

func badRequest(desc string) *httperr.Error {
	return &httperr.Error{Status: http.StatusBadRequest, Code: "invalid_request", Description: desc}
}

// refusal maps an error to its answer.
func refusal(err error) *httperr.Error {
	var he *httperr.Error
	switch {
	case errors.As(err, &he):
		return he
	case errors.Is(err, totp.ErrTooMany):
		return &httperr.Error{Status: http.StatusTooManyRequests, Code: "too_many_codes", Description: err.Error(), RetryAfter: time.Second}
	case errors.Is(err, totp.ErrNotFound) || errors.Is(err, totp.ErrUsed):
		return badRequest(err.Error()) // Vault answers both 400 with its text
	case errors.Is(err, passwordpolicy.ErrNotFound):
		return errNothing
	case errors.Is(err, totp.ErrInvalid) || errors.Is(err, passwordpolicy.ErrInvalid) || errors.Is(err, secrets.ErrInvalid):
		return badRequest(err.Error())
	case errors.Is(err, secrets.ErrSealed):
		return errSealed
	case errors.Is(err, store.ErrUnavailable):
		return errStore
	}
	return httperr.Internal
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
