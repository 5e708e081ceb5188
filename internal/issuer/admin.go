package issuer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/keygate/keygate/internal/store"
)

// Admin is the management API: clients, users, signing keys and
// revocations. It belongs on the admin listener, and every request must
// carry the admin token as a bearer token.
type Admin struct {
	svc   *Service
	token Bearer // the admin token
}

// NewAdmin returns the admin API guarded by the admin token.
func NewAdmin(svc *Service, adminToken Bearer) (*Admin, error) {
	if !adminToken.Set() {
		return nil, errors.New("issuer: the admin API needs an admin token")
	}
	return &Admin{svc: svc, token: adminToken}, nil
}

// Handler routes the admin API.
func (a *Admin) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/admin/clients", a.createClient)
	mux.HandleFunc("GET /v1/admin/clients", a.listClients)
	mux.HandleFunc("POST /v1/admin/clients/{id}/secret", a.rotateSecret)
	mux.HandleFunc("DELETE /v1/admin/clients/{id}", a.deleteClient)
	mux.HandleFunc("PATCH /v1/admin/clients/{id}", a.updateClient)
	mux.HandleFunc("POST /v1/admin/users", a.createUser)
	mux.HandleFunc("GET /v1/admin/users", a.listUsers)
	mux.HandleFunc("DELETE /v1/admin/users/{id}", a.deleteUser)
	mux.HandleFunc("PATCH /v1/admin/users/{id}", a.updateUser)
	mux.HandleFunc("POST /v1/admin/keys/rotate", a.rotateKey)
	mux.HandleFunc("GET /v1/admin/keys", a.listKeys)
	mux.HandleFunc("POST /v1/admin/revocations", a.revoke)
	return a.token.Require("keygate-admin", mux)
}

// decode reads a bounded JSON body strictly.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil || dec.Decode(&struct{}{}) != io.EOF {
		adminError(w, http.StatusBadRequest, "invalid_request", "the body must be one JSON object with known fields")
		return false
	}
	return true
}

func adminError(w http.ResponseWriter, status int, code, desc string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": desc})
}

// hashError answers a password that could not be hashed: 503 when every
// hash slot stayed busy, else 400 (too short).
func hashError(w http.ResponseWriter, err error) {
	if errors.Is(err, errHashBusy) {
		w.Header().Set("Retry-After", "1")
		adminError(w, http.StatusServiceUnavailable, "temporarily_unavailable", errHashesBusy.description)
		return
	}
	adminError(w, http.StatusBadRequest, "invalid_request", err.Error())
}

func (a *Admin) storeError(w http.ResponseWriter, what string, err error) {
	switch {
	case errors.Is(err, store.ErrNotFound):
		adminError(w, http.StatusNotFound, "not_found", what+" does not exist")
	case errors.Is(err, store.ErrConflict):
		adminError(w, http.StatusConflict, "conflict", what+" already exists")
	default:
		a.svc.fail(w, what, err)
	}
}

// checkScopes refuses scope names that are not RFC 6749 §3.3 scope-tokens
// (printable ASCII but space, '"' and '\\'): they would not survive the
// space-separated "scope" claim and parameter, and a user given
// "admin read" must not come out holding both "admin" and "read".
func checkScopes(w http.ResponseWriter, scopes []string) bool {
	for _, s := range scopes {
		if !scopeToken(s) {
			adminError(w, http.StatusBadRequest, "invalid_scope", "a scope is one or more printable ASCII characters other than space, quote and backslash")
			return false
		}
	}
	return true
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
	Name      string    `json:"name"`
	Scopes    []string  `json:"scopes"`
	Secret    string    `json:"client_secret,omitempty"` // only when just created or rotated
	CreatedAt time.Time `json:"created_at"`
}

