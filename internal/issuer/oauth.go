package issuer

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/keygate/keygate/internal/audit/httpaudit"
	"github.com/keygate/keygate/internal/httperr"
	"github.com/keygate/keygate/internal/issuer/signingkeys"
	"github.com/keygate/keygate/internal/mint"
	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/telemetry"
	"github.com/keygate/keygate/jose"
)

// Config configures the token service.
type Config struct {
	Issuer         string        // the "iss" of every token, and the discovery base URL
	Audience       []string      // the "aud" of access tokens (optional)
	AccessTokenTTL time.Duration // default 15 min; keep ≤ the key policy's MaxTokenTTL
	// RefreshTokenTTL bounds an unused refresh token (default
	// DefaultRefreshTTL, 30 days).
	RefreshTokenTTL time.Duration
	// Limiter, if set, bounds login attempts per account and per address.
	Limiter Limiter
	// TrustedProxies are the reverse proxies whose X-Forwarded-For names
	// the address the per-address login limit counts; without them it is
	// the peer's address.
	TrustedProxies []netip.Prefix
	// IPv6Prefix is the prefix length an IPv6 client address is counted by
	// in the per-address limits (login, pre-authentication): 0 means
	// DefaultIPv6Prefix (64); else MinIPv6Prefix to MaxIPv6Prefix.
	IPv6Prefix int
	// TokenLimiter, if set, bounds token requests per client at the token
	// endpoint (key "token:client:<id>"). It is asked only once the client
	// has authenticated, so nobody can spend another client's budget.
	TokenLimiter Limiter
	// PreAuthLimiter, if set, bounds per address (key "preauth:ip:<addr>")
	// the store reads that client authentication makes for a client_id not
	// read in the last clientCacheTTL: without it, requests naming random
	// client_ids cost a store read each before any other limit applies.
	PreAuthLimiter Limiter
	// PasswordHashes bounds the Argon2id computations (19 MiB and tens of
	// milliseconds each) running at once on request paths: login's password
	// check and the admin API's hashing of a new password. 0 means
	// DefaultPasswordHashes(). A request that gets no slot within
	// PasswordHashWait (0: DefaultPasswordHashWait) is answered 503
	// temporarily_unavailable with Retry-After: 1; a login is charged to its
	// address and account limits before it waits.
	PasswordHashes   int
	PasswordHashWait time.Duration
	Store            Store
	Keys             *signingkeys.Manager
	// Publisher, if set, is told of every revocation stored here and
	// every rotation and tenant deletion made through the admin API, so
	// that this node and the others of its fleet act on them at once.
	Publisher Publisher
	// Trusts, if set, reports whether keygate trusts the tokens of issuer
	// besides its own (Issuer): the gateway's configured issuers as they
	// are at the call, so that a configuration reload is seen at once. The
	// admin API revokes tokens of Issuer and of the issuers Trusts
	// reports, and refuses any other; nil trusts Issuer alone.
	Trusts func(issuer string) bool
	// Checker, if set, answers introspection's revocation question from
	// memory (the node's revocation set); without it every introspection
	// reads the revocations from the store.
	Checker interface {
		Revoked(issuer, jti, subject string, issuedAt time.Time) bool
	}
	// Observe, if set, is told the outcome of every request to the token
	// endpoints (see Observer).
	Observe Observer
	// Tracer, if set, traces each request to the token endpoints
	// (keygate.token.<endpoint>), a child of its traceparent.
	Tracer *telemetry.Tracer
	Now    func() time.Time
	Rand   io.Reader
	Logger *slog.Logger
}

