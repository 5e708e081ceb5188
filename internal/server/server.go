// Package server runs keygate's HTTP service: its listeners (traffic, admin,
// probe, and Envoy's ext_authz over gRPC) with the timeouts, header limits,
// TLS and graceful shutdown a public listener needs; the routing of the
// /auth forward-auth decision,
// the reverse proxy, the token service's endpoints (package issuer) and the
// admin endpoints; and the runtime built from the configuration, swapped
// atomically on reload. The state the token service keeps is the node's
// (package node), which New opens. Key material and whole tokens never
// reach its logs: a token appears only as an 8-hex-digit SHA-256
// fingerprint.
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keygate/keygate/internal/admin"
	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/gateway"
	"github.com/keygate/keygate/internal/gateway/extauthz"
	"github.com/keygate/keygate/internal/httperr"
	"github.com/keygate/keygate/internal/issuer"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/revoke"
	"github.com/keygate/keygate/internal/secrets"
	"github.com/keygate/keygate/internal/secrets/credapi"
	"github.com/keygate/keygate/internal/secrets/kvapi"
	"github.com/keygate/keygate/internal/telemetry"
	"github.com/keygate/keygate/internal/telemetry/tracing"
	"github.com/keygate/keygate/internal/tlscert"
	"github.com/keygate/keygate/internal/transit"
	"github.com/keygate/keygate/internal/transit/keystore"
	"github.com/keygate/keygate/internal/transit/vaultapi"
	"github.com/keygate/keygate/internal/vaultsys"
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

// Config configures a Server.
type Config struct {
	Logger  *slog.Logger       // nil discards logs
	Now     func() time.Time   // nil means time.Now
	Metrics *telemetry.Metrics // if set, receives decisions, fetches and reloads

	// Gateway is the verification set-up: issuers, routes, cache,
	// listeners. With no issuers, the node's own signing keys are the one
	// trusted issuer (dev mode). nil means an empty configuration.
	Gateway *config.Config
	// ConfigPath, if set, is where Gateway came from: Reload and the file
	// watcher read it again. Env and Overrides are applied on every load.
	ConfigPath string
	Env        []string
	Overrides  Overrides

	// Node configures the token service's node, which New opens and Close
	// closes, with the admin token New has read and, where it sets none,
	// the server's Logger, Now and Metrics. nil runs the gateway without a
	// token service: no data directory, root key, admin token or store is
	// created or opened, the token endpoints are not served (the proxy,
	// if any, forwards those paths like any other) and the admin listener
	// has no /v1/ API; Gateway must then configure at least one issuer.
	Node *node.Config

	// AdminToken and MetricsToken are the admin token and the /metrics
	// scrape token given in the environment (KEYGATE_ADMIN_TOKEN,
	// KEYGATE_METRICS_TOKEN), unless Gateway names a file for them
	// (token_service.admin_token_file, metrics_token_file). The admin
	// token guards the admin API, sealing and, when Gateway.Pprof is set,
	// the profiles; /metrics is open without a scrape token. Both are read
	// at start, at least MinTokenLen characters.
	AdminToken, MetricsToken string

	// TransitObserve, if set, is told of every transit request once it is
	// decided and before its answer is written; its error turns the answer
	// into a 500 (vaultapi.Options.Observe): the audit log's seam.
	TransitObserve func(http.ResponseWriter, *http.Request, vaultapi.Outcome) error
	// SecretsObserve is TransitObserve for the secret store's KV API.
	SecretsObserve func(http.ResponseWriter, *http.Request, kvapi.Outcome) error
	// Version is keygate's version, as /v1/sys/health answers it.
	Version string
	// AccessLogWriter, if set, receives the access log (when the
	// configuration enables it) instead of its output: for tests.
	AccessLogWriter io.Writer
	// Tracing are the tracer provider's options besides the configuration
	// file's tracing section (tests give an exporter of their own).
	Tracing tracing.Options
}

// MinTokenLen is the length the admin and metrics tokens must reach.
const MinTokenLen = issuer.MinBearerLen

// Validate reports a missing required field.
func (c *Config) Validate() error {
	if c.Node != nil {
		return c.Node.Validate()
	}
	if c.Gateway == nil || len(c.Gateway.Issuers) == 0 {
		return errors.New("a gateway-only node needs at least one issuer to trust")
	}
	return nil
}

