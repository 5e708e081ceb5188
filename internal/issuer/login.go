package issuer

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/keygate/keygate/internal/audit/httpaudit"
	"github.com/keygate/keygate/internal/httperr"
	"github.com/keygate/keygate/internal/mint"
	"github.com/keygate/keygate/internal/store"
)

// Limiter bounds attempts per key (an account, an address); the ratelimit
// package's limiters implement it.
type Limiter interface {
	Allow(ctx context.Context, key string) (ok bool, retryAfter time.Duration, err error)
}

// DefaultRefreshTTL is how long a refresh token lives unless used.
const DefaultRefreshTTL = 30 * 24 * time.Hour

var (
	errInvalidGrant  = oauthError(http.StatusBadRequest, "invalid_grant", "the grant is invalid, expired, revoked or was issued to another client")
	errBadLogin      = oauthError(http.StatusUnauthorized, "invalid_grant", "unknown user or wrong password")
	errNoCredentials = oauthError(http.StatusBadRequest, "invalid_request", "username and password are required")
	errNoRefresh     = oauthError(http.StatusBadRequest, "invalid_request", "refresh_token is required")
)

// slowDown is a refusal by a rate limit: 429 slow_down, with Retry-After
// in whole seconds.
func slowDown(wait time.Duration) *httperr.Error {
	return &httperr.Error{Status: http.StatusTooManyRequests, Code: "slow_down", Description: "too many attempts; retry later", RetryAfter: wait}
}

// login is POST /v1/login: a user's password, for a client, buys an
// access token and a refresh token. Attempts are limited per account and
// per client address; the client authenticates as at the token endpoint.
func (s *Service) login(w http.ResponseWriter, r *http.Request) error {
	if err := s.canSign(); err != nil {
		return err
	}
	v, c, err := s.clientRequest(w, r)
	if err != nil {
		return err
	}
	username, password := v.Get("username"), v.Get("password")
	if username == "" || password == "" {
		return errNoCredentials
	}
	httpaudit.From(w).Hash("username", username)
	if wait, ok := s.allow(r, c.Tenant, username); !ok {
		return slowDown(wait)
	}
	// The session begins before the user is read: a password change or a
	// disable that commits after that read revokes the subject at a later
	// time, which then covers this family and its access token.
	at := s.cfg.Now()
	// The user is looked up in the client's tenant, and only there: a
	// client of tenant A cannot log in a user of B, and a user of B is
	// refused as an unknown one is, so the answer does not tell whether B
	// has the name.
	u, err := s.cfg.Store.GetUserByName(r.Context(), c.Tenant, username)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("looking up a user: %w", err)
	}
	hash := u.PasswordHash
	if err != nil || u.Disabled {
		hash = dummyHash // the same work whether or not the account exists
	}
	// After the limits above: an attempt they refuse never waits for, or
	// takes, a hash slot.
	ok, herr := s.checkPassword(r.Context(), hash, password)
	if errors.Is(herr, ErrHashBusy) {
		return herr
	}
	if err != nil || u.Disabled || herr != nil || !ok {
		s.log.Info("login refused", "client", c.ID)
		return errBadLogin
	}
	httpaudit.From(w).User(u.ID)
	family, err := randomID(s.cfg.Rand, "")
	if err != nil {
		return fmt.Errorf("making a token family: %w", err)
	}
	scopes, err := loginScopes(u.Scopes, c.Scopes, v.Get("scope"))
	if err != nil {
		return err
	}
	return s.grant(w, r, c, u.ID, scopes, family, at)
}

// loginScopes returns what a login grants: the scopes it asks for (RFC
// 6749 §3.3), each held by the user and allowed to the client, or without
// a scope parameter every scope both have. A login that would grant
// nothing, or asks for a scope it cannot have, is refused with
// invalid_scope naming what was requested, held and allowed, so that a
// user's token never comes back silently empty. (The user has proved the
// password by then: the names tell the client nothing the user may not
// know.)
func loginScopes(held, allowed []string, requested string) ([]string, error) {
	both := intersect(held, allowed)
	scopes, ok := narrowScopes(both, requested)
	if ok && len(scopes) > 0 {
		return scopes, nil
	}
	list := func(s []string) string {
		if len(s) == 0 {
			return "none"
		}
		return strings.Join(s, " ")
	}
	desc := "the login would grant no scope"
	if !ok {
		desc = "a requested scope is not both held by the user and allowed to the client"
	}
	if requested != "" {
		desc += "; requested: " + list(strings.Fields(requested))
	}
	desc += "; held by the user: " + list(held) + "; allowed to the client: " + list(allowed)
	return nil, oauthError(http.StatusBadRequest, "invalid_scope", desc)
}

