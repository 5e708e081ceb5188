// Package server runs keygate's HTTP service: a health check, the public
// JWKS and the /auth forward-auth decision, behind the timeouts, header
// limits and graceful shutdown a public listener needs.
//
// It also runs the token service (package issuer): its signing keys are
// managed by an issuer.KeyManager, sealed under the root key and kept in the
// store (SQLite in the data directory, or PostgreSQL). Key material and whole
// tokens never reach its logs: a token appears only as an 8-hex-digit SHA-256
// fingerprint.
package server

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/gateway"
	"github.com/keygate/keygate/internal/httperr"
	"github.com/keygate/keygate/internal/issuer"
	"github.com/keygate/keygate/internal/keyring"
	"github.com/keygate/keygate/internal/mint"
	"github.com/keygate/keygate/internal/ratelimit"
	"github.com/keygate/keygate/internal/revoke"
	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/telemetry"
	"github.com/keygate/keygate/internal/tlscert"
	"github.com/keygate/keygate/internal/verify"
	"github.com/keygate/keygate/jose"
)

// Limits and timeouts of the HTTP server.
const (
	// MaxHeaderBytes bounds a request's headers (net/http allows 4 KiB
	// more). Tokens from identity providers that pack groups or roles
	// reach tens of KiB, and a proxy turns keygate's 431 into a 500, so
	// up to this size keygate reads the request and answers a token over
	// max_token_size with its own 401 too_large; beyond it, 431.
	MaxHeaderBytes    = 64 << 10
	ReadHeaderTimeout = 5 * time.Second
	ReadTimeout       = 10 * time.Second
	WriteTimeout      = 10 * time.Second
	IdleTimeout       = 120 * time.Second
	ShutdownTimeout   = 10 * time.Second     // how long Serve drains on shutdown
	WatchInterval     = 2 * time.Second      // how often the configuration and key files are checked for changes
	Leeway            = verify.DefaultLeeway // clock skew /auth tolerates
)

// ErrNoTokenService: the node runs as a gateway only (Config.GatewayOnly).
var ErrNoTokenService = errors.New("server: this node runs no token service")