// Server is keygate's HTTP service. Create it with New.
type Server struct {
	cfg      Config
	log      *slog.Logger
	errs     httperr.Writer          // answers the admin listener's errors
	node     *node.Node              // nil on a gateway-only node
	rt       atomic.Pointer[runtime] // the configuration in force, swapped whole on reload
	reloadMu sync.Mutex              // one reload at a time

	guards  adminGuards    // the admin and metrics tokens
	tokens  tokenService   // the token service and its admin API
	transit transitService // Vault's transit API
	fronts  frontEnds      // what the traffic and Envoy listeners serve
	tls     listenerTLS    // the listeners' certificates
	obs     observability  // metrics, access log, traces
}

// adminGuards are what guard the admin listener's endpoints.
type adminGuards struct {
	operator issuer.Bearer  // the admin token: the admin API (through tokens.admin), seal, pprof
	scraper  issuer.Bearer  // the metrics scrape token; unset: /metrics is open
	passGate passphraseGate // spaces unauthenticated passphrase checks (seal.go)
}

// tokenService is the token service on the node; all nil on a
// gateway-only node.
type tokenService struct {
	service *issuer.Service
	admin   *admin.API // nil without an admin token
}

// transitService is the transit API on the node's transit keys; all nil
// on a gateway-only node.
type transitService struct {
	keys *keystore.Service
	api  http.Handler // /v1/transit/, audited
	// The secret store beside it: Vault's KV version 2 at /v1/secret/
	// (audited) and the sys endpoints Vault's clients call first.
	kv                      http.Handler
	health, mounts, selfTok http.Handler
	cred                    http.Handler // Vault's TOTP engine and password policies, audited
}

// frontEnds are what the traffic and Envoy listeners serve. The routes,
// the pipeline and the key sources they use are the runtime's (rt).
type frontEnds struct {
	traffic   http.Handler                    // forward auth, the reverse proxy, the token service, transit
	transport *http.Transport                 // the reverse proxy's, kept across reloads
	grpc      atomic.Pointer[extauthz.Server] // the Envoy listener's, while it serves
}

// listenerTLS are the listeners' certificates; nil: plain HTTP.
type listenerTLS struct {
	traffic *tlscert.Files // the traffic and probe listeners' (and the Envoy listener's)
	admin   *tlscert.Files
}

// observability is what tells of the server's work.
type observability struct {
	metrics      *telemetry.Metrics                                   // nil: no metrics
	observe      func(context.Context, jose.Alg, time.Duration, bool) // verification latency, nil without metrics
	fwdMetrics   *telemetry.Decisions                                 // forward auth's decisions
	proxyMetrics *telemetry.Decisions                                 // the reverse proxy's
	envoyMetrics *telemetry.Decisions                                 // nil without envoy_grpc_listen
	cacheHits    atomic.Uint64                                        // the last cache hit count the metrics read
	cacheMisses  atomic.Uint64

	access     *gateway.AccessLog // nil: no access log
	accessFile *os.File           // the access log's file, closed by Close
	tracing    *tracing.Provider  // nil: tracing off
	tracer     *telemetry.Tracer  // the provider's; nil: off
}

// New opens the node (see node.Open), builds the token service on it and
// the runtime from cfg.Gateway (starting remote key sources) and the
// handlers. It does not listen. Close releases the key sources and the
// node.
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
	if cfg.Gateway == nil {
		cfg.Gateway = &config.Config{}
		cfg.Gateway.SetDefaults()
	}
	s := &Server{cfg: cfg, log: cfg.Logger, errs: httperr.Writer{Log: cfg.Logger}}
	s.obs.metrics = cfg.Metrics
	s.fronts.transport = gateway.NewTransport()
	defer func() {
		if err != nil {
			s.Close() // what was opened before the failure; Close skips the rest
		}
	}()
	if s.obs.metrics != nil {
		s.obs.observe = s.obs.metrics.VerifyObserver()
	}
	s.obs.fwdMetrics = newDecisions(s.obs.metrics, telemetry.FrontForwardAuth)
	s.obs.proxyMetrics = newDecisions(s.obs.metrics, telemetry.FrontProxy)
	if cfg.Gateway.EnvoyGRPCListen != "" && s.obs.metrics != nil {
		s.obs.envoyMetrics = s.obs.metrics.Decisions(extauthz.FrontEnd, envoyReasons)
	}
	if err := s.openAccessLog(cfg.Gateway.AccessLog); err != nil {
		return nil, fmt.Errorf("access_log: %w", err)
	}
	topts := cfg.Tracing
	if topts.Logger == nil {
		topts.Logger = s.log
	}
	if s.obs.tracing, err = tracing.New(ctx, cfg.Gateway.Tracing, topts); err != nil {
		return nil, err
	}
	s.obs.tracer = s.obs.tracing.Tracer()
	if s.obs.tracer != nil {
		s.log.Info("tracing on", "protocol", tracing.Protocol(cfg.Gateway.Tracing, getenvOr(topts.Getenv)))
	}
	// Certificates first: a listener that cannot serve is reported before
	// anything is written to disk.
	if err := s.openTLS(cfg.Gateway); err != nil {
		return nil, err
	}
	if err := s.readCredentials(); err != nil {
		return nil, err
	}
	if cfg.Node == nil {
		s.log.Info("gateway only: no token service, nothing written to disk (--dev or token_service settings start one)")
	} else if err := s.openNode(ctx); err != nil {
		return nil, err
	}
	if cfg.Gateway.Pprof && !s.guards.operator.Set() {
		return nil, errors.New("pprof is enabled, but there is no admin token to guard it (token_service.admin_token_file or KEYGATE_ADMIN_TOKEN)")
	}
	rt, err := s.buildRuntime(ctx, cfg.Gateway, nil)
	if err != nil {
		return nil, err
	}
	s.rt.Store(rt)
	if s.obs.metrics != nil && s.node != nil {
		s.obs.metrics.Cache(s.cacheStats)
		s.obs.metrics.Rekey(s.rekeyStats)
	}
	s.fronts.traffic = s.traffic()
	return s, nil
}