// allow applies the per-account and per-address limits; without a
// Limiter every attempt is allowed. An account is a username within a
// tenant (accountKey).
func (s *Service) allow(r *http.Request, tenant, username string) (time.Duration, bool) {
	if s.cfg.Limiter == nil {
		return 0, true
	}
	// The address is charged first: an attempt its address may not make
	// never touches the account's bucket, so one address cannot flood the
	// limiter with one-off accounts to push a victim's bucket out. The
	// account's key is a digest: usernames are unbounded and personal, and
	// the limiter's keys may live in a shared Redis.
	for _, key := range []string{"login:ip:" + addrKey(r, s.cfg.TrustedProxies, s.cfg.IPv6Prefix),
		accountKey(tenant, username)} {
		ok, wait, err := s.cfg.Limiter.Allow(r.Context(), key)
		if err != nil {
			s.log.Warn("rate limiter failed; refusing the attempt", "err", err)
			return time.Second, false
		}
		if !ok {
			return wait, false
		}
	}
	return 0, true
}

// accountKey is the per-account login limit's key of username in tenant:
// "login:user:" and the username's SHA-256 in base64url, with the tenant's
// name and a colon between them for any tenant but the default, whose keys
// are those of the accounts before tenants (an upgrade keeps their limits
// in force). A tenant name has no colon and base64url none either, so no
// two accounts share a key: alice of A is never charged for alice of B.
func accountKey(tenant, username string) string {
	user := sha256.Sum256([]byte(username))
	key := "login:user:"
	if tenant != store.DefaultTenant {
		key += tenant + ":"
	}
	return key + base64.RawURLEncoding.EncodeToString(user[:])
}

// allowClient applies the token endpoint's per-client limit: a refusal is
// 429 with Retry-After.
func (s *Service) allowClient(r *http.Request, clientID string) error {
	if s.cfg.TokenLimiter == nil {
		return nil
	}
	ok, wait, err := s.cfg.TokenLimiter.Allow(r.Context(), "token:client:"+clientID)
	if err != nil {
		s.log.Warn("token rate limiter failed; refusing the request", "client", clientID, "err", err)
		ok, wait = false, time.Second
	}
	if !ok {
		return slowDown(wait)
	}
	return nil
}