// Store is what the token service needs of the store: it reads clients and
// users, keeps the refresh-token families, and stores and reads
// revocations. The methods are store.Store's, with the contracts written
// there, and every backend implements them; the admin API writes the rest.
type Store interface {
	GetClient(ctx context.Context, id string) (store.Client, error)
	GetUser(ctx context.Context, id string) (store.User, error)
	GetUserByName(ctx context.Context, tenant, username string) (store.User, error)

	CreateRefreshToken(ctx context.Context, t store.RefreshToken) error
	GetRefreshToken(ctx context.Context, digest []byte) (store.RefreshToken, error)
	RotateRefreshToken(ctx context.Context, issuer string, old []byte, next store.RefreshToken, now time.Time) (store.RefreshToken, error)
	RevokeRefreshFamily(ctx context.Context, digest []byte) error

	AddRevocation(ctx context.Context, r store.Revocation) error
	Revocations(ctx context.Context, now time.Time) ([]store.Revocation, error)
}

var _ Store = store.Store(nil) // the whole store, and so each backend, is one

// Publisher is told what the token service changed that the node's memory,
// and through it every node of the fleet, must see at once. What it is
// told is in the store already, so its methods do not fail: a publisher
// that cannot share a change logs why, and other nodes load it from the
// store later. ctx carries the request's values; a publisher bounds its
// own wait and does not give up when the request ends.
type Publisher interface {
	// RevokeID: the token of issuer with jti is revoked until until (its
	// expiry).
	RevokeID(ctx context.Context, issuer, jti string, until time.Time)
	// RevokeSubject: every token of issuer issued to subject before
	// before is revoked, kept at least until until (zero: the default
	// retention; see store.Revocation).
	RevokeSubject(ctx context.Context, issuer, subject string, before, until time.Time)
	// Rotated: the admin API rotated the signing keys; kid is the new one.
	Rotated(ctx context.Context, kid string)
	// TenantDeleted: the admin API deleted the tenant; a tenant made again
	// under its name is another one, and nothing held of this one (its
	// data key) may serve it.
	TenantDeleted(ctx context.Context, tenant string)
}

// Service answers the OAuth 2.0 endpoints.
type Service struct {
	cfg     Config
	log     *slog.Logger
	clients clientCache
	// own verifies the tokens this service issued. Every algorithm is
	// allowed: each published key is bound to its own, and keys of an
	// earlier signing_alg stay published until their tokens expire.
	own          *jose.Verifier
	verified     verifiedCache // introspection's verified tokens
	hashes       hashSlots     // Argon2id computations running at once
	discoveryDoc []byte
	errs         httperr.Writer
}

// New checks cfg and returns the service.
func New(cfg Config) (*Service, error) {
	if cfg.Issuer == "" || cfg.Store == nil || cfg.Keys == nil {
		return nil, errors.New("issuer.Config: Issuer, Store and Keys are required")
	}
	if cfg.AccessTokenTTL == 0 {
		cfg.AccessTokenTTL = 15 * time.Minute
	}
	switch {
	case cfg.IPv6Prefix == 0:
		cfg.IPv6Prefix = DefaultIPv6Prefix
	case cfg.IPv6Prefix < MinIPv6Prefix || cfg.IPv6Prefix > MaxIPv6Prefix:
		return nil, fmt.Errorf("IPv6Prefix %d is not between %d and %d", cfg.IPv6Prefix, MinIPv6Prefix, MaxIPv6Prefix)
	}
	if cfg.RefreshTokenTTL == 0 {
		cfg.RefreshTokenTTL = DefaultRefreshTTL
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	own, err := jose.NewVerifier(currentKeys{cfg.Keys}, jose.Algorithms(), jose.Expected{Issuer: cfg.Issuer,
		Require: []string{"exp", "jti"}}, jose.WithClock(cfg.Now))
	if err != nil {
		return nil, err
	}
	return &Service{cfg: cfg, log: cfg.Logger, own: own, hashes: newHashSlots(cfg.PasswordHashes, cfg.PasswordHashWait),
		discoveryDoc: discoveryDoc(&cfg), errs: httperr.Writer{Log: cfg.Logger}}, nil
}

// Config returns the service's configuration, defaults filled in: what the
// admin API reads of the clock, the random source, the signing keys, the
// Publisher and the issuers it may revoke for.
func (s *Service) Config() Config { return s.cfg }

// Handler routes the token service's endpoints.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /oauth2/token", s.endpoint("token", "", s.token))
	mux.HandleFunc("POST /oauth2/revoke", s.endpoint("revoke", "", s.revoke))
	mux.HandleFunc("POST /v1/login", s.endpoint("login", "password", s.login))
	mux.HandleFunc("POST /oauth2/introspect", s.endpoint("introspect", "", s.introspect))
	mux.HandleFunc("GET /.well-known/jwks.json", s.jwks)
	mux.HandleFunc("GET /.well-known/openid-configuration", s.discovery)
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", s.discovery)
	return mux
}