// openNode opens the node and the token service and admin API on it.
func (s *Server) openNode(ctx context.Context) (err error) {
	ncfg := *s.cfg.Node
	ncfg.AdminToken = s.guards.operator
	if ncfg.Logger == nil {
		ncfg.Logger = s.log
	}
	if ncfg.Now == nil {
		ncfg.Now = s.cfg.Now
	}
	if ncfg.Metrics == nil {
		ncfg.Metrics = s.obs.metrics
	}
	ncfg.Traced = s.obs.tracer != nil
	if s.node, err = node.Open(ctx, ncfg); err != nil {
		return err
	}
	s.guards.operator = s.node.AdminToken() // the dev one, if the node made it
	icfg := s.node.IssuerConfig()
	icfg.Trusts = s.trusts
	icfg.Tracer = s.obs.tracer
	if s.tokens.service, err = issuer.New(icfg); err != nil {
		return fmt.Errorf("token service: %w", err)
	}
	if s.guards.operator.Set() {
		if s.tokens.admin, err = admin.New(s.tokens.service, s.node.Store(), s.guards.operator); err != nil {
			return err
		}
	}
	return s.openTransit()
}

// openTransit serves the node's transit keys (Vault's transit API) to the
// token service's own tokens: an external identity provider's token could
// claim any tenant, so the transit API verifies with the node's signing
// keys alone, whatever issuers the gateway trusts.
func (s *Server) openTransit() (err error) {
	n := s.node
	tc := s.cfg.Gateway.Transit
	eng := transit.New(transit.Options{Now: s.cfg.Now, MaxBatchCost: tc.MaxBatchCost,
		PrivateKeyWorkers: tc.PrivateKeyWorkers, TenantQueue: tc.TenantQueue, CallerQueue: tc.CallerQueue})
	if s.transit.keys, err = keystore.New(n.Store(), n.TenantKeys(), n, keystore.Options{Logger: s.log, Now: s.cfg.Now, Engine: eng}); err != nil {
		return err
	}
	pipe, err := verify.New(verify.Config{
		Policies: []verify.Policy{{Issuer: n.Issuer(), Keys: n.KeySource(), Algorithms: n.Algorithms(),
			Audiences: []string{n.Audience()}, Leeway: Leeway}},
		Revocation: n.Revocations(),
		Cache:      verify.CacheConfig{MaxEntries: 10_000, MaxBytes: 16 << 20},
		Now:        s.cfg.Now,
	})
	if err != nil {
		return fmt.Errorf("transit token verification: %w", err)
	}
	opts := vaultapi.Options{Keys: s.transit.keys, Verifier: pipe, Logger: s.log, Observe: s.cfg.TransitObserve}
	if s.obs.metrics != nil {
		s.obs.metrics.TransitPool(func() telemetry.TransitPoolStats {
			st := eng.PrivateKeyStats()
			return telemetry.TransitPoolStats{Workers: st.Workers, Running: st.Running, Waiting: st.Waiting, Started: st.Started}
		})
		m := s.obs.metrics.Transit(vaultapi.Operations())
		opts.Measure = func(o *vaultapi.Outcome, elapsed time.Duration) {
			m.Observe(o.Operation, o.Status, o.Reason, o.Items, o.Failed, elapsed)
		}
	}
	h, err := vaultapi.New(opts)
	if err != nil {
		return err
	}
	s.transit.api = s.auditedAs("transit.request", httperr.Writer{Envelope: httperr.Vault, Log: s.log}, h)
	return s.openSecrets(pipe)
}

