// Package middleware verifies bearer tokens in a Go net/http service with the
// same pipeline keygate runs as a gateway: issuers chosen by "iss", keys from
// remote JWKS (refreshed in the background) or given directly, a cache of
// verified tokens, and RFC 6750 answers for refused requests. A handler
// behind it finds the verified identity with FromContext.
//
//	mw, err := middleware.New(ctx, middleware.Config{Issuers: []middleware.Issuer{{
//		Issuer:     "https://idp.example.com/",
//		JWKSURL:    "https://idp.example.com/.well-known/jwks.json",
//		Algorithms: []jose.Alg{jose.RS256},
//		Audiences:  []string{"orders-api"},
//	}}})
//	defer mw.Close()
//	http.Handle("/orders/", mw.Require("orders:read")(ordersHandler))
//
// Require's type, func(http.Handler) http.Handler, is what chi and most
// net/http routers take. For other frameworks, Check takes the same
// decision without net/http's handler types and returns an Outcome that
// writes the same answer; the adapters for gin, echo and fiber are
// separate modules (middleware/gin, middleware/echo, middleware/fiber), so
// this module imports no web framework. Package middlewaretest is the
// table test they all pass.
package middleware

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/keygate/keygate/internal/gateway"
	"github.com/keygate/keygate/internal/verify"
	"github.com/keygate/keygate/internal/verify/verifykeys"
	"github.com/keygate/keygate/jose"
)

// Config configures a Middleware.
type Config struct {
	Issuers []Issuer
	// Cache bounds the verified-token cache; the zero value gives 100,000
	// entries, 64 MiB and a 5-minute maximum lifetime.
	Cache Cache
	// MaxTokenSize is checked before any decoding (default 8 KiB).
	MaxTokenSize int
	// Logger receives key-source events and refusals (tokens appear only
	// as fingerprints); nil discards them.
	Logger *slog.Logger
}

// Issuer is one trusted issuer. Exactly one of JWKSURL, Discovery and Keys
// supplies its keys.
type Issuer struct {
	Issuer       string       // the exact "iss"
	JWKSURL      string       // https (http only to loopback)
	Discovery    bool         // find jwks_uri by OIDC discovery of Issuer
	Keys         *jose.KeySet // fixed keys
	Algorithms   []jose.Alg   // required allow-list
	Audiences    []string     // any-of, or all-of with AllAudiences
	AllAudiences bool
	Leeway       time.Duration // default 60 s; negative for none
	Require      []string      // default ["exp"]
	Scopes       []string      // required of every token of this issuer
}

// Cache bounds the verified-token cache.
type Cache struct {
	Disabled   bool
	MaxEntries int
	MaxBytes   int64
	MaxTTL     time.Duration
}

// Identity is a verified token: issuer, subject, scopes, expiry, and the
// token itself for any other claim (Token.Claims.Raw). It is shared between
// requests presenting the same token and must not be modified: a cached
// Identity lives in memory the garbage collector does not scan, so a value
// stored into it (an appended audience, a replaced string) could be freed
// while still in use. Copy what you need to change.
type Identity = verify.Result

// Middleware guards handlers. It is safe for concurrent use.
type Middleware struct {
	pipeline *verify.Pipeline
	decider  *gateway.Decider
	closers  []func()
}

// New starts the key sources (waiting for each remote source's first
// fetch, bounded by its timeout and ctx) and builds the pipeline. A remote
// source that cannot fetch yet keeps trying in the background; until it
// succeeds its issuer's tokens are refused.
func New(ctx context.Context, cfg Config) (*Middleware, error) {
	if len(cfg.Issuers) == 0 {
		return nil, errors.New("middleware: no issuers")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Middleware{}
	var policies []verify.Policy
	for i, is := range cfg.Issuers {
		src, closer, err := source(ctx, is, log)
		if err != nil {
			m.Close()
			return nil, fmt.Errorf("middleware: issuer %d (%s): %w", i, is.Issuer, err)
		}
		m.closers = append(m.closers, closer)
		policies = append(policies, verify.Policy{Issuer: is.Issuer, Keys: src, Algorithms: is.Algorithms,
			Audiences: is.Audiences, AllAudiences: is.AllAudiences, Leeway: is.Leeway, Require: is.Require, Scopes: is.Scopes})
	}
	var err error
	m.pipeline, err = verify.New(verify.Config{Policies: policies, MaxTokenSize: cfg.MaxTokenSize,
		Cache: verify.CacheConfig{Disabled: cfg.Cache.Disabled, MaxEntries: cfg.Cache.MaxEntries,
			MaxBytes: cfg.Cache.MaxBytes, MaxTTL: cfg.Cache.MaxTTL}})
	if err == nil {
		m.decider, err = gateway.NewDecider(gateway.DeciderConfig{Verifier: m.pipeline, Logger: log})
	}
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("middleware: %w", err)
	}
	return m, nil
}

func source(ctx context.Context, is Issuer, log *slog.Logger) (verifykeys.Source, func(), error) {
	n := 0
	for _, set := range []bool{is.JWKSURL != "", is.Discovery, is.Keys != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return nil, nil, errors.New("set exactly one of JWKSURL, Discovery and Keys")
	}
	if is.Keys != nil {
		return verifykeys.NewStatic(is.Keys), func() {}, nil
	}
	rc := verifykeys.RemoteConfig{URL: is.JWKSURL, Algorithms: is.Algorithms, Logger: log.With("issuer", is.Issuer)}
	r, err := verifykeys.Open(ctx, is.Issuer, is.Discovery, rc)
	if err != nil {
		return nil, nil, err
	}
	return r, r.Close, nil
}

// Handler lets through requests with an acceptable bearer token, with
// its identity in the request context (see FromContext); it answers any
// other as Outcome.Write does.
func (m *Middleware) Handler(next http.Handler) http.Handler { return m.Require()(next) }

// Require returns middleware that also demands every scope in scopes,
// answering 403 insufficient_scope when one is missing. Its signature is
// the one chi's Router.Use and With take, so it serves chi as it is:
//
//	r := chi.NewRouter()
//	r.With(mw.Require("orders:write")).Post("/orders", createOrder)
func (m *Middleware) Require(scopes ...string) func(http.Handler) http.Handler {
	scopes = slices.Clone(scopes)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			o := m.Check(r.Context(), r.Header, scopes...)
			if !o.Allowed() {
				o.Write(w)
				return
			}
			next.ServeHTTP(w, r.WithContext(NewContext(r.Context(), o.Identity)))
		})
	}
}

// Verify checks a token directly, for non-HTTP uses.
func (m *Middleware) Verify(ctx context.Context, token string) (*Identity, error) {
	return m.pipeline.Verify(ctx, token)
}

// Reason names why Verify refused a token ("expired", "insufficient_scope",
// ...), or "" for errors that are not about the token.
func Reason(err error) string { return verify.ReasonOf(err) }

// NewContext returns a copy of ctx carrying id, for FromContext; the
// framework adapters put the identity in the request context with it.
func NewContext(ctx context.Context, id *Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// FromContext returns the identity of the request's verified token.
func FromContext(ctx context.Context) (*Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(*Identity)
	return id, ok && id != nil
}

type identityKey struct{}

// Close stops the key sources' background refresh.
func (m *Middleware) Close() {
	for _, c := range m.closers {
		c()
	}
	m.closers = nil
}
