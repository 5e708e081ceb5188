// Package admin is keygate's management API: tenants, clients, users,
// signing keys and revocations, served on the admin listener to the bearer
// of the admin token. It writes what the token service reads from the store,
// and tells the token service (package issuer) what must take effect at
// once: a client changed, a revocation, a key rotated.
package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/keygate/keygate/internal/audit/httpaudit"
	"github.com/keygate/keygate/internal/httperr"
	"github.com/keygate/keygate/internal/issuer"
	"github.com/keygate/keygate/internal/mint"
	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/strictjson"
)

// Store is what the admin API needs of the store: it writes tenants,
// clients and users, lists the signing keys, and counts a tenant's transit
// keys and secrets when it refuses to delete the tenant. The methods are store.Store's,
// with the contracts written there, and every backend implements them.
// Revocations go through the token service (issuer.Service.AddRevocation).
type Store interface {
	CreateTenant(ctx context.Context, t store.Tenant) error
	GetTenant(ctx context.Context, name string) (store.Tenant, error)
	ListTenants(ctx context.Context) ([]store.Tenant, error)
	DeleteTenant(ctx context.Context, name string) error

	CreateClient(ctx context.Context, c store.Client) error
	GetClient(ctx context.Context, id string) (store.Client, error)
	ListClients(ctx context.Context) ([]store.Client, error)
	ListClientsIn(ctx context.Context, tenant string) ([]store.Client, error)
	UpdateClientSecret(ctx context.Context, id string, digest []byte, at time.Time) error
	UpdateClient(ctx context.Context, c store.Client) error
	DeleteClient(ctx context.Context, id string) error

	CreateUser(ctx context.Context, u store.User) error
	GetUser(ctx context.Context, id string) (store.User, error)
	ListUsers(ctx context.Context) ([]store.User, error)
	ListUsersIn(ctx context.Context, tenant string) ([]store.User, error)
	UpdateUser(ctx context.Context, u store.User) error
	DeleteUser(ctx context.Context, id string) error

	ListSigningKeys(ctx context.Context) ([]store.SigningKey, error)
	ListTransitKeys(ctx context.Context, tenant string) ([]string, error)
	ListSecrets(ctx context.Context, tenant, prefix, start string, limit int) ([]string, error)
}

var _ Store = store.Store(nil) // the whole store, and so each backend, is one

// API is the management API: tenants, clients, users, signing keys and
// revocations. It belongs on the admin listener, and every request must
// carry the admin token as a bearer token.
type API struct {
	tokens *issuer.Service
	cfg    issuer.Config // the token service's: its clock, random source, keys, publisher
	store  Store
	token  issuer.Bearer // the admin token
}

// New returns the admin API of the token service tokens, writing to st
// (the store tokens reads), guarded by the admin token.
func New(tokens *issuer.Service, st Store, adminToken issuer.Bearer) (*API, error) {
	if !adminToken.Set() {
		return nil, errors.New("the admin API needs an admin token")
	}
	return &API{tokens: tokens, cfg: tokens.Config(), store: st, token: adminToken}, nil
}

// Handler routes the admin API.
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	for pattern, h := range a.routes() {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			err := noteAdmin(w, r) // the audit record's; a change waits for its pending record
			if err == nil {
				err = h(w, r)
			}
			if err != nil {
				a.tokens.WriteError(w, r, err)
			}
		})
	}
	return a.token.Require("keygate-admin", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Authenticated from here on: an unknown path or method is the
		// admin's mistake, recorded as such, never a stranger's refusal.
		httpaudit.From(w).Admin()
		mux.ServeHTTP(w, r)
	}))
}