// totpMount is the TOTP engine as sys/mounts lists it.
var totpMount = vaultsys.Mount{Path: "totp/", Type: "totp", Description: "keygate's one-time codes"}

// openSecrets serves the node's secret store (Vault's KV version 2) and
// Vault's sys endpoints, verifying tokens with pipe as transit does.
func (s *Server) openSecrets(pipe *verify.Pipeline) error {
	n := s.node
	sc := s.cfg.Gateway.Secrets
	if sc.CacheBytes == 0 && n.SharedStore() {
		// A fleet reads its own writes at every node unless told otherwise
		// (the cache's notices arrive after the write is answered).
		sc.CacheBytes = -1
		s.log.Info("secret read cache off on a shared store: every node reads each change at once (secrets.cache_bytes turns it on)")
	}
	eng, err := secrets.New(secrets.Options{Store: n.Store(), Keys: n.TenantKeys(), Now: s.cfg.Now, Logger: s.log,
		CacheBytes: sc.CacheBytes, CacheMaxAge: sc.CacheMaxAge, Notices: n})
	if err != nil {
		return err
	}
	opts := kvapi.Options{Secrets: eng, Verifier: pipe, Sealed: n.Sealed, Logger: s.log, Observe: s.cfg.SecretsObserve}
	if s.obs.metrics != nil {
		s.obs.metrics.SecretCache(func() telemetry.SecretCacheStats {
			st := eng.CacheStats()
			return telemetry.SecretCacheStats{Hits: st.Hits, Misses: st.Misses, Drops: st.Drops, Entries: st.Entries, Bytes: st.Bytes}
		})
		m := s.obs.metrics.Secrets(kvapi.Operations())
		opts.Measure = func(o *kvapi.Outcome, elapsed time.Duration) {
			m.Observe(o.Operation, o.Status, o.Reason, 0, 0, elapsed)
		}
	}
	kv, err := kvapi.New(opts)
	if err != nil {
		return err
	}
	vaultErrs := httperr.Writer{Envelope: httperr.Vault, Log: s.log}
	s.transit.kv = s.auditedAs("secret.request", vaultErrs, kv)
	s.transit.health = vaultsys.NewHealth(vaultsys.HealthOptions{Sealed: n.Sealed, Version: s.cfg.Version, Now: s.cfg.Now, Logger: s.log})
	mounts, err := vaultsys.NewMounts(vaultsys.MountsOptions{Verifier: pipe,
		Mounts: []vaultsys.Mount{vaultsys.KVv2Mount, vaultsys.TransitMount, totpMount}, Sealed: n.Sealed, Logger: s.log})
	if err != nil {
		return err
	}
	self, err := vaultsys.NewLookupSelf(vaultsys.LookupSelfOptions{Verifier: pipe, Sealed: n.Sealed, Now: s.cfg.Now, Logger: s.log})
	if err != nil {
		return err
	}
	copts := credapi.Options{Records: eng.Internal(), Verifier: pipe, Sealed: n.Sealed, Now: s.cfg.Now, Logger: s.log}
	if s.obs.metrics != nil {
		m := s.obs.metrics.Credentials(credapi.Operations())
		copts.Measure = func(op string, status int, reason string, elapsed time.Duration) {
			m.Observe(op, status, reason, 0, 0, elapsed)
		}
	}
	cred, err := credapi.New(copts)
	if err != nil {
		return err
	}
	s.transit.cred = s.auditedAs("credentials.request", vaultErrs, cred)
	s.transit.mounts = s.auditedAs("sys.mounts", vaultErrs, mounts)
	s.transit.selfTok = s.auditedAs("auth.token.lookup_self", vaultErrs, self)
	return nil
}

// trusts reports whether the gateway's configuration in force trusts
// issuer's tokens: what the admin API may revoke besides the token
// service's own. It reads the runtime at each call, so a reload that adds
// or removes an issuer is seen at once.
func (s *Server) trusts(issuer string) bool {
	rt := s.rt.Load()
	if rt == nil {
		return false
	}
	_, ok := rt.sources[issuer]
	return ok
}

