package server

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/textproto"
	"path"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/keygate/keygate/internal/audit"
	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/gateway"
	"github.com/keygate/keygate/internal/secrets/credapi"
	"github.com/keygate/keygate/internal/secrets/kvapi"
	"github.com/keygate/keygate/internal/telemetry"
	"github.com/keygate/keygate/internal/transit/vaultapi"
	"github.com/keygate/keygate/internal/vaultsys"
	"github.com/keygate/keygate/internal/verify"
	"github.com/keygate/keygate/internal/verify/verifykeys"
)

// runtime is everything built from one configuration: key sources, the
// pipeline and the front ends. The server holds it behind an atomic pointer
// and swaps in a whole new one on reload, so a request sees one consistent
// configuration from start to end and none is dropped.
type runtime struct {
	cfg      *config.Config
	sources  map[string]*source // by issuer
	pipeline *verify.Pipeline
	forward  http.Handler
	proxy    http.Handler     // nil when no routes are configured
	envoy    *gateway.Decider // Envoy's ext_authz (envoy.go)
	// authTree: forward-auth also answers under /auth/ (Envoy's HTTP
	// ext_authz sends path_prefix + the original path).
	authTree bool
	// hitsBase and missesBase are the cache counts of the runtimes this
	// one replaced, so that the metrics count across reloads.
	hitsBase, missesBase uint64
}

// source is one issuer's key source and the settings it was built from, so
// that a reload keeps a source whose settings did not change (and its keys).
type source struct {
	verifykeys.Source
	spec  string
	close func()
	files *verifykeys.Files // the source, when it reads key files; nil otherwise
}

// DefaultHeaders are the claim headers an issuer gets when it maps none.
var DefaultHeaders = map[string]string{"X-Auth-Subject": "sub", "X-Auth-Scopes": "scope", "X-Auth-Issuer": "iss"}

// buildRuntime builds a runtime for cfg. Sources of prev whose settings are
// unchanged are reused; new remote sources are started, bounded by their
// fetch timeout, before the runtime is returned. A source that cannot fetch
// yet does not fail the build: the issuer is simply not ready.
func (s *Server) buildRuntime(ctx context.Context, cfg *config.Config, prev *runtime) (*runtime, error) {
	rt := &runtime{cfg: cfg, sources: map[string]*source{}}
	ok := false
	defer func() {
		if !ok {
			rt.closeSources(prev)
		}
	}()
	var policies []verify.Policy
	for i := range cfg.Issuers {
		is := &cfg.Issuers[i]
		src, err := s.issuerSource(ctx, is, prev)
		if err != nil {
			return nil, fmt.Errorf("issuers[%d] (%s): %w", i, is.Issuer, err)
		}
		rt.sources[is.Issuer] = src
		policies = append(policies, policyFor(is, src))
	}
	if len(policies) == 0 {
		p, src := s.devPolicy()
		rt.sources[p.Issuer] = src
		policies = append(policies, p)
	}
	pipe, err := verify.New(verify.Config{
		Policies:     policies,
		Revocation:   s.revocation(),
		Cache:        verify.CacheConfig{Disabled: cfg.Cache.Disabled, MaxEntries: cfg.Cache.MaxEntries, MaxBytes: cfg.Cache.MaxBytes, MaxTTL: cfg.Cache.MaxTTL},
		MaxTokenSize: cfg.MaxTokenSize,
		Now:          s.cfg.Now,
		Observe:      s.obs.observe,
		Traced:       s.obs.tracer != nil,
	})
	if err != nil {
		return nil, err
	}
	rt.pipeline = pipe
	headers := ClaimHeaders(cfg)
	rt.authTree = cfg.ForwardAuth.Forwarding().MountPrefix != ""
	if rt.forward, err = gateway.NewForwardAuth(gateway.ForwardAuthConfig{Verifier: pipe,
		Routes: gatewayRoutes(cfg.ForwardAuth.Rules), Cookie: cfg.ForwardAuth.Cookie, Forwarding: cfg.ForwardAuth.Forwarding(),
		Headers: headers, Metrics: s.obs.fwdMetrics, Logger: s.log, AccessLog: s.obs.access, Tracer: s.obs.tracer}); err != nil {
		return nil, err
	}
	if rt.envoy, err = s.envoyDecider(rt); err != nil {
		return nil, err
	}
	if len(cfg.Routes) > 0 {
		if rt.proxy, err = gateway.NewProxy(gateway.ProxyConfig{Verifier: pipe, Routes: gatewayRoutes(cfg.Routes),
			Cookie: cfg.ForwardAuth.Cookie, Headers: headers, Transport: s.fronts.transport, Metrics: s.obs.proxyMetrics, Logger: s.log,
			AccessLog: s.obs.access, Tracer: s.obs.tracer}); err != nil {
			return nil, err
		}
	}
	ok = true
	return rt, nil
}