// routes are the admin API's route patterns and their handlers; each has
// its audit operation in adminOps.
func (a *API) routes() map[string]func(http.ResponseWriter, *http.Request) error {
	return map[string]func(http.ResponseWriter, *http.Request) error{
		"POST /v1/admin/tenants":             a.createTenant,
		"GET /v1/admin/tenants":              a.listTenants,
		"GET /v1/admin/tenants/{name}":       a.getTenant,
		"DELETE /v1/admin/tenants/{name}":    a.deleteTenant,
		"POST /v1/admin/clients":             a.createClient,
		"GET /v1/admin/clients":              a.listClients,
		"POST /v1/admin/clients/{id}/secret": a.rotateSecret,
		"DELETE /v1/admin/clients/{id}":      a.deleteClient,
		"PATCH /v1/admin/clients/{id}":       a.updateClient,
		"POST /v1/admin/users":               a.createUser,
		"GET /v1/admin/users":                a.listUsers,
		"DELETE /v1/admin/users/{id}":        a.deleteUser,
		"PATCH /v1/admin/users/{id}":         a.updateUser,
		"POST /v1/admin/keys/rotate":         a.rotateKey,
		"GET /v1/admin/keys":                 a.listKeys,
		"POST /v1/admin/revocations":         a.revoke,
	}
}

// decode reads a bounded JSON body strictly. A refusal names the field that
// is unknown or of the wrong type, so that a caller can fix the request
// without reading the code.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10))
	if err == nil {
		err = strictjson.ExactFields(raw, v)
		if err != nil && strings.HasPrefix(err.Error(), "unknown field ") {
			return invalidRequest(err.Error())
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err == nil {
		err = dec.Decode(v)
	}
	if err == nil && dec.Decode(&struct{}{}) != io.EOF {
		return invalidRequest("the body must be one JSON object, and nothing after it")
	}
	if err == nil {
		return nil
	}
	var typeErr *json.UnmarshalTypeError
	var maxErr *http.MaxBytesError
	switch {
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return invalidRequest(fmt.Sprintf("field %q: want %s, got a JSON %s", typeErr.Field, jsonKind(typeErr.Type.Kind()), typeErr.Value))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return invalidRequest("unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field "))
	case errors.As(err, &maxErr):
		return invalidRequest("the body is over 64 KiB")
	}
	return invalidRequest("the body must be one JSON object")
}

// jsonKind says what JSON a Go kind is decoded from.
func jsonKind(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return "a value"
	}
	return "a number"
}

// writeJSON sends v as the JSON body, with the headers RFC 6749 §5.1 asks
// of a token endpoint's answer: the admin API's answers carry secrets too.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"error":"server_error"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	w.WriteHeader(status)
	w.Write(append(body, '\n')) //nolint:errcheck // the client went away
}

// randomID returns prefix followed by 128 random bits, base64url (a jti,
// as mint.NewID makes them): a client's or a user's id.
func randomID(r io.Reader, prefix string) (string, error) {
	id, err := mint.NewID(r)
	return prefix + id, err
}

func invalidRequest(desc string) *httperr.Error {
	return &httperr.Error{Status: http.StatusBadRequest, Code: "invalid_request", Description: desc}
}

var (
	errNameRequired = invalidRequest("name is required (at most 200 characters)")
	errBadScope     = &httperr.Error{Status: http.StatusBadRequest, Code: "invalid_scope",
		Description: "a scope is one or more printable ASCII characters other than space, quote and backslash"}
)

// hashError is a password that could not be hashed: 503 when every hash
// slot stayed busy (see issuer.Service.WriteError), else 400 (too short).
func hashError(err error) error {
	if errors.Is(err, issuer.ErrHashBusy) {
		return err
	}
	return invalidRequest(err.Error())
}

// storeError is a failed store operation on what: 404 or 409 when the
// store says so, else the failure itself (see issuer.Service.WriteError).
func storeError(what string, err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return &httperr.Error{Status: http.StatusNotFound, Code: "not_found", Description: what + " does not exist"}
	case errors.Is(err, store.ErrConflict):
		return &httperr.Error{Status: http.StatusConflict, Code: "conflict", Description: what + " already exists"}
	}
	return fmt.Errorf("%s: %w", what, err)
}

// checkScopes refuses scope names that are not RFC 6749 §3.3 scope-tokens
// (printable ASCII but space, '"' and '\\'): they would not survive the
// space-separated "scope" claim and parameter, and a user given
// "admin read" must not come out holding both "admin" and "read".
func checkScopes(scopes []string) error {
	for _, s := range scopes {
		if !scopeToken(s) {
			return errBadScope
		}
	}
	return nil
}