// endpoint serves h, a token endpoint that returns its refusals and
// failures, answering them with WriteError, and reports each outcome to the
// Observer, if there is one.
func (s *Service) endpoint(name, grant string, h func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return s.observed(name, grant, func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			s.WriteError(w, r, err)
		}
	})
}

// oauthError is an RFC 6749 §5.2 error response.
func oauthError(status int, code, description string) *httperr.Error {
	return &httperr.Error{Status: status, Code: code, Description: description}
}

var (
	errInvalidClient = oauthError(http.StatusUnauthorized, "invalid_client", "client authentication failed")
	// errInvalidClientBasic is errInvalidClient for a client that tried
	// HTTP Basic authentication, which is challenged (RFC 6749 §5.2).
	errInvalidClientBasic = &httperr.Error{Status: http.StatusUnauthorized, Code: "invalid_client",
		Description: errInvalidClient.Description, Challenge: `Basic realm="keygate"`}
	errUnsupportedType = oauthError(http.StatusBadRequest, "unsupported_grant_type", "grant_type is not supported")
	errNoGrantType     = oauthError(http.StatusBadRequest, "invalid_request", "grant_type is required")
	errInvalidScope    = oauthError(http.StatusBadRequest, "invalid_scope", "a requested scope is not allowed for this client")
	errBadContentType  = oauthError(http.StatusBadRequest, "invalid_request", "the body must be application/x-www-form-urlencoded")
	errTwoAuthMethods  = oauthError(http.StatusBadRequest, "invalid_request", "use one client authentication method")
	errBadForm         = oauthError(http.StatusBadRequest, "invalid_request", "the form body is malformed or too large")
	errRepeated        = oauthError(http.StatusBadRequest, "invalid_request", "a parameter is repeated")
	errNoToken         = oauthError(http.StatusBadRequest, "invalid_request", "token is required")
	// RFC 6749 names temporarily_unavailable for the authorization
	// endpoint; token endpoints use it too for a server that cannot serve
	// for now.
	errSealed    = oauthError(http.StatusServiceUnavailable, "temporarily_unavailable", "keygate is sealed: an operator must unseal it before tokens can be issued")
	errNoKey     = oauthError(http.StatusServiceUnavailable, "temporarily_unavailable", "no signing key is active yet")
	errStoreDown = &httperr.Error{Status: http.StatusServiceUnavailable, Code: "temporarily_unavailable",
		Description: "the store is not answering; retry shortly", RetryAfter: time.Second}
	// RFC 6749 §4.1.2.1: "temporarily unable to handle the request due to
	// a temporary overloading" — not slow_down (429), which is this
	// client's or address's own rate; the node is busy for everyone.
	errHashesBusy = &httperr.Error{Status: http.StatusServiceUnavailable, Code: "temporarily_unavailable",
		Description: "too many password checks at once; retry shortly", RetryAfter: time.Second}
)