// ClaimHeaders lists, sorted and canonical, every claim header the
// configuration's issuers map (DefaultHeaders for an issuer that maps none,
// and for the dev issuer when none is configured): the headers forward-auth
// sets on every 200 and a proxy in front must overwrite.
func ClaimHeaders(cfg *config.Config) []string {
	set := map[string]bool{}
	add := func(m map[string]string) {
		for h := range m {
			set[textproto.CanonicalMIMEHeaderKey(h)] = true
		}
	}
	if len(cfg.Issuers) == 0 {
		add(DefaultHeaders) // the dev issuer's (devPolicy)
	}
	for i := range cfg.Issuers {
		add(issuerHeaders(&cfg.Issuers[i]))
	}
	return slices.Sorted(maps.Keys(set))
}

// issuerHeaders is an issuer's header → claim mapping: its own, or
// DefaultHeaders when it maps none. Both its policy and ClaimHeaders read
// it, so forward-auth sets (and a proxy overwrites) every header the
// pipeline can emit.
func issuerHeaders(is *config.Issuer) map[string]string {
	if len(is.Headers) == 0 {
		return DefaultHeaders
	}
	return is.Headers
}

func policyFor(is *config.Issuer, src verifykeys.Source) verify.Policy {
	hm := headerMappings(issuerHeaders(is))
	leeway := config.DefaultLeeway
	if is.Leeway != nil {
		leeway = *is.Leeway
		if leeway == 0 {
			leeway = -1 // verify: negative means none, zero means the default
		}
	}
	return verify.Policy{Issuer: is.Issuer, Keys: src, Algorithms: is.Algs(), Audiences: is.Audiences,
		AllAudiences: is.AllAudiences, Leeway: leeway, Require: is.Require, Scopes: is.Scopes, Type: is.Type, Headers: hm}
}

// issuerSource returns the issuer's key source, reusing prev's when its
// settings are the same. Key files are read again either way: a reload is
// how an operator makes a key removed from a file stop verifying, so a file
// that no longer loads fails the reload (its last good keys keep serving).
func (s *Server) issuerSource(ctx context.Context, is *config.Issuer, prev *runtime) (*source, error) {
	spec := fmt.Sprintf("%q %q %v %q %v %+v", is.JWKSURL, is.Issuer, is.Discovery, is.KeyFiles, is.Algorithms, is.JWKS)
	if prev != nil {
		if old, ok := prev.sources[is.Issuer]; ok && old.spec == spec {
			if old.files != nil {
				if err := old.files.Reload(); err != nil {
					return nil, err
				}
			}
			return old, nil
		}
	}
	if len(is.KeyFiles) > 0 {
		f, err := verifykeys.LoadFiles(verifykeys.FilesConfig{Paths: is.KeyFiles, Algorithms: is.Algs(),
			Logger: s.log.With("issuer", is.Issuer), Now: s.cfg.Now, OnLoad: s.onKeyFileLoad(is.Issuer)})
		if err != nil {
			return nil, err
		}
		return &source{Source: f, spec: spec, close: func() {}, files: f}, nil
	}
	rc := verifykeys.RemoteConfig{URL: is.JWKSURL, Algorithms: is.Algs(), MinRefresh: is.JWKS.MinRefresh,
		MaxRefresh: is.JWKS.MaxRefresh, DefaultRefresh: is.JWKS.DefaultRefresh, MaxStale: is.JWKS.MaxStale,
		Timeout: is.JWKS.Timeout, MaxBody: is.JWKS.MaxBody, RefetchInterval: is.JWKS.RefetchInterval,
		Logger: s.log.With("issuer", is.Issuer), Now: s.cfg.Now, OnFetch: s.onFetch(is.Issuer), Tracer: s.obs.tracer}
	// The first fetch is bounded by the source's own timeout; on failure the
	// source keeps trying in the background and /readyz reports it.
	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	r, err := verifykeys.Open(startCtx, is.Issuer, is.Discovery, rc)
	if err != nil {
		return nil, err
	}
	return &source{Source: r, spec: spec, close: r.Close}, nil
}