// Node returns the node the server opened; nil on a gateway-only node.
func (s *Server) Node() *node.Node { return s.node }

// revocation is the revocation checker of the gateway's pipeline: the
// node's set, and none on a gateway-only node.
func (s *Server) revocation() revoke.Checker {
	if s.node == nil {
		return revoke.Nop{}
	}
	return s.node.Revocations()
}

// cacheStats reads the verified-token cache's figures for the metrics:
// counted across reloads, and never lower than a previous reading (lookups
// the replaced cache answered while a reload was swapping it out are
// dropped rather than make the counter go back).
func (s *Server) cacheStats() (entries int, hits, misses uint64) {
	rt := s.rt.Load()
	st := rt.pipeline.Stats()
	return st.Entries, monotonic(&s.obs.cacheHits, rt.hitsBase+st.Hits), monotonic(&s.obs.cacheMisses, rt.missesBase+st.Misses)
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

// Close stops the key sources and closes the node. Call it after Serve
// has returned.
func (s *Server) Close() {
	if rt := s.rt.Load(); rt != nil {
		rt.closeSources(nil)
	}
	if s.obs.accessFile != nil {
		s.obs.accessFile.Close()
	}
	s.fronts.transport.CloseIdleConnections()
	if s.transit.keys != nil {
		s.transit.keys.Close()
	}
	if s.node != nil {
		s.node.Close()
	}
	if s.obs.tracing != nil {
		// The spans still queued are sent, for as long as a stop can
		// wait: a dead collector must not hold the process.
		ctx, cancel := context.WithTimeout(context.Background(), TracingFlushTimeout)
		if err := s.obs.tracing.Shutdown(ctx); err != nil {
			s.log.Warn("tracing: flushing spans at stop failed", "err", err)
		}
		cancel()
	}
}

// TracingFlushTimeout bounds how long Close waits for queued spans to be
// exported.
const TracingFlushTimeout = 5 * time.Second

func getenvOr(f func(string) string) func(string) string {
	if f == nil {
		return os.Getenv
	}
	return f
}

// openAccessLog opens the access log the section describes, if enabled.
func (s *Server) openAccessLog(c config.AccessLog) error {
	if !c.Enabled {
		return nil
	}
	var w io.Writer
	switch {
	case s.cfg.AccessLogWriter != nil:
		w = s.cfg.AccessLogWriter
	case c.Output == "" || c.Output == "stderr":
		w = os.Stderr
	case c.Output == "stdout":
		w = os.Stdout
	default:
		f, err := os.OpenFile(c.Output, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return err
		}
		s.obs.accessFile, w = f, f
	}
	sample := 1.0
	if c.SampleAllowed != nil {
		sample = *c.SampleAllowed
	}
	s.obs.access = gateway.NewAccessLog(w, sample)
	return nil
}

// Handler returns the traffic handler, for tests and for embedding.
func (s *Server) Handler() http.Handler { return s.fronts.traffic }

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
	// EnvoyGRPC serves Envoy's external authorization over gRPC (see
	// envoy.go).
	EnvoyGRPC net.Listener
}