func (a *Admin) createClient(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Name   string   `json:"name"`
		Scopes []string `json:"scopes"`
	}
	if !decode(w, r, &in) {
		return
	}
	if in.Name == "" || len(in.Name) > 200 {
		adminError(w, http.StatusBadRequest, "invalid_request", "name is required (at most 200 characters)")
		return
	}
	if !checkScopes(w, in.Scopes) {
		return
	}
	id, err := randomID(a.svc.cfg.Rand, "kgc_")
	if err != nil {
		a.svc.fail(w, "making a client id", err)
		return
	}
	secret, err := NewSecret(a.svc.cfg.Rand)
	if err != nil {
		a.svc.fail(w, "making a client secret", err)
		return
	}
	now := a.svc.cfg.Now().UTC()
	d := SecretDigest(secret)
	c := store.Client{ID: id, Name: in.Name, SecretDigest: d[:], Scopes: slices.Clone(in.Scopes), CreatedAt: now, UpdatedAt: now}
	err = a.svc.cfg.Store.CreateClient(r.Context(), c)
	a.svc.clients.forget(id) // a request that named the id before it existed cached it as unknown
	if err != nil {
		a.storeError(w, "client", err)
		return
	}
	writeJSON(w, http.StatusCreated, clientView{ID: id, Name: c.Name, Scopes: c.Scopes, Secret: secret, CreatedAt: now})
}

func (a *Admin) listClients(w http.ResponseWriter, r *http.Request) {
	cs, err := a.svc.cfg.Store.ListClients(r.Context())
	if err != nil {
		a.storeError(w, "clients", err)
		return
	}
	out := make([]clientView, 0, len(cs))
	for _, c := range cs {
		out = append(out, clientView{ID: c.ID, Name: c.Name, Scopes: c.Scopes, CreatedAt: c.CreatedAt})
	}
	writeJSON(w, http.StatusOK, map[string]any{"clients": out})
}

func (a *Admin) rotateSecret(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	secret, err := NewSecret(a.svc.cfg.Rand)
	if err != nil {
		a.svc.fail(w, "making a client secret", err)
		return
	}
	d := SecretDigest(secret)
	err = a.svc.cfg.Store.UpdateClientSecret(r.Context(), id, d[:], a.svc.cfg.Now().UTC())
	a.svc.clients.forget(id)
	if err != nil {
		a.storeError(w, "client", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"client_id": id, "client_secret": secret})
}

// updateClient changes a client's name or scopes. Fewer scopes also revoke
// the client_credentials tokens issued to it until now, so that none
// carries a scope the client lost; its secret is rotated on its own
// endpoint.
func (a *Admin) updateClient(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Name   *string   `json:"name"`
		Scopes *[]string `json:"scopes"`
	}
	if !decode(w, r, &in) {
		return
	}
	if in.Name == nil && in.Scopes == nil {
		adminError(w, http.StatusBadRequest, "invalid_request", "give at least one of name and scopes")
		return
	}
	if in.Name != nil && (*in.Name == "" || len(*in.Name) > 200) {
		adminError(w, http.StatusBadRequest, "invalid_request", "name is required (at most 200 characters)")
		return
	}
	if in.Scopes != nil && !checkScopes(w, *in.Scopes) {
		return
	}
	id := r.PathValue("id")
	c, err := a.svc.cfg.Store.GetClient(r.Context(), id)
	if err != nil {
		a.storeError(w, "client", err)
		return
	}
	if in.Name != nil {
		c.Name = *in.Name
	}
	revoke := in.Scopes != nil && narrowed(c.Scopes, *in.Scopes)
	if in.Scopes != nil {
		c.Scopes = slices.Clone(*in.Scopes)
	}
	if !a.writeRevoking(w, r, "client", id, revoke, func(ctx context.Context) error {
		defer a.svc.clients.forget(id)
		c.UpdatedAt = a.svc.cfg.Now().UTC()
		return a.svc.cfg.Store.UpdateClient(ctx, c)
	}) {
		return
	}
	writeJSON(w, http.StatusOK, clientView{ID: c.ID, Name: c.Name, Scopes: c.Scopes, CreatedAt: c.CreatedAt})
}

// deleteClient removes a client and revokes the client_credentials tokens
// issued to it (their subject is the client). Its refresh tokens die with
// it, since no one can authenticate as it; access tokens it obtained for
// users stay valid until they expire. An unknown id is 404 with nothing
// recorded.
func (a *Admin) deleteClient(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := a.svc.cfg.Store.GetClient(r.Context(), id); err != nil {
		a.storeError(w, "client", err)
		return
	}
	if a.writeRevoking(w, r, "client", id, true, func(ctx context.Context) error {
		defer a.svc.clients.forget(id)
		return a.svc.cfg.Store.DeleteClient(ctx, id)
	}) {
		w.WriteHeader(http.StatusNoContent)
	}
}