// narrowed reports whether next lacks a scope of prev: tokens issued under
// prev may then carry a scope their holder no longer has.
func narrowed(prev, next []string) bool {
	return slices.ContainsFunc(prev, func(s string) bool { return !slices.Contains(next, s) })
}

func scopeToken(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return s != ""
}

type clientView struct {
	ID        string    `json:"client_id"`
	Tenant    string    `json:"tenant"`
	Name      string    `json:"name"`
	Scopes    []string  `json:"scopes"`
	Secret    string    `json:"client_secret,omitempty"` // only when just created or rotated
	CreatedAt time.Time `json:"created_at"`
}

func (a *API) createClient(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		Name   string   `json:"name"`
		Scopes []string `json:"scopes"`
		Tenant string   `json:"tenant"`
	}
	if err := decode(w, r, &in); err != nil {
		return err
	}
	if in.Name == "" || len(in.Name) > 200 {
		return errNameRequired
	}
	if err := checkScopes(in.Scopes); err != nil {
		return err
	}
	tenant, err := store.TenantOrDefault(in.Tenant)
	if err != nil {
		return invalidTenant(err)
	}
	httpaudit.From(w).Tenant(tenant)
	id, err := randomID(a.cfg.Rand, "kgc_")
	if err != nil {
		return fmt.Errorf("making a client id: %w", err)
	}
	httpaudit.From(w).Hash("id", id)
	secret, err := issuer.NewSecret(a.cfg.Rand)
	if err != nil {
		return fmt.Errorf("making a client secret: %w", err)
	}
	now := a.cfg.Now().UTC()
	d := issuer.SecretDigest(secret)
	c := store.Client{ID: id, Tenant: tenant, Name: in.Name, SecretDigest: d[:], Scopes: slices.Clone(in.Scopes), CreatedAt: now, UpdatedAt: now}
	err = a.store.CreateClient(r.Context(), c)
	a.tokens.ForgetClient(id) // a request that named the id before it existed cached it as unknown
	if err != nil {
		return inTenantError("client", tenant, err)
	}
	writeJSON(w, http.StatusCreated, clientView{ID: id, Tenant: tenant, Name: c.Name, Scopes: c.Scopes, Secret: secret, CreatedAt: now})
	return nil
}

// listClients lists every tenant's clients, or with ?tenant= one tenant's.
func (a *API) listClients(w http.ResponseWriter, r *http.Request) error {
	cs, err := listIn(a, r, "clients", a.store.ListClients, a.store.ListClientsIn)
	if err != nil {
		return err
	}
	out := make([]clientView, 0, len(cs))
	for _, c := range cs {
		out = append(out, clientView{ID: c.ID, Tenant: c.Tenant, Name: c.Name, Scopes: c.Scopes, CreatedAt: c.CreatedAt})
	}
	writeJSON(w, http.StatusOK, map[string]any{"clients": out})
	return nil
}

func (a *API) rotateSecret(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	secret, err := issuer.NewSecret(a.cfg.Rand)
	if err != nil {
		return fmt.Errorf("making a client secret: %w", err)
	}
	d := issuer.SecretDigest(secret)
	err = a.store.UpdateClientSecret(r.Context(), id, d[:], a.cfg.Now().UTC())
	a.tokens.ForgetClient(id)
	if err != nil {
		return storeError("client", err)
	}
	writeJSON(w, http.StatusOK, map[string]string{"client_id": id, "client_secret": secret})
	return nil
}