func intersect(a, b []string) []string {
	var out []string
	for _, x := range a {
		if slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// randomID returns prefix followed by 128 random bits, base64url (a jti,
// as mint.NewID makes them).
func randomID(r io.Reader, prefix string) (string, error) {
	id, err := mint.NewID(r)
	return prefix + id, err
}

// randomSecret returns prefix followed by 256 random bits, base64url: a
// bearer secret (client secret, refresh token) stored only as its
// SecretDigest.
func randomSecret(r io.Reader, prefix string) (string, error) {
	b := make([]byte, 32)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// grant issues an access token and a new refresh token in family, both
// issued at. The access token is signed before the refresh token is
// stored, so a node that cannot sign (sealed) writes nothing.
func (s *Service) grant(w http.ResponseWriter, r *http.Request, c client, sub string, scopes []string, family string, at time.Time) error {
	tok, exp, id, err := s.accessToken(sub, c.Client, scopes, at)
	if err != nil {
		return fmt.Errorf("issuing an access token: %w", err)
	}
	refresh, rt, err := s.newRefresh(c.ID, sub, scopes, family, at)
	if err != nil {
		return fmt.Errorf("making a refresh token: %w", err)
	}
	note := httpaudit.From(w)
	note.Hash("family", family)
	if err := note.Intent(r.Context()); err != nil {
		return err
	}
	if err := s.cfg.Store.CreateRefreshToken(r.Context(), rt); err != nil {
		return fmt.Errorf("storing a refresh token: %w", err)
	}
	noteIssued(w, id)
	writeTokens(w, tok, exp, refresh, scopes)
	return nil
}

// newRefresh makes a refresh token in family, issued at. It leaves OriginAt
// to the store: CreateRefreshToken takes a new family's to be its first
// token's IssuedAt, and RotateRefreshToken carries the family's forward.
func (s *Service) newRefresh(clientID, sub string, scopes []string, family string, at time.Time) (string, store.RefreshToken, error) {
	token, err := randomSecret(s.cfg.Rand, "kgr_")
	if err != nil {
		return "", store.RefreshToken{}, err
	}
	d := SecretDigest(token)
	now := at.UTC()
	return token, store.RefreshToken{Digest: d[:], FamilyID: family, ClientID: clientID, Subject: sub, Scopes: scopes,
		IssuedAt: now, ExpiresAt: now.Add(s.cfg.RefreshTokenTTL)}, nil
}

// refreshGrant is grant_type=refresh_token: the presented token is spent
// and a new one issued in its family. Presenting a spent token again
// revokes the whole family (the store does that atomically), since one of
// its holders must be a thief.
//
// A refresh is decided on the store's current state, not on this node's
// memory (its revocation set and client cache), which misses what other
// nodes did while Redis is down, and while Redis is too stale refuses
// everything although the store can decide: the user must exist and be enabled, the client must exist (as read from the
// store during the request, not as the client cache kept it, and the
// client's secret is checked again against it), and no
// revocation of the subject may postdate the family's origin (the login),
// which the store checks in the rotation's own transaction. A refusal for
// any of these revokes the family for good. The scopes granted are the
// family's, narrowed to those the client and the user hold now, for the
// new refresh token too.
func (s *Service) refreshGrant(w http.ResponseWriter, r *http.Request, c client, v url.Values) error {
	presented := v.Get("refresh_token")
	if presented == "" {
		return errNoRefresh
	}
	// Nearly every refresh writes: it rotates the token, or revokes its
	// family.
	if err := httpaudit.From(w).Intent(r.Context()); err != nil {
		return err
	}
	ctx := r.Context()
	at := s.cfg.Now() // before any state is read; see login
	d := SecretDigest(presented)
	old, err := s.cfg.Store.GetRefreshToken(ctx, d[:])
	if err != nil || old.ClientID != c.ID {
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("reading a refresh token: %w", err)
		}
		return errInvalidGrant
	}
	httpaudit.From(w).Hash("family", old.FamilyID)
	u, err := s.cfg.Store.GetUser(ctx, old.Subject)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return s.endFamily(r, c.ID, d[:], "its user was deleted")
	case err != nil:
		return fmt.Errorf("reading a user: %w", err)
	case u.Disabled:
		return s.endFamily(r, c.ID, d[:], "its user is disabled")
	}
	// What a refresh grants for 30 days more is decided on the client as
	// stored now. Unless authentication has just read it from the store, c
	// came from the client cache, which may be up to clientCacheTTL behind
	// a change made at another node: read it again (and cache it anew),
	// and authenticate against it: the secret may have been rotated.
	cur := c
	if !c.fresh {
		cur, err = s.clients.load(ctx, s.cfg.Store, c.ID, keyOf(c.ID), at)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return s.endFamily(r, c.ID, d[:], "its client was deleted")
		case err != nil:
			return fmt.Errorf("reading a client: %w", err)
		}
	}
	if subtle.ConstantTimeCompare(c.presented[:], cur.SecretDigest) != 1 {
		if _, _, basic := r.BasicAuth(); basic {
			return errInvalidClientBasic
		}
		return errInvalidClient
	}
	// The family's tenant is its client's, which never changes; a login
	// put only a user of that tenant in it. A user of another tenant here
	// is a store that broke that, and ends the family.
	if u.Tenant != cur.Tenant {
		return s.endFamily(r, c.ID, d[:], "its user is not of its client's tenant")
	}
	held := intersect(intersect(old.Scopes, cur.Scopes), u.Scopes)
	scopes, ok := narrowScopes(held, v.Get("scope"))
	if !ok {
		return errInvalidScope
	}
	// Sign first: a node that cannot sign must not spend the token.
	tok, exp, id, err := s.accessToken(old.Subject, cur.Client, scopes, at)
	if err != nil {
		return fmt.Errorf("issuing an access token: %w", err)
	}
	next, rt, err := s.newRefresh(c.ID, old.Subject, held, old.FamilyID, at)
	if err != nil {
		return fmt.Errorf("making a refresh token: %w", err)
	}
	httpaudit.From(w).User(old.Subject)
	if _, err := s.cfg.Store.RotateRefreshToken(ctx, s.cfg.Issuer, d[:], rt, s.cfg.Now().UTC()); err != nil {
		switch {
		case errors.Is(err, store.ErrReused):
			s.log.Warn("a spent refresh token was presented again; its family is revoked", "client", c.ID)
			return errInvalidGrant
		case errors.Is(err, store.ErrSubjectRevoked):
			s.log.Info("refresh refused and its family revoked: its subject is revoked", "client", c.ID)
			return errInvalidGrant
		case errors.Is(err, store.ErrRevoked), errors.Is(err, store.ErrExpired), errors.Is(err, store.ErrNotFound):
			return errInvalidGrant
		default:
			return fmt.Errorf("rotating a refresh token: %w", err)
		}
	}
	noteIssued(w, id)
	writeTokens(w, tok, exp, next, scopes)
	return nil
}

// endFamily refuses a refresh for the state of its user, client or
// subject: the family of digest is revoked for good, so that undoing the
// change (enabling the user again) does not bring it back.
func (s *Service) endFamily(r *http.Request, clientID string, digest []byte, why string) error {
	if err := s.cfg.Store.RevokeRefreshFamily(r.Context(), digest); err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("revoking a refresh token family: %w", err)
	}
	s.log.Info("refresh refused and its family revoked: "+why, "client", clientID)
	return errInvalidGrant
}