// writeRevoking writes a change to the client or user (what) id, and when
// revoke is set the change ends what was issued to it: everything issued
// to subject id until then is revoked, fleet-wide, both before the write
// and after it. The revocation before is stored first so that a write that
// fails (perhaps having committed) does not leave alive tokens the change
// should have ended; the one after covers what a login, a refresh or
// another node's client cache read of the old state between the two
// (their tokens are dated before that read). When a step fails it has
// answered with the error and returns false. If only the second revocation
// failed, the change is in and the first covers the tokens issued before
// it; repeating the request does not revoke again when the change is
// already made (a disable, narrowed scopes, a delete), so what was issued
// between the two lives until it expires unless the subject is revoked
// (POST /v1/admin/revocations).
func (a *Admin) writeRevoking(w http.ResponseWriter, r *http.Request, what, id string, revoke bool, write func(context.Context) error) bool {
	if revoke {
		if err := a.svc.revokeSubject(r.Context(), id); err != nil {
			a.storeError(w, "revocation", err)
			return false
		}
	}
	if err := write(r.Context()); err != nil {
		a.storeError(w, what, err)
		return false
	}
	if revoke {
		if err := a.svc.revokeSubject(r.Context(), id); err != nil {
			a.storeError(w, "revocation", err)
			return false
		}
	}
	return true
}

type userView struct {
	ID        string    `json:"id"`
	Username  string    `json:"username"`
	Scopes    []string  `json:"scopes"`
	Disabled  bool      `json:"disabled"`
	CreatedAt time.Time `json:"created_at"`
}

func (a *Admin) createUser(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Username string   `json:"username"`
		Password string   `json:"password"`
		Scopes   []string `json:"scopes"`
	}
	if !decode(w, r, &in) {
		return
	}
	if in.Username == "" || len(in.Username) > 200 {
		adminError(w, http.StatusBadRequest, "invalid_request", "username is required (at most 200 characters)")
		return
	}
	if !checkScopes(w, in.Scopes) {
		return
	}
	hash, err := a.svc.hashPassword(r.Context(), in.Password)
	if err != nil {
		hashError(w, err)
		return
	}
	id, err := randomID(a.svc.cfg.Rand, "kgu_")
	if err != nil {
		a.svc.fail(w, "making a user id", err)
		return
	}
	now := a.svc.cfg.Now().UTC()
	u := store.User{ID: id, Username: in.Username, PasswordHash: hash, Scopes: in.Scopes, CreatedAt: now, UpdatedAt: now}
	if err := a.svc.cfg.Store.CreateUser(r.Context(), u); err != nil {
		a.storeError(w, "user", err)
		return
	}
	writeJSON(w, http.StatusCreated, userView{ID: id, Username: u.Username, Scopes: u.Scopes, CreatedAt: now})
}

func (a *Admin) listUsers(w http.ResponseWriter, r *http.Request) {
	us, err := a.svc.cfg.Store.ListUsers(r.Context())
	if err != nil {
		a.storeError(w, "users", err)
		return
	}
	out := make([]userView, 0, len(us))
	for _, u := range us {
		out = append(out, userView{ID: u.ID, Username: u.Username, Scopes: u.Scopes, Disabled: u.Disabled, CreatedAt: u.CreatedAt})
	}
	writeJSON(w, http.StatusOK, map[string]any{"users": out})
}