// updateClient changes a client's name or scopes. Fewer scopes also revoke
// the client_credentials tokens issued to it until now, so that none
// carries a scope the client lost; its secret is rotated on its own
// endpoint. Its tenant is never changed (errFixedTenant).
func (a *API) updateClient(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		Name   *string         `json:"name"`
		Scopes *[]string       `json:"scopes"`
		Tenant json.RawMessage `json:"tenant"`
	}
	if err := decode(w, r, &in); err != nil {
		return err
	}
	if in.Tenant != nil {
		return errFixedTenant("client")
	}
	if in.Name == nil && in.Scopes == nil {
		return invalidRequest("give at least one of name and scopes")
	}
	if in.Name != nil && (*in.Name == "" || len(*in.Name) > 200) {
		return errNameRequired
	}
	if in.Scopes != nil {
		if err := checkScopes(*in.Scopes); err != nil {
			return err
		}
	}
	id := r.PathValue("id")
	c, err := a.store.GetClient(r.Context(), id)
	if err != nil {
		return storeError("client", err)
	}
	if in.Name != nil {
		c.Name = *in.Name
	}
	revoke := in.Scopes != nil && narrowed(c.Scopes, *in.Scopes)
	if in.Scopes != nil {
		c.Scopes = slices.Clone(*in.Scopes)
	}
	if err := a.writeRevoking(r, "client", id, revoke, func(ctx context.Context) error {
		defer a.tokens.ForgetClient(id)
		c.UpdatedAt = a.cfg.Now().UTC()
		return a.store.UpdateClient(ctx, c)
	}); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, clientView{ID: c.ID, Tenant: c.Tenant, Name: c.Name, Scopes: c.Scopes, CreatedAt: c.CreatedAt})
	return nil
}

// deleteClient removes a client and revokes the client_credentials tokens
// issued to it (their subject is the client). Its refresh tokens die with
// it, since no one can authenticate as it; access tokens it obtained for
// users stay valid until they expire. An unknown id is 404 with nothing
// recorded.
func (a *API) deleteClient(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if _, err := a.store.GetClient(r.Context(), id); err != nil {
		return storeError("client", err)
	}
	if err := a.writeRevoking(r, "client", id, true, func(ctx context.Context) error {
		defer a.tokens.ForgetClient(id)
		return a.store.DeleteClient(ctx, id)
	}); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// writeRevoking writes a change to the client or user (what) id, and when
// revoke is set the change ends what was issued to it: everything issued
// to subject id until then is revoked, fleet-wide, both before the write
// and after it. The revocation before is stored first so that a write that
// fails (perhaps having committed) does not leave alive tokens the change
// should have ended; the one after covers what a login, a refresh or
// another node's client cache read of the old state between the two
// (their tokens are dated before that read). When a step fails it returns
// the step's error. If only the second revocation
// failed, the change is in and the first covers the tokens issued before
// it; repeating the request does not revoke again when the change is
// already made (a disable, narrowed scopes, a delete), so what was issued
// between the two lives until it expires unless the subject is revoked
// (POST /v1/admin/revocations).
func (a *API) writeRevoking(r *http.Request, what, id string, revoke bool, write func(context.Context) error) error {
	if revoke {
		if err := a.tokens.RevokeSubject(r.Context(), id); err != nil {
			return storeError("revocation", err)
		}
	}
	if err := write(r.Context()); err != nil {
		return storeError(what, err)
	}
	if revoke {
		if err := a.tokens.RevokeSubject(r.Context(), id); err != nil {
			return storeError("revocation", err)
		}
	}
	return nil
}

type userView struct {
	ID        string    `json:"id"`
	Tenant    string    `json:"tenant"`
	Username  string    `json:"username"`
	Scopes    []string  `json:"scopes"`
	Disabled  bool      `json:"disabled"`
	CreatedAt time.Time `json:"created_at"`
}

func (a *API) createUser(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		Username string   `json:"username"`
		Password string   `json:"password"`
		Scopes   []string `json:"scopes"`
		Tenant   string   `json:"tenant"`
	}
	if err := decode(w, r, &in); err != nil {
		return err
	}
	if in.Username == "" || len(in.Username) > 200 {
		return invalidRequest("username is required (at most 200 characters)")
	}
	if err := checkScopes(in.Scopes); err != nil {
		return err
	}
	tenant, err := store.TenantOrDefault(in.Tenant)
	if err != nil {
		return invalidTenant(err)
	}
	httpaudit.From(w).Tenant(tenant)
	hash, err := a.tokens.HashPassword(r.Context(), in.Password)
	if err != nil {
		return hashError(err)
	}
	id, err := randomID(a.cfg.Rand, "kgu_")
	if err != nil {
		return fmt.Errorf("making a user id: %w", err)
	}
	httpaudit.From(w).Hash("id", id)
	now := a.cfg.Now().UTC()
	u := store.User{ID: id, Tenant: tenant, Username: in.Username, PasswordHash: hash, Scopes: in.Scopes, CreatedAt: now, UpdatedAt: now}
	if err := a.store.CreateUser(r.Context(), u); err != nil {
		return inTenantError("user", tenant, err)
	}
	writeJSON(w, http.StatusCreated, userView{ID: id, Tenant: tenant, Username: u.Username, Scopes: u.Scopes, CreatedAt: now})
	return nil
}