// Config configures a Server.
type Config struct {
	DataDir  string           // holds the SQLite store and dev files; created (0700) if missing
	Issuer   string           // the "iss" of the server's own tokens (Mint, and /auth in dev mode)
	Audience string           // the "aud" /auth demands in dev mode
	Logger   *slog.Logger     // nil discards logs
	Now      func() time.Time // nil means time.Now
	Rand     io.Reader        // source of jti values; nil means crypto/rand

	// Gateway is the verification set-up: issuers, routes, cache. With no
	// issuers, the server's own signing key is the one trusted issuer (dev
	// mode). nil means an empty configuration.
	Gateway *config.Config
	// ConfigPath, if set, is where Gateway came from: Reload and the file
	// watcher read it again. Env and Overrides are applied on every load.
	ConfigPath string
	Env        []string
	Overrides  Overrides
	// Metrics, if set, receives decisions, fetches and reloads.
	Metrics *telemetry.Metrics

	// GatewayOnly runs the gateway without a token service: no data
	// directory, root key, admin token or store is created or opened, the
	// token endpoints are not served (the proxy, if any, forwards those
	// paths like any other) and the admin listener has no /v1/ API.
	// Gateway must configure at least one issuer.
	GatewayOnly bool

	// Dev generates what is missing in the data directory: a root key
	// (root.key), an admin token (admin.token) and a demo client. Without
	// a root key and a database URL, the server runs in dev mode anyway.
	Dev bool
	// DatabaseURL selects PostgreSQL; empty means SQLite in DataDir.
	DatabaseURL string
	// StoreTimeout bounds each PostgreSQL operation (default
	// postgres.DefaultTimeout, 5 s).
	StoreTimeout time.Duration
	// RootKeyFile or RootKeyEnv (the name of an environment variable read
	// through LookupEnv) holds the root key that seals the signing keys.
	RootKeyFile string
	RootKeyEnv  string
	// KeyringFile is the passphrase header (default keyring.json in
	// DataDir; see `keygate keyring init`). When it exists and no root key
	// is given, the server starts sealed and waits for the passphrase on
	// POST /v1/sys/unseal. A server with a database URL and no key source
	// also starts sealed, waiting for the root key itself.
	KeyringFile string
	// AdminTokenFile or AdminToken guards the admin API (/v1/admin/),
	// sealing and, when Gateway.Pprof is set, the profiles.
	AdminTokenFile string
	AdminToken     string
	// MetricsToken, unless Gateway.MetricsTokenFile is set, is a bearer
	// token that /metrics requires (a Prometheus scrape_config's
	// authorization). Gateway also says whether pprof is served and which
	// host names the admin listener answers to; all three are read at
	// start.
	MetricsToken string
	// LookupEnv reads RootKeyEnv; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)

	// RedisURL (redis://...) joins the node to a fleet: revocations are
	// shared through Redis, /v1/login attempts are limited there, and key
	// rotations made here are announced so that other nodes reload at once.
	RedisURL string
	// RedisPrefix names the keys and channels in Redis (default "keygate").
	RedisPrefix string
	// RedisCAFile, RedisCertFile and RedisKeyFile are for a rediss:// URL:
	// the CAs Redis's certificate must chain to (default the system's) and
	// the client certificate Redis asks for (tls-auth-clients). They are
	// read at start.
	RedisCAFile, RedisCertFile, RedisKeyFile string
	// RevocationMaxStaleness, when positive, makes /auth refuse every token
	// once the shared revocation set has not been known current for that
	// long; zero never fails closed.
	RevocationMaxStaleness time.Duration
	// TokenLimit bounds token requests per authenticated client at
	// /oauth2/token, shared through Redis in a fleet and per node without
	// it; the zero Limit sets none.
	TokenLimit ratelimit.Limit
	// TrustedProxies are the reverse proxies whose X-Forwarded-For names
	// the client for the per-address login limit.
	TrustedProxies []netip.Prefix
	// IPv6Prefix is the prefix length an IPv6 client is counted by in the
	// per-address limits (0: 64; else 32 to 128).
	IPv6Prefix int
	// PasswordHashes bounds the Argon2id password hashes running at once
	// (0: issuer.DefaultPasswordHashes()).
	PasswordHashes int

	// SigningAlg is the algorithm of the signing keys the server creates
	// (ES256 by default; ES384, ES512, RS256, PS256 or EdDSA). Keys already
	// in the store keep their algorithm until they are rotated out.
	SigningAlg jose.Alg
	// KeyRotation is how long a signing key signs before its successor
	// takes over: 0 means the default (30 days), negative means manual
	// rotation only (through the admin API).
	KeyRotation time.Duration
	// KeyPrePublish is how long a new key is published before it signs
	// (default 1 h).
	KeyPrePublish time.Duration
	// AccessTokenTTL is the lifetime of the access tokens the server issues
	// (default 15 min); the signing-key policy keeps retired keys published
	// at least this long.
	AccessTokenTTL time.Duration
}

// Validate reports a missing required field.
func (c *Config) Validate() error {
	switch {
	case c.DataDir == "":
		return errors.New("server: no data directory")
	case c.Issuer == "":
		return errors.New("server: no issuer")
	case c.Audience == "":
		return errors.New("server: no audience")
	case c.GatewayOnly && (c.Gateway == nil || len(c.Gateway.Issuers) == 0):
		return errors.New("server: a gateway-only node needs at least one issuer to trust")
	}
	return nil
}

// Server is keygate's HTTP service. Create it with New.
type Server struct {
	cfg          Config
	log          *slog.Logger
	errs         httperr.Writer // answers the admin listener's errors
	keys         *issuer.KeyManager
	keyring      *keyring.Keyring
	unsealMu     sync.Mutex    // one unseal or seal at a time
	operator     issuer.Bearer // the admin token: the admin API (through admin), seal, pprof
	scraper      issuer.Bearer // the metrics scrape token; unset: /metrics is open
	store        store.Store
	tokens       *issuer.Service
	admin        *issuer.Admin
	revoked      *revoke.Memory
	boot         Bootstrap
	metrics      *telemetry.Metrics
	fwdMetrics   *telemetry.Decisions
	proxyMetrics *telemetry.Decisions
	revocation   revoke.Checker
	observe      func(jose.Alg, time.Duration, bool) // verification latency, nil without metrics
	transport    *http.Transport
	fleet        *fleet        // nil without Redis
	refetchAt    atomic.Int64  // last re-read of the signing keys for an unknown kid
	cacheHits    atomic.Uint64 // the last cache hit count the metrics read
	cacheMisses  atomic.Uint64

	trafficTLS *tlscert.Files // the traffic and probe listeners' certificate; nil: plain HTTP
	adminTLS   *tlscert.Files // the admin listener's; nil: plain HTTP

	rt       atomic.Pointer[runtime]
	reloadMu sync.Mutex // one reload at a time
	handler  http.Handler
}