func (s *Server) onFetch(issuer string) func(verifykeys.FetchEvent) {
	return func(ev verifykeys.FetchEvent) {
		if s.obs.metrics == nil {
			return
		}
		s.obs.metrics.JWKSFetch(issuer, ev.Result, ev.Keys, ev.At)
		for _, sk := range ev.Skipped {
			s.obs.metrics.JWKSKeySkipped(issuer, string(sk.Reason))
		}
	}
}

func (s *Server) onKeyFileLoad(issuer string) func(verifykeys.LoadEvent) {
	return func(ev verifykeys.LoadEvent) {
		if s.obs.metrics != nil {
			s.obs.metrics.KeyFileLoad(issuer, ev.Result == verifykeys.ResultOK, ev.Keys, ev.At)
		}
	}
}

// devPolicy trusts the node's own signing keys when no issuer is
// configured, so that `keygate serve` works with nothing else installed.
// A gateway-only node always has issuers (Config.Validate).
func (s *Server) devPolicy() (verify.Policy, *source) {
	n := s.node
	src := &source{Source: n.KeySource(), spec: "dev", close: func() {}}
	return verify.Policy{Issuer: n.Issuer(), Keys: src, Algorithms: n.Algorithms(),
		Audiences: []string{n.Audience()}, Leeway: Leeway, Headers: headerMappings(DefaultHeaders)}, src
}

// headerMappings turns a header → claim map into the policy's list, in
// header order.
func headerMappings(m map[string]string) []verify.HeaderMapping {
	hm := make([]verify.HeaderMapping, 0, len(m))
	for h, c := range m {
		hm = append(hm, verify.HeaderMapping{Header: h, Claim: c})
	}
	sort.Slice(hm, func(i, j int) bool { return hm[i].Header < hm[j].Header })
	return hm
}

func gatewayRoutes(rs []config.Route) []gateway.Route {
	out := make([]gateway.Route, len(rs))
	for i, r := range rs {
		out[i] = gateway.Route{Host: r.Host, PathPrefix: r.PathPrefix, Methods: r.Methods, Anonymous: r.Anonymous,
			Issuers: r.Issuers, Scopes: r.Scopes, Upstream: r.Upstream, CaseInsensitive: r.CaseInsensitive,
			AllowPathParams: r.AllowPathParams, AllowEncodedSlashes: r.AllowEncodedSlashes, AllowDotsAfterEmpty: r.AllowDotsAfterEmpty}
	}
	return out
}

// closeSources closes the sources of rt that keep is not also using.
func (rt *runtime) closeSources(keep *runtime) {
	for iss, src := range rt.sources {
		if keep != nil && keep.sources[iss] == src {
			continue
		}
		src.close()
	}
}

// notReady lists the issuers that have no keys yet.
func (rt *runtime) notReady() []string {
	var out []string
	for iss, src := range rt.sources {
		if !src.Status().Ready() {
			out = append(out, iss)
		}
	}
	slices.Sort(out)
	return out
}

// Reload reads the configuration file again and swaps in a runtime built
// from it. A configuration that does not load or build is refused and the
// running one keeps serving.
func (s *Server) Reload(ctx context.Context) error {
	if s.cfg.ConfigPath == "" {
		return errors.New("no configuration file to reload")
	}
	err := s.reload(ctx)
	if s.obs.metrics != nil {
		s.obs.metrics.Reload(err == nil)
	}
	if err != nil {
		s.log.Error("configuration reload refused; the previous configuration keeps serving", "err", err)
		return err
	}
	s.log.Info("configuration reloaded", "path", s.cfg.ConfigPath)
	return nil
}

func (s *Server) reload(ctx context.Context) error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	cfg, err := config.Load(s.cfg.ConfigPath, s.cfg.Env)
	if err != nil {
		return err
	}
	s.cfg.Overrides.Apply(cfg)
	prev := s.rt.Load()
	if !reflect.DeepEqual(cfg.TokenService, prev.cfg.TokenService) {
		s.log.Warn("token_service changed in the configuration file; it takes effect on restart")
	}
	if cfg.Audit != prev.cfg.Audit {
		s.log.Warn("audit changed in the configuration file; it takes effect on restart")
	}
	if cfg.TLS != prev.cfg.TLS || cfg.AdminTLS != prev.cfg.AdminTLS {
		s.log.Warn("tls or admin_tls changed in the configuration file; it takes effect on restart (the files they name are read again whenever their content changes)")
	}
	if !reflect.DeepEqual(cfg.Tracing, prev.cfg.Tracing) {
		s.log.Warn("tracing changed in the configuration file; it takes effect on restart")
	}
	if cfg.Transit != prev.cfg.Transit {
		s.log.Warn("transit changed in the configuration file; it takes effect on restart")
	}
	if cfg.Secrets != prev.cfg.Secrets {
		s.log.Warn("secrets changed in the configuration file; it takes effect on restart")
	}
	if cfg.EnvoyGRPCListen != prev.cfg.EnvoyGRPCListen || cfg.EnvoyGRPCReflection != prev.cfg.EnvoyGRPCReflection {
		s.log.Warn("envoy_grpc_listen or envoy_grpc_reflection changed in the configuration file; it takes effect on restart")
		cfg.EnvoyGRPCListen, cfg.EnvoyGRPCReflection = prev.cfg.EnvoyGRPCListen, prev.cfg.EnvoyGRPCReflection
	}
	rt, err := s.buildRuntime(ctx, cfg, prev)
	if err != nil {
		return err
	}
	st := prev.pipeline.Stats()
	rt.hitsBase, rt.missesBase = prev.hitsBase+st.Hits, prev.missesBase+st.Misses
	s.rt.Store(rt)
	prev.closeSources(rt)
	return nil
}