// listUsers lists every tenant's users, or with ?tenant= one tenant's.
func (a *API) listUsers(w http.ResponseWriter, r *http.Request) error {
	us, err := listIn(a, r, "users", a.store.ListUsers, a.store.ListUsersIn)
	if err != nil {
		return err
	}
	out := make([]userView, 0, len(us))
	for _, u := range us {
		out = append(out, userView{ID: u.ID, Tenant: u.Tenant, Username: u.Username, Scopes: u.Scopes, Disabled: u.Disabled, CreatedAt: u.CreatedAt})
	}
	writeJSON(w, http.StatusOK, map[string]any{"users": out})
	return nil
}

// updateUser changes a user's password, scopes or disabled flag. A new
// password, narrower scopes or disabling also revoke everything issued to
// the user until now (stored before the change, as for a delete), so that
// no session outlives what ended it; enabling or widening scopes does not.
// Their tenant is never changed (errFixedTenant).
func (a *API) updateUser(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		Password *string         `json:"password"`
		Scopes   *[]string       `json:"scopes"`
		Disabled *bool           `json:"disabled"`
		Tenant   json.RawMessage `json:"tenant"`
	}
	if err := decode(w, r, &in); err != nil {
		return err
	}
	if in.Tenant != nil {
		return errFixedTenant("user")
	}
	if in.Password == nil && in.Scopes == nil && in.Disabled == nil {
		return invalidRequest("give at least one of password, scopes and disabled")
	}
	u, err := a.store.GetUser(r.Context(), r.PathValue("id"))
	if err != nil {
		return storeError("user", err)
	}
	revoke := false
	if in.Password != nil {
		if u.PasswordHash, err = a.tokens.HashPassword(r.Context(), *in.Password); err != nil {
			return hashError(err)
		}
		revoke = true
	}
	if in.Scopes != nil {
		if err := checkScopes(*in.Scopes); err != nil {
			return err
		}
		revoke = revoke || narrowed(u.Scopes, *in.Scopes)
		u.Scopes = slices.Clone(*in.Scopes)
	}
	if in.Disabled != nil {
		revoke = revoke || (*in.Disabled && !u.Disabled)
		u.Disabled = *in.Disabled
	}
	if err := a.writeRevoking(r, "user", u.ID, revoke, func(ctx context.Context) error {
		u.UpdatedAt = a.cfg.Now().UTC()
		return a.store.UpdateUser(ctx, u)
	}); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, userView{ID: u.ID, Tenant: u.Tenant, Username: u.Username, Scopes: u.Scopes, Disabled: u.Disabled, CreatedAt: u.CreatedAt})
	return nil
}

// deleteUser removes a user and revokes everything issued to them: their
// access tokens at once and their refresh tokens at next use. An unknown
// id is 404 with nothing recorded.
func (a *API) deleteUser(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if _, err := a.store.GetUser(r.Context(), id); err != nil {
		return storeError("user", err)
	}
	if err := a.writeRevoking(r, "user", id, true, func(ctx context.Context) error {
		return a.store.DeleteUser(ctx, id)
	}); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) rotateKey(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		Immediate bool `json:"immediate"`
	}
	if r.ContentLength != 0 {
		if err := decode(w, r, &in); err != nil {
			return err
		}
	}
	kid, err := a.cfg.Keys.Rotate(r.Context(), in.Immediate)
	if err != nil {
		return fmt.Errorf("rotating the signing key: %w", err)
	}
	httpaudit.From(w).Key(kid, 0)
	if p := a.cfg.Publisher; p != nil {
		p.Rotated(r.Context(), kid)
	}
	writeJSON(w, http.StatusOK, map[string]string{"kid": kid})
	return nil
}