// New opens the token service (root key, store, signing keys, revocations;
// see Bootstrap for what dev mode creates), builds the runtime
// from cfg.Gateway (starting remote key sources) and the handlers. It does
// not listen. Close releases the key sources and the store.
func New(ctx context.Context, cfg Config) (_ *Server, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	if cfg.RedisPrefix == "" {
		cfg.RedisPrefix = DefaultRedisPrefix
	}
	if cfg.Gateway == nil {
		cfg.Gateway = &config.Config{}
		cfg.Gateway.SetDefaults()
	}
	s := &Server{cfg: cfg, log: cfg.Logger, errs: httperr.Writer{Log: cfg.Logger}, metrics: cfg.Metrics, revocation: revoke.Nop{},
		transport: gateway.NewTransport()}
	defer func() {
		if err != nil {
			s.Close() // what was opened before the failure; Close skips the rest
		}
	}()
	if s.metrics != nil {
		s.observe = s.metrics.VerifyObserver()
	}
	s.fwdMetrics = newDecisions(s.metrics, telemetry.FrontForwardAuth)
	s.proxyMetrics = newDecisions(s.metrics, telemetry.FrontProxy)
	// Certificates first: a listener that cannot serve is reported before
	// anything is written to disk.
	if err := s.openTLS(cfg.Gateway); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if err := s.readCredentials(); err != nil {
		return nil, err
	}
	if cfg.DatabaseURL != "" {
		if w := databaseTLSWarning(cfg.DatabaseURL); w != "" {
			s.log.Warn("database_url: " + w)
		}
	}
	if cfg.GatewayOnly {
		s.log.Info("gateway only: no token service, nothing written to disk (--dev or token_service settings start one)")
	} else {
		if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
			return nil, fmt.Errorf("server: data directory: %w", err)
		}
		if err := s.openTokenService(ctx); err != nil {
			return nil, err
		}
	}
	if cfg.Gateway.Pprof && !s.operator.Set() {
		return nil, errors.New("server: pprof is enabled, but there is no admin token to guard it (--admin-token-file or KEYGATE_ADMIN_TOKEN)")
	}
	rt, err := s.buildRuntime(ctx, cfg.Gateway, nil)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s.rt.Store(rt)
	if s.metrics != nil && s.tokens != nil {
		s.metrics.Sealed(s.keyring.Sealed)
		s.metrics.Cache(s.cacheStats)
		s.metrics.KeySchedule(func() (int, time.Time) {
			st := s.keys.Status()
			return st.Published, st.ActiveSince
		})
	}
	s.handler = s.traffic()
	return s, nil
}

// cacheStats reads the verified-token cache's figures for the metrics:
// counted across reloads, and never lower than a previous reading (lookups
// the replaced cache answered while a reload was swapping it out are
// dropped rather than make the counter go back).
func (s *Server) cacheStats() (entries int, hits, misses uint64) {
	rt := s.rt.Load()
	st := rt.pipeline.Stats()
	return st.Entries, monotonic(&s.cacheHits, rt.hitsBase+st.Hits), monotonic(&s.cacheMisses, rt.missesBase+st.Misses)
}

// monotonic raises *last to v if v is higher and returns *last.
func monotonic(last *atomic.Uint64, v uint64) uint64 {
	for {
		cur := last.Load()
		if v <= cur || last.CompareAndSwap(cur, v) {
			return max(cur, v)
		}
	}
}

// Close stops the key sources. Call it after Serve has returned.
func (s *Server) Close() {
	if rt := s.rt.Load(); rt != nil {
		rt.closeSources(nil)
	}
	s.transport.CloseIdleConnections()
	s.closeFleet()
	if s.store != nil {
		if err := s.store.Close(); err != nil {
			s.log.Warn("closing the store", "err", err)
		}
	}
}

// Bootstrap reports what New created in dev mode, with the secrets to show
// once.
func (s *Server) Bootstrap() Bootstrap { return s.boot }

// Handler returns the traffic handler, for tests and for embedding.
func (s *Server) Handler() http.Handler { return s.handler }

// Thumbprint returns the RFC 7638 thumbprint of the signing key in force,
// which is also its kid; "" while sealed.
func (s *Server) Thumbprint() string {
	if s.keys == nil {
		return ""
	}
	if sg := s.keys.Signer(); sg != nil {
		return sg.Key().Thumbprint()
	}
	return ""
}