// updateUser changes a user's password, scopes or disabled flag. A new
// password, narrower scopes or disabling also revoke everything issued to
// the user until now (stored before the change, as for a delete), so that
// no session outlives what ended it; enabling or widening scopes does not.
func (a *Admin) updateUser(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Password *string   `json:"password"`
		Scopes   *[]string `json:"scopes"`
		Disabled *bool     `json:"disabled"`
	}
	if !decode(w, r, &in) {
		return
	}
	if in.Password == nil && in.Scopes == nil && in.Disabled == nil {
		adminError(w, http.StatusBadRequest, "invalid_request", "give at least one of password, scopes and disabled")
		return
	}
	u, err := a.svc.cfg.Store.GetUser(r.Context(), r.PathValue("id"))
	if err != nil {
		a.storeError(w, "user", err)
		return
	}
	revoke := false
	if in.Password != nil {
		if u.PasswordHash, err = a.svc.hashPassword(r.Context(), *in.Password); err != nil {
			hashError(w, err)
			return
		}
		revoke = true
	}
	if in.Scopes != nil {
		if !checkScopes(w, *in.Scopes) {
			return
		}
		revoke = revoke || narrowed(u.Scopes, *in.Scopes)
		u.Scopes = slices.Clone(*in.Scopes)
	}
	if in.Disabled != nil {
		revoke = revoke || (*in.Disabled && !u.Disabled)
		u.Disabled = *in.Disabled
	}
	if !a.writeRevoking(w, r, "user", u.ID, revoke, func(ctx context.Context) error {
		u.UpdatedAt = a.svc.cfg.Now().UTC()
		return a.svc.cfg.Store.UpdateUser(ctx, u)
	}) {
		return
	}
	writeJSON(w, http.StatusOK, userView{ID: u.ID, Username: u.Username, Scopes: u.Scopes, Disabled: u.Disabled, CreatedAt: u.CreatedAt})
}

// deleteUser removes a user and revokes everything issued to them: their
// access tokens at once and their refresh tokens at next use. An unknown
// id is 404 with nothing recorded.
func (a *Admin) deleteUser(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := a.svc.cfg.Store.GetUser(r.Context(), id); err != nil {
		a.storeError(w, "user", err)
		return
	}
	if a.writeRevoking(w, r, "user", id, true, func(ctx context.Context) error {
		return a.svc.cfg.Store.DeleteUser(ctx, id)
	}) {
		w.WriteHeader(http.StatusNoContent)
	}
}

func (a *Admin) rotateKey(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Immediate bool `json:"immediate"`
	}
	if r.ContentLength != 0 && !decode(w, r, &in) {
		return
	}
	kid, err := a.svc.cfg.Keys.Rotate(r.Context(), in.Immediate)
	if err != nil {
		a.svc.fail(w, "rotating the signing key", err)
		return
	}
	if a.svc.cfg.Rotated != nil {
		a.svc.cfg.Rotated(kid)
	}
	writeJSON(w, http.StatusOK, map[string]string{"kid": kid})
}

func (a *Admin) listKeys(w http.ResponseWriter, r *http.Request) {
	ks, err := a.svc.cfg.Store.ListSigningKeys(r.Context())
	if err != nil {
		a.storeError(w, "signing keys", err)
		return
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
	if s := a.svc.cfg.Keys.Signer(); s != nil {
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
// issuer, of the tokens of an issuer the gateway trusts (Config.Trusts).
// until is when it may be forgotten: for a jti the token's expiry (default
// now + the access-token lifetime, or ExternalTokenLifetime for another
// issuer); for a subject, optional, a time to keep it at least until, for
// tokens that live longer than the default retention.
func (a *Admin) revoke(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Issuer  string    `json:"issuer"`
		JTI     string    `json:"jti"`
		Until   time.Time `json:"until"`
		Subject string    `json:"subject"`
		Before  time.Time `json:"before"`
	}
	if !decode(w, r, &in) {
		return
	}
	own := a.svc.cfg.Issuer
	if in.Issuer == "" {
		in.Issuer = own
	}
	if in.Issuer != own && (a.svc.cfg.Trusts == nil || !a.svc.cfg.Trusts(in.Issuer)) {
		adminError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf(
			"issuer %q is not trusted here: give the token service's issuer (%q, the default) or one of the gateway's issuers", in.Issuer, own))
		return
	}
	now := a.svc.cfg.Now().UTC()
	rv := store.Revocation{Issuer: in.Issuer, CreatedAt: now}
	switch {
	case in.JTI != "" && in.Subject == "":
		if in.Until.IsZero() {
			lifetime := a.svc.cfg.AccessTokenTTL
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
		adminError(w, http.StatusBadRequest, "invalid_request", "give either jti or subject")
		return
	}
	if err := a.svc.addRevocation(r.Context(), rv); err != nil {
		a.storeError(w, "revocation", err)
		return
	}
	writeJSON(w, http.StatusCreated, revocationView(rv))
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