// ServeListeners serves on ls until ctx is done; then it stops accepting,
// waits up to ShutdownTimeout for requests (and gRPC calls) in flight, and
// returns. It
// closes the listeners. With a configuration file it also reloads when the
// file changes, and it reads key files again when they change; both
// watchers end before it returns.
func (s *Server) ServeListeners(ctx context.Context, ls Listeners) error {
	var servers []*http.Server
	errc := make(chan error, 4)
	var attrs []any
	// The probe listener serves the traffic listener's certificate. The
	// log line names the traffic listener's address addr, and its TLS tls.
	for _, l := range []struct {
		ln          net.Listener
		h           func() http.Handler
		tls         *tlscert.Files
		addr, state string // the log line's keys
	}{{ls.Traffic, func() http.Handler { return s.fronts.traffic }, s.tls.traffic, "addr", "tls"},
		{ls.Admin, s.adminHandler, s.tls.admin, ListenerAdmin, ListenerAdmin + "_tls"},
		{ls.Probe, s.probeHandler, s.tls.traffic, ListenerProbe, ListenerProbe + "_tls"}} {
		if l.ln == nil {
			continue
		}
		hs := s.httpServer(l.h())
		if l.tls != nil {
			hs.TLSConfig = l.tls.ServerConfig()
		} else if l.ln == ls.Traffic {
			allowH2C(hs)
		}
		servers = append(servers, hs)
		go func() { errc <- serveOn(hs, l.ln) }()
		attrs = append(attrs, l.addr, l.ln.Addr().String(), l.state, tlsState(l.tls))
	}
	var grpcSrv *extauthz.Server
	if ls.EnvoyGRPC != nil {
		grpcSrv = s.envoyServer()
		s.fronts.grpc.Store(grpcSrv)
		defer s.fronts.grpc.Store(nil)
		go func() { errc <- grpcSrv.Serve(ls.EnvoyGRPC) }()
		attrs = append(attrs, ListenerEnvoyGRPC, ls.EnvoyGRPC.Addr().String(), ListenerEnvoyGRPC+"_tls", tlsState(s.tls.traffic))
	}
	fw := s.rt.Load().cfg.ForwardAuth.Forwarding()
	if n := s.node; n != nil {
		attrs = append(attrs, "issuer", n.Issuer(), "kid", n.Thumbprint())
	}
	attrs = append(attrs, "trusted_issuers", len(s.rt.Load().sources),
		"forward_auth_proxy", fw.Proxy, "forward_auth_trusts", strings.Join(fw.Headers(), ","))
	s.log.Info("listening", attrs...)
	// Auto named in the file (examples/dev.yaml) or by --proxy is a choice:
	// only a proxy left unset is warned of.
	if fa := s.rt.Load().cfg.ForwardAuth; fa.Proxy == "" && fa.TrustedHeaders == nil && len(fa.Rules) > 0 {
		s.log.Warn("forward_auth.proxy is not set: /auth reads both X-Forwarded-* and X-Original-* and refuses requests on which they disagree; name the proxy in front (--proxy nginx|traefik|caddy|envoy) so that only the headers it sets are trusted")
	}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watchDone, tickDone := make(chan struct{}), make(chan struct{})
	go func() { defer close(watchDone); s.watch(wctx, WatchInterval) }()
	go func() {
		defer close(tickDone)
		if s.node != nil {
			s.node.Run(wctx)
		}
	}()
	defer func() { stopWatch(); <-watchDone; <-tickDone }()
	select {
	case err := <-errc:
		for _, hs := range servers {
			hs.Close()
		}
		if grpcSrv != nil {
			grpcSrv.Stop()
		}
		if err == nil { // grpc's Serve returns nil only when stopped
			err = errors.New("the Envoy gRPC server stopped")
		}
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	s.log.Info("shutting down", "drain", ShutdownTimeout)
	return s.shutdown(servers, grpcSrv, errc)
}

// shutdown drains the HTTP servers and the gRPC one (if not nil) for up to
// ShutdownTimeout, then closes what is left.
func (s *Server) shutdown(servers []*http.Server, grpcSrv *extauthz.Server, errc <-chan error) error {
	ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	var errs []error
	grpcDone := make(chan struct{})
	n := len(servers)
	if grpcSrv != nil {
		n++
		go func() { defer close(grpcDone); grpcSrv.GracefulStop() }()
	} else {
		close(grpcDone)
	}
	for _, srv := range servers {
		if err := srv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("drain: %w", err), srv.Close())
		}
	}
	select {
	case <-grpcDone:
	case <-ctx.Done():
		grpcSrv.Stop() // ends GracefulStop too
		<-grpcDone
		errs = append(errs, fmt.Errorf("drain: gRPC calls still running after %s", ShutdownTimeout))
	}
	for range n {
		// grpc's Serve returns nil once stopped, net/http's ErrServerClosed.
		if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, fmt.Errorf("serve: %w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	s.log.Info("stopped")
	return nil
}

func (s *Server) httpServer(h http.Handler) *http.Server { return NewHTTPServer(h, s.log) }

// allowH2C serves HTTP/2 without TLS (h2c) beside HTTP/1.1 on a plaintext
// traffic listener, with prior knowledge only: a proxy that keeps one
// multiplexed connection to its authorizer (Envoy's http_service, nginx's
// grpc_pass, Go's and curl's prior-knowledge clients) opens it with the
// HTTP/2 preface. An HTTP/1.1 "Upgrade: h2c" is not honoured: RFC 9113
// deprecated it, and a front proxy that passes Upgrade through (as
// WebSocket set-ups do) would let a client turn its connection into an
// HTTP/2 tunnel to keygate past the proxy's own rules (h2c smuggling).
func allowH2C(hs *http.Server) {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	hs.Protocols = p
}

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