// Mint signs claims with the signing key in force; an empty Issuer becomes
// the server's own. It fails with issuer.ErrSealed while sealed, and
// ErrNoTokenService on a gateway-only node.
func (s *Server) Mint(c mint.Claims) (string, error) {
	if s.keys == nil {
		return "", ErrNoTokenService
	}
	if c.Issuer == "" {
		c.Issuer = s.cfg.Issuer
	}
	sg := s.keys.Signer()
	if sg == nil {
		return "", issuer.ErrSealed
	}
	return mint.Sign(sg, c, s.cfg.Now(), s.cfg.Rand)
}

// Serve serves traffic on ln, and the admin endpoints on admin when it is
// not nil; see ServeListeners.
func (s *Server) Serve(ctx context.Context, ln, admin net.Listener) error {
	return s.ServeListeners(ctx, Listeners{Traffic: ln, Admin: admin})
}

// Listeners are where a Server serves; only Traffic is required.
type Listeners struct {
	Traffic net.Listener
	Admin   net.Listener // metrics, health, seal, the admin API, pprof
	// Probe serves only /healthz and /readyz, so that a port can be opened
	// to the cluster's health checks without the admin endpoints.
	Probe net.Listener
}

// ServeListeners serves on ls until ctx is done; then it stops accepting,
// waits up to ShutdownTimeout for requests in flight, and returns. It
// closes the listeners. With a configuration file it also reloads when the
// file changes, and it reads key files again when they change; both
// watchers end before it returns.
func (s *Server) ServeListeners(ctx context.Context, ls Listeners) error {
	var servers []*http.Server
	errc := make(chan error, 3)
	var attrs []any
	// The probe listener serves the traffic listener's certificate. The
	// log line names the traffic listener's address addr, and its TLS tls.
	for _, l := range []struct {
		ln          net.Listener
		h           func() http.Handler
		tls         *tlscert.Files
		addr, state string // the log line's keys
	}{{ls.Traffic, func() http.Handler { return s.handler }, s.trafficTLS, "addr", "tls"},
		{ls.Admin, s.adminHandler, s.adminTLS, ListenerAdmin, ListenerAdmin + "_tls"},
		{ls.Probe, s.probeHandler, s.trafficTLS, ListenerProbe, ListenerProbe + "_tls"}} {
		if l.ln == nil {
			continue
		}
		hs := s.httpServer(l.h())
		if l.tls != nil {
			hs.TLSConfig = l.tls.ServerConfig()
		}
		servers = append(servers, hs)
		go func() { errc <- serveOn(hs, l.ln) }()
		attrs = append(attrs, l.addr, l.ln.Addr().String(), l.state, tlsState(l.tls))
	}
	fw := s.rt.Load().cfg.ForwardAuth.Forwarding()
	attrs = append(attrs, "issuer", s.cfg.Issuer, "trusted_issuers", len(s.rt.Load().sources), "kid", s.Thumbprint(),
		"forward_auth_proxy", fw.Proxy, "forward_auth_trusts", strings.Join(fw.Headers(), ","))
	s.log.Info("listening", attrs...)
	if fw.Proxy == gateway.ProxyAuto && len(s.rt.Load().cfg.ForwardAuth.Rules) > 0 {
		s.log.Warn("forward_auth.proxy is not set: /auth reads both X-Forwarded-* and X-Original-* and refuses requests on which they disagree; name the proxy in front (--proxy nginx|traefik|caddy|envoy) so that only the headers it sets are trusted")
	}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watchDone, tickDone := make(chan struct{}), make(chan struct{})
	go func() { defer close(watchDone); s.watch(wctx, WatchInterval) }()
	go func() {
		defer close(tickDone)
		if s.tokens != nil {
			s.tick(wctx, TickInterval)
		}
	}()
	defer func() { stopWatch(); <-watchDone; <-tickDone }()
	select {
	case err := <-errc:
		for _, hs := range servers {
			hs.Close()
		}
		return fmt.Errorf("server: serve: %w", err)
	case <-ctx.Done():
	}
	s.log.Info("shutting down", "drain", ShutdownTimeout)
	return s.shutdown(servers, errc)
}

func (s *Server) shutdown(servers []*http.Server, errc <-chan error) error {
	ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	var errs []error
	for _, srv := range servers {
		if err := srv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("server: drain: %w", err), srv.Close())
		}
	}
	for range servers {
		if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, fmt.Errorf("server: serve: %w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	s.log.Info("stopped")
	return nil
}

func (s *Server) httpServer(h http.Handler) *http.Server { return NewHTTPServer(h, s.log) }

// NewHTTPServer returns an http.Server for h with keygate's limits and
// timeouts, logging its own errors to log at warning level. The reference
// servers of the load tests use it too, so that they differ from keygate
// only in their handler.
func NewHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}