// Overrides write the command line's settings over a configuration the
// file and the environment gave, on every load: they win over both.
type Overrides func(*config.Config)

// Apply applies o, if set, to c.
func (o Overrides) Apply(c *config.Config) {
	if o != nil {
		o(c)
	}
}

// traffic routes the traffic listener: keygate's own endpoints, then the
// reverse proxy for everything else when routes are configured.
func (s *Server) traffic() http.Handler {
	mux := http.NewServeMux()
	type route struct {
		method, path string
		h            http.Handler
		op           audit.Operation // "": not audited
	}
	own := []route{{"GET", "/healthz", s.handle(s.healthz), ""}}
	if s.tokens.service != nil { // a gateway-only node leaves these paths to the proxy
		// Every request to the token endpoints is audited; the keys and
		// discovery documents are public and change nothing.
		tokens := s.tokens.service.Handler()
		own = append(own, route{"GET", "/.well-known/jwks.json", tokens, ""}, route{"GET", "/.well-known/openid-configuration", tokens, ""},
			route{"GET", "/.well-known/oauth-authorization-server", tokens, ""},
			route{"POST", "/oauth2/token", tokens, "oauth2.token"},
			route{"POST", "/oauth2/revoke", tokens, "oauth2.revoke"},
			route{"POST", "/oauth2/introspect", tokens, "oauth2.introspect"},
			route{"POST", "/v1/login", tokens, "login.password"})
	}
	ownPaths := map[string]bool{gateway.AuthPath: true}
	for _, e := range own {
		// keygate's paths are its own whatever the method: another method
		// is refused here, never handed to the catch-all proxy below, and
		// on an audited path that refusal is recorded too.
		h, refuse := e.h, methodNotAllowed(e.method)
		if e.op != "" {
			h, refuse = s.audited(e.op, h), s.audited(e.op, refuse)
		}
		mux.Handle(e.method+" "+e.path, h)
		mux.Handle(e.path, refuse)
		ownPaths[e.path] = true
	}
	if s.transit.kv != nil {
		// Vault's sys endpoints answer every method themselves, in Vault's
		// envelope; ui/mounts is a tree.
		for path, h := range map[string]http.Handler{vaultsys.HealthPath: s.transit.health, vaultsys.MountsPath: s.transit.mounts,
			vaultsys.LookupSelfPath: s.transit.selfTok} {
			mux.Handle(path, h)
			ownPaths[path] = true
		}
		mux.Handle(vaultsys.UIMountsPrefix, s.transit.mounts)
		for _, prefix := range []string{credapi.TOTPPrefix, credapi.PoliciesPrefix, credapi.PoliciesList} {
			mux.Handle(prefix, s.transit.cred)
		}
		ownPaths[credapi.PoliciesList] = true
	}
	forward := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.rt.Load().forward.ServeHTTP(w, r) })
	mux.Handle(gateway.AuthPath, forward)
	rest := func(w http.ResponseWriter, r *http.Request) {
		if p := s.rt.Load().proxy; p != nil {
			p.ServeHTTP(w, r)
			return
		}
		http.NotFound(w, r)
	}
	if s.transit.api != nil {
		// Only a spelling with dot or empty segments gets here, for the
		// mux to redirect to the clean path.
		mux.Handle(vaultapi.Prefix, s.transit.api)
	}
	if s.transit.kv != nil {
		// As transit's: a spelling of a KV path with dot or empty segments
		// before the mount (or the mount without its slash) carries a token
		// and perhaps a secret; the mux redirects it to the clean path.
		mux.Handle(kvapi.Prefix, s.transit.kv)
	}
	// The mux serves keygate's own paths, and redirects a spelling of one
	// with dot or empty segments to it: such a request (a transit one
	// carries a token and plaintext) is never the upstream's. Every other
	// path goes as sent to the reverse proxy, or under envoy to
	// forward-auth below /auth/: each reads it itself (refusing what
	// upstreams read in different ways), so the mux's cleaning must not
	// answer for them with a redirect.
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if s.transit.api != nil && strings.HasPrefix(p, vaultapi.Prefix) {
			// Vault's transit API takes every method (LIST too), routes
			// its paths itself and answers those it does not know; it
			// skips the mux's pattern matching (seven allocations of a
			// request that otherwise makes two).
			s.transit.api.ServeHTTP(w, r)
			return
		}
		if s.transit.kv != nil && strings.HasPrefix(p, kvapi.Prefix) {
			// The KV API reads its paths itself: a secret's path with dot
			// or empty segments is refused there (400), not redirected.
			s.transit.kv.ServeHTTP(w, r)
			return
		}
		switch clean := cleanPath(p); {
		case ownPaths[clean] || s.transit.api != nil && ownMount(clean, vaultapi.Prefix) ||
			s.transit.kv != nil && (ownMount(clean, kvapi.Prefix) || ownMount(clean, vaultsys.UIMountsPrefix) ||
				ownMount(clean, credapi.TOTPPrefix) || strings.HasPrefix(clean, credapi.PoliciesPrefix)):
			mux.ServeHTTP(w, r)
		case strings.HasPrefix(p, gateway.AuthPath+"/") && s.rt.Load().authTree:
			forward(w, r)
		default:
			rest(w, r)
		}
	})
}