// WriteError writes err, a handler's refusal or failure, as the token
// service's JSON error (httperr), with the headers of every token endpoint
// answer, and records its code for the Observer. The node's states that
// are not the client's doing are classified here, once, for the token
// endpoints and the admin API alike: sealed or no key active yet, a store
// that does not answer, every password-hash slot busy (ErrHashBusy) are
// 503 temporarily_unavailable; any other error that is not an
// *httperr.Error is a 500 that reveals nothing, and is logged.
func (s *Service) WriteError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, signingkeys.ErrSealed):
		err = errSealed
	case errors.Is(err, signingkeys.ErrNoActiveKey):
		err = errNoKey
	case errors.Is(err, store.ErrUnavailable):
		s.log.Warn("request failed: the store is unavailable", "path", r.URL.Path, "err", err)
		err = errStoreDown
	case errors.Is(err, ErrHashBusy):
		err = errHashesBusy
	}
	noStore(w)
	noteResult(w, s.errs.Write(w, r, err).Code)
}

// noStore sets the headers RFC 6749 §5.1 asks of every token endpoint
// answer; the admin API's answers carry them too (see WriteError).
func noStore(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"error":"server_error"}`)
	}
	writeBody(w, status, append(body, '\n'))
}

// writeBody sends a JSON body with the headers RFC 6749 §5.1 asks of every
// token endpoint answer.
func writeBody(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	noStore(w)
	w.WriteHeader(status)
	w.Write(body) //nolint:errcheck // the client went away
}

// writeTokens sends a successful token response.
func writeTokens(w http.ResponseWriter, access string, exp time.Duration, refresh string, scopes []string) {
	r := tokenResponse{AccessToken: access, TokenType: "Bearer", ExpiresIn: int(exp.Seconds()),
		RefreshToken: refresh, Scope: strings.Join(scopes, " ")}
	writeBody(w, http.StatusOK, r.marshal())
}

// maxForm caps a request body: every endpoint takes a handful of short fields.
const maxForm = 16 << 10

// form parses a strict form body: the right content type, bounded size,
// no repeated parameters (RFC 6749 §3.2).
func form(w http.ResponseWriter, r *http.Request) (url.Values, error) {
	ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || ct != "application/x-www-form-urlencoded" {
		return nil, errBadContentType
	}
	body, err := io.ReadAll(http.MaxBytesReader(unwrap(w), r.Body, maxForm))
	if err != nil {
		return nil, errBadForm
	}
	v, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, errBadForm
	}
	for _, vals := range v {
		if len(vals) > 1 {
			return nil, errRepeated
		}
	}
	return v, nil
}

// clientRequest reads an endpoint's form and authenticates the client
// sending it.
func (s *Service) clientRequest(w http.ResponseWriter, r *http.Request) (url.Values, client, error) {
	v, err := form(w, r)
	if err != nil {
		return nil, client{}, err
	}
	c, err := s.authenticate(r.Context(), r, v)
	if err != nil {
		noteRefused(w, r, v)
		return nil, client{}, err
	}
	noteClient(w, c)
	return v, c, nil
}

// authenticate checks client_secret_basic or client_secret_post. It
// compares digests in constant time and does the same work for an unknown
// client, so response timing does not reveal which client IDs exist: an
// unknown id is cached as unknown just as a known one is cached (see
// clientCache), so a repeat of either is answered from memory.
// A client that tried HTTP Basic and failed is challenged to try again.
func (s *Service) authenticate(ctx context.Context, r *http.Request, v url.Values) (client, error) {
	id, secret, basic := r.BasicAuth()
	invalid := errInvalidClient
	if basic {
		invalid = errInvalidClientBasic
		if v.Get("client_secret") != "" {
			return client{}, errTwoAuthMethods
		}
		var err1, err2 error
		if id, err1 = url.QueryUnescape(id); err1 == nil {
			secret, err2 = url.QueryUnescape(secret)
		}
		if err1 != nil || err2 != nil {
			return client{}, invalid
		}
	} else {
		id, secret = v.Get("client_id"), v.Get("client_secret")
	}
	if id == "" || secret == "" {
		return client{}, invalid
	}
	// A known id and an unknown one take the same path: from memory when
	// read less than clientCacheTTL ago (known or not), else one store
	// read, charged to the address.
	now, k := s.cfg.Now(), keyOf(id)
	c, ok, err := s.clients.cached(k, now)
	if !ok {
		if err := s.allowRead(ctx, r); err != nil {
			return client{}, err
		}
		c, err = s.clients.load(ctx, s.cfg.Store, id, k, now)
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return client{}, fmt.Errorf("looking up a client: %w", err)
	}
	want := c.SecretDigest
	if len(want) != sha256.Size {
		want = make([]byte, sha256.Size) // unknown client: compare against zeros anyway
	}
	got := SecretDigest(secret)
	if subtle.ConstantTimeCompare(got[:], want) != 1 || err != nil {
		return client{}, invalid
	}
	c.presented = got
	return c, nil
}

// allowRead charges the request's address for a store read made before its
// client has authenticated (Config.PreAuthLimiter).
func (s *Service) allowRead(ctx context.Context, r *http.Request) error {
	if s.cfg.PreAuthLimiter == nil {
		return nil
	}
	ok, wait, err := s.cfg.PreAuthLimiter.Allow(ctx, "preauth:ip:"+addrKey(r, s.cfg.TrustedProxies, s.cfg.IPv6Prefix))
	if err != nil {
		s.log.Warn("pre-authentication rate limiter failed; refusing the request", "err", err)
		ok, wait = false, time.Second
	}
	if !ok {
		return slowDown(wait)
	}
	return nil
}

// SecretDigest is how a client secret or a refresh token is stored:
// SHA-256, which is enough for a 256-bit random secret and costs a
// microsecond to check.
func SecretDigest(secret string) [sha256.Size]byte { return sha256.Sum256([]byte(secret)) }

// NewSecret returns a fresh client secret (256 bits, base64url).
func NewSecret(r io.Reader) (string, error) { return randomSecret(r, "kgs_") }

func (s *Service) token(w http.ResponseWriter, r *http.Request) error {
	if err := s.canSign(); err != nil {
		return err
	}
	v, c, err := s.clientRequest(w, r)
	if err != nil {
		return err
	}
	if err := s.allowClient(r, c.ID); err != nil {
		return err
	}
	noteGrant(w, v.Get("grant_type"))
	switch v.Get("grant_type") {
	case "client_credentials":
		return s.clientCredentials(w, r, c, v)
	case "refresh_token":
		return s.refreshGrant(w, r, c, v)
	case "":
		return errNoGrantType
	default:
		return errUnsupportedType
	}
}

func (s *Service) clientCredentials(w http.ResponseWriter, _ *http.Request, c client, v url.Values) error {
	scopes, ok := narrowScopes(c.Scopes, v.Get("scope"))
	if !ok {
		return errInvalidScope
	}
	tok, exp, id, err := s.accessToken(c.ID, c.Client, scopes, c.readAt)
	if err != nil {
		return fmt.Errorf("issuing an access token: %w", err)
	}
	noteIssued(w, id)
	writeTokens(w, tok, exp, "", scopes)
	return nil
}

// narrowScopes returns the scopes a request asks for (RFC 6749 §3.3), or
// all of allowed when it names none; ok is false if it asks for one
// outside allowed.
func narrowScopes(allowed []string, requested string) (scopes []string, ok bool) {
	req := strings.Fields(requested)
	if len(req) == 0 {
		return allowed, true
	}
	for _, sc := range req {
		if !slices.Contains(allowed, sc) {
			return nil, false
		}
	}
	return req, true
}

// TenantClaim names the claim that carries the tenant of a token the token
// service issues: its client's (store.Client.Tenant), which a login's user
// shares. Every such token has it, DefaultTenant's too, so that a consumer
// never reads "no claim" as a tenant.
const TenantClaim = "tenant"

// accessClaims is an RFC 9068 access token, with the tenant (TenantClaim).
type accessClaims struct {
	Iss      string   `json:"iss"`
	Sub      string   `json:"sub"`
	Aud      []string `json:"aud,omitempty"`
	Exp      int64    `json:"exp"`
	Iat      int64    `json:"iat"`
	Jti      string   `json:"jti"`
	ClientID string   `json:"client_id"`
	Tenant   string   `json:"tenant"`
	Scope    string   `json:"scope,omitempty"`
}

// canSign is checked before any other work on an endpoint that issues
// tokens, so a sealed node answers 503 at once, before a password hash or a
// store write.
func (s *Service) canSign() error {
	if s.cfg.Keys.AccessSigner() != nil {
		return nil
	}
	if s.cfg.Keys.Sealed() {
		return signingkeys.ErrSealed
	}
	return signingkeys.ErrNoActiveKey
}

// accessToken signs a token for sub, obtained by client cl, issued at (its
// iat): the time the state it was decided on was read, so that a subject
// revocation made after that read covers it. The token's tenant is the
// client's; a client without one (a store that broke its contract) gets
// no token.
func (s *Service) accessToken(sub string, cl store.Client, scopes []string, at time.Time) (string, time.Duration, issuedID, error) {
	signer := s.cfg.Keys.AccessSigner()
	if signer == nil {
		return "", 0, issuedID{}, s.canSign()
	}
	if cl.Tenant == "" {
		return "", 0, issuedID{}, fmt.Errorf("client %s has no tenant", cl.ID)
	}
	jti, err := mint.NewID(s.cfg.Rand)
	if err != nil {
		return "", 0, issuedID{}, err
	}
	c := accessClaims{Iss: s.cfg.Issuer, Sub: sub, Aud: s.cfg.Audience, Iat: at.Unix(),
		Exp: at.Add(s.cfg.AccessTokenTTL).Unix(), Jti: jti,
		ClientID: cl.ID, Tenant: cl.Tenant, Scope: strings.Join(scopes, " ")}
	tok, err := signer.Sign(c.marshal())
	// expires_in: what is left of the lifetime, which began at at.
	return tok, s.cfg.AccessTokenTTL - s.cfg.Now().Sub(at), issuedID{kid: signer.KeyID(), jti: jti}, err
}

// issuedID is what the audit record names of an access token issued: the
// kid of the key that signed it (the kid its header carries) and its jti.
type issuedID struct{ kid, jti string }

// verifyOwn verifies an access token this service issued, against its own
// published keys.
func (s *Service) verifyOwn(token string) (*jose.Token, error) { return s.own.Verify(token) }

// verifyCached is verifyOwn through the introspection cache.
func (s *Service) verifyCached(token string) (verifiedToken, error) {
	if v, ok := s.verified.get(token, s.cfg.Now(), s.cfg.Keys.KeySet()); ok {
		return v, nil
	}
	t, err := s.own.Verify(token)
	if err != nil {
		return verifiedToken{}, err
	}
	v := verifiedToken{t: t, clientID: clientOf(t), tenant: tenantOf(t)}
	s.verified.put(token, v)
	return v, nil
}

// currentKeys resolves keys in the key manager's published set as it is at
// each call, so one Verifier serves across rotations.
type currentKeys struct{ km *signingkeys.Manager }

func (c currentKeys) ResolveKey(kid string, alg jose.Alg) (*jose.Key, error) {
	return c.km.KeySet().ResolveKey(kid, alg)
}

// revoke is RFC 7009: a client revokes an access token it was issued. The
// answer is 200 for any well-formed request, whether or not the token was
// valid, so it reveals nothing about tokens.
func (s *Service) revoke(w http.ResponseWriter, r *http.Request) error {
	v, c, err := s.clientRequest(w, r)
	if err != nil {
		return err
	}
	token := v.Get("token")
	if token == "" {
		return errNoToken
	}
	if err := httpaudit.From(w).Intent(r.Context()); err != nil { // a revocation may follow
		return err
	}
	if strings.HasPrefix(token, "kgr_") {
		d := SecretDigest(token)
		if rt, err := s.cfg.Store.GetRefreshToken(r.Context(), d[:]); err == nil && rt.ClientID == c.ID {
			httpaudit.From(w).Hash("family", rt.FamilyID)
			if err := s.cfg.Store.RevokeRefreshFamily(r.Context(), d[:]); err != nil {
				return fmt.Errorf("revoking a refresh token: %w", err)
			}
		}
	} else if t, err := s.verifyOwn(token); err == nil && clientOf(t) == c.ID {
		httpaudit.From(w).Hash("jti", t.Claims.ID)
		rev := store.Revocation{Issuer: s.cfg.Issuer, JTI: t.Claims.ID, Until: time.Unix(t.Claims.Expiry.Unix, 0), CreatedAt: s.cfg.Now()}
		if err := s.AddRevocation(r.Context(), rev); err != nil {
			return fmt.Errorf("storing a revocation: %w", err)
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	return nil
}

// AddRevocation stores a revocation, then publishes it to the node (and,
// through the Publisher, the fleet) at once: what the token service's own
// revocation endpoint and the admin API's do.
func (s *Service) AddRevocation(ctx context.Context, rv store.Revocation) error {
	if err := s.cfg.Store.AddRevocation(ctx, rv); err != nil {
		return err
	}
	switch p := s.cfg.Publisher; {
	case p == nil:
	case rv.JTI != "":
		p.RevokeID(ctx, rv.Issuer, rv.JTI, rv.Until)
	case rv.Subject != "":
		p.RevokeSubject(ctx, rv.Issuer, rv.Subject, rv.Before, rv.Until)
	}
	return nil
}

// RevokeSubject revokes everything the token service issued to subject
// until now (AddRevocation).
func (s *Service) RevokeSubject(ctx context.Context, subject string) error {
	now := s.cfg.Now().UTC()
	return s.AddRevocation(ctx, store.Revocation{Issuer: s.cfg.Issuer, Subject: subject, Before: now, CreatedAt: now})
}

func clientOf(t *jose.Token) string { return stringClaim(t, "client_id") }

// tenantOf is the tenant of a token this service issued: its TenantClaim,
// or, for a token without one, DefaultTenant — such a token was issued
// before tenants, when every client was the default tenant's (its
// signature is this service's own; see verifyOwn).
func tenantOf(t *jose.Token) string {
	if _, ok := t.Claims.Raw(TenantClaim); !ok {
		return store.DefaultTenant
	}
	return stringClaim(t, TenantClaim)
}

// stringClaim is the string claim name of t, or "" if it has none or
// another type.
func stringClaim(t *jose.Token, name string) string {
	raw, ok := t.Claims.Raw(name)
	if !ok {
		return ""
	}
	var v string
	if json.Unmarshal(raw, &v) != nil {
		return ""
	}
	return v
}

// introspect is RFC 7662 for access tokens: an authenticated client learns
// whether a token it was issued (or any token of its own tenant, with the
// "introspect" scope) is active, and its claims, the tenant among them. A
// token of another tenant is inactive to it, as an unknown one is, so
// introspection tells no client of A anything about B.
func (s *Service) introspect(w http.ResponseWriter, r *http.Request) error {
	v, c, err := s.clientRequest(w, r)
	if err != nil {
		return err
	}
	token := v.Get("token")
	if token == "" {
		return errNoToken
	}
	vt, err := s.verifyCached(token)
	if err != nil || !c.mayIntrospect(vt) || s.revoked(r.Context(), vt.t) {
		noteResult(w, "inactive")
		writeJSON(w, http.StatusOK, map[string]any{"active": false})
		return nil
	}
	cl := &vt.t.Claims
	httpaudit.From(w).Hash("jti", cl.ID)
	a := activeToken{Aud: cl.Audience, ClientID: vt.clientID, Exp: cl.Expiry.Unix, Iat: cl.IssuedAt.Unix,
		Iss: cl.Issuer, Jti: cl.ID, Scope: cl.Scope, Sub: cl.Subject, Tenant: vt.tenant}
	writeBody(w, http.StatusOK, a.marshal())
	return nil
}

// mayIntrospect reports whether c may learn about vt: a token it was issued,
// or, with the "introspect" scope, a token of its tenant.
func (c client) mayIntrospect(vt verifiedToken) bool {
	return vt.clientID == c.ID || (slices.Contains(c.Scopes, "introspect") && vt.tenant == c.Tenant)
}

// revoked answers introspection: a token whose revocation status cannot be
// read is not active.
func (s *Service) revoked(ctx context.Context, t *jose.Token) bool {
	var iat time.Time
	if t.Claims.IssuedAt.Valid {
		iat = time.Unix(t.Claims.IssuedAt.Unix, 0)
	}
	revoked, err := s.isRevoked(ctx, t.Claims.ID, t.Claims.Subject, iat)
	return revoked || err != nil
}

// isRevoked reports whether a token of this issuer with jti (may be empty),
// issued to subject at iat (zero when unknown), is revoked: from the node's
// revocation set, or without one from the store. A revocation set that is
// failing closed (its Redis copy too stale) answers "revoked" for every
// token, so introspection then finds none active.
func (s *Service) isRevoked(ctx context.Context, jti, subject string, iat time.Time) (bool, error) {
	if s.cfg.Checker != nil {
		return s.cfg.Checker.Revoked(s.cfg.Issuer, jti, subject, iat), nil
	}
	revs, err := s.cfg.Store.Revocations(ctx, s.cfg.Now())
	if err != nil {
		return false, err
	}
	for _, rv := range revs {
		if rv.Issuer != s.cfg.Issuer {
			continue
		}
		if jti != "" && rv.JTI == jti {
			return true, nil
		}
		if subject != "" && rv.Subject == subject && (iat.IsZero() || iat.Before(rv.Before)) {
			return true, nil
		}
	}
	return false, nil
}

func (s *Service) jwks(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/json") // what OIDC providers serve and every client reads
	// Short enough that a rotation's pre-publication reaches every cache.
	h.Set("Cache-Control", "public, max-age=300")
	w.Write(s.cfg.Keys.JWKS()) //nolint:errcheck // the client went away
}

// discoveryDoc is the RFC 8414 metadata, which changes only with the
// configuration, so New marshals it once. It names only what keygate
// serves: there is no authorization endpoint and no ID token, so nothing
// of either (id_token_signing_alg_values_supported, response_types,
// subject_types) is advertised; the same document is served at the OpenID
// path for the clients and gateways that find jwks_uri there.
func discoveryDoc(cfg *Config) []byte {
	base := strings.TrimSuffix(cfg.Issuer, "/")
	auth := []string{"client_secret_basic", "client_secret_post"}
	doc, _ := json.Marshal(map[string]any{ // strings and string slices always marshal
		"issuer":                                        cfg.Issuer,
		"token_endpoint":                                base + "/oauth2/token",
		"revocation_endpoint":                           base + "/oauth2/revoke",
		"introspection_endpoint":                        base + "/oauth2/introspect",
		"jwks_uri":                                      base + "/.well-known/jwks.json",
		"grant_types_supported":                         []string{"client_credentials", "refresh_token"},
		"token_endpoint_auth_methods_supported":         auth,
		"revocation_endpoint_auth_methods_supported":    auth, // RFC 8414 §2
		"introspection_endpoint_auth_methods_supported": auth,
	})
	return append(doc, '\n')
}

func (s *Service) discovery(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "public, max-age=300")
	w.Write(s.discoveryDoc) //nolint:errcheck // the client went away
}