func (a *API) listKeys(w http.ResponseWriter, r *http.Request) error {
	ks, err := a.store.ListSigningKeys(r.Context())
	if err != nil {
		return storeError("signing keys", err)
	}
	type keyView struct {
		KID       string     `json:"kid"`
		Alg       string     `json:"alg"`
		PublishAt time.Time  `json:"publish_at"`
		ActiveAt  time.Time  `json:"active_at"`
		RetireAt  *time.Time `json:"retire_at,omitempty"`
		Signing   bool       `json:"signing"`
	}
	signing := ""
	if s := a.cfg.Keys.Signer(); s != nil {
		signing = s.KeyID()
	}
	out := make([]keyView, 0, len(ks))
	for _, k := range ks {
		v := keyView{KID: k.KID, Alg: k.Alg, PublishAt: k.PublishAt, ActiveAt: k.ActiveAt, Signing: k.KID == signing}
		if !k.RetireAt.IsZero() {
			t := k.RetireAt
			v.RetireAt = &t
		}
		out = append(out, v)
	}
	writeJSON(w, http.StatusOK, map[string]any{"keys": out})
	return nil
}

// ExternalTokenLifetime is how long keygate assumes a token of another
// issuer (a gateway issuer: an identity provider) may live, when a
// revocation of it does not say: a jti revocation without until is kept
// this long, and a subject revocation as long as the token service's own
// (the refresh-token lifetime, also 30 days) unless until asks for longer.
// keygate cannot know those tokens' lifetimes; give until for longer ones.
const ExternalTokenLifetime = 30 * 24 * time.Hour

// revoke records a revocation by jti or of everything issued to a subject
// before a time (default now), of the token service's own tokens or, with
// issuer, of the tokens of an issuer the gateway trusts
// (issuer.Config.Trusts). until is when it may be forgotten: for a jti
// the token's expiry (default now + the access-token lifetime, or
// ExternalTokenLifetime for another issuer); for a subject, optional, a
// time to keep it at least until, for tokens that live longer than the
// default retention.
func (a *API) revoke(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		Issuer  string    `json:"issuer"`
		JTI     string    `json:"jti"`
		Until   time.Time `json:"until"`
		Subject string    `json:"subject"`
		Before  time.Time `json:"before"`
	}
	if err := decode(w, r, &in); err != nil {
		return err
	}
	own := a.cfg.Issuer
	if in.Issuer == "" {
		in.Issuer = own
	}
	if in.Issuer != own && (a.cfg.Trusts == nil || !a.cfg.Trusts(in.Issuer)) {
		return invalidRequest(fmt.Sprintf(
			"issuer %q is not trusted here: give the token service's issuer (%q, the default) or one of the gateway's issuers", in.Issuer, own))
	}
	now := a.cfg.Now().UTC()
	rv := store.Revocation{Issuer: in.Issuer, CreatedAt: now}
	switch {
	case in.JTI != "" && in.Subject == "":
		if in.Until.IsZero() {
			lifetime := a.cfg.AccessTokenTTL
			if in.Issuer != own {
				lifetime = ExternalTokenLifetime
			}
			in.Until = now.Add(lifetime)
		}
		rv.JTI, rv.Until = in.JTI, in.Until.UTC()
	case in.Subject != "" && in.JTI == "":
		if in.Before.IsZero() {
			in.Before = now
		}
		rv.Subject, rv.Before = in.Subject, in.Before.UTC()
		if !in.Until.IsZero() {
			rv.Until = in.Until.UTC()
		}
	default:
		return invalidRequest("give either jti or subject")
	}
	note := httpaudit.From(w)
	note.Hash("jti", rv.JTI)
	note.Hash("subject", rv.Subject)
	if err := a.tokens.AddRevocation(r.Context(), rv); err != nil {
		return storeError("revocation", err)
	}
	writeJSON(w, http.StatusCreated, revocationView(rv))
	return nil
}

// revocationView is a revocation as the admin API shows it: the request's
// own field names, and only the fields of its kind.
func revocationView(rv store.Revocation) map[string]any {
	out := map[string]any{"issuer": rv.Issuer, "created_at": rv.CreatedAt}
	if rv.JTI != "" {
		out["jti"], out["until"] = rv.JTI, rv.Until
	} else {
		out["subject"], out["before"] = rv.Subject, rv.Before
		if !rv.Until.IsZero() {
			out["until"] = rv.Until
		}
	}
	return out
}