// ownMount reports whether the clean path is under the mount prefix (which
// ends in '/') or names the mount without its slash.
func ownMount(clean, prefix string) bool {
	return strings.HasPrefix(clean, prefix) || clean == prefix[:len(prefix)-1]
}

// cleanPath is the path ServeMux redirects p to: dot and empty segments
// resolved, a trailing slash kept. It allocates only when p is not clean.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		if len(p) == len(np)+1 && strings.HasPrefix(p, np) {
			return p
		}
		np += "/"
	}
	return np
}

// methodNotAllowed answers 405 naming the one method a path takes (GET
// also takes HEAD, as the mux serves it).
func methodNotAllowed(method string) http.Handler {
	allow := method
	if method == http.MethodGet {
		allow = "GET, HEAD"
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	})
}

// watch, until ctx is done, reloads when the configuration file (if any)
// changes, polling its size and modification time, and reads the key files
// of the runtime in force and the listeners' certificate files again when
// their content changes (see verifykeys.Files.Poll and tlscert.Files.Poll). A key file that fails to load is logged and counted by
// its source, once per broken content, and its last good keys keep serving.
func (s *Server) watch(ctx context.Context, every time.Duration) {
	last := ""
	if s.cfg.ConfigPath != "" {
		last = fileStamp(s.cfg.ConfigPath)
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if s.cfg.ConfigPath != "" {
			if cur := fileStamp(s.cfg.ConfigPath); cur != last {
				last = cur
				s.Reload(ctx) //nolint:errcheck // logged and counted by Reload
			}
		}
		s.pollKeyFiles()
		s.pollCerts()
		s.pollHealth()
	}
}

// pollKeyFiles reads the key files of the runtime in force again where
// they changed. A reload reading the same files at the same time is
// serialized with it by the source, so the later read is the one in force.
func (s *Server) pollKeyFiles() {
	for _, src := range s.rt.Load().sources {
		if src.files != nil {
			src.files.Poll() //nolint:errcheck // logged and counted by the source
		}
	}
}

// decisionReasons are the reasons counted per front end from the start, so
// that every series exists at zero before the first refusal.
var decisionReasons = []string{"missing_token", "no_route", "malformed", "too_large", "unsupported_alg",
	"unknown_kid", "bad_signature", "expired", "not_yet_valid", "wrong_issuer", "wrong_audience", "revoked",
	"missing_claim", "insufficient_scope", "invalid_request", "ambiguous_path", "internal", "jwks_unavailable",
	gateway.ReasonForwardedRepeated, gateway.ReasonForwardedConflict, gateway.ReasonForwardedMissing}

func newDecisions(m *telemetry.Metrics, front string) *telemetry.Decisions {
	if m == nil {
		return nil
	}
	return m.Decisions(front, decisionReasons)
}
