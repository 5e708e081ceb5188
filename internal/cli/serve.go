package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/gateway"
	"github.com/keygate/keygate/internal/mint"
	"github.com/keygate/keygate/internal/ratelimit"
	"github.com/keygate/keygate/internal/server"
	"github.com/keygate/keygate/internal/telemetry"
	"github.com/keygate/keygate/jose"
)

// serveFlags are the flags of serve.
type serveFlags struct {
	listen, adminListen, dataDir, issuer, audience string
	probeListen                                    string
	configPath, jwksURL, upstream                  string
	proxy                                          string
	databaseURL, rootKeyFile, adminTokenFile       string
	keyringFile                                    string
	redisURL                                       string
	databaseURLFile, redisURLFile                  string
	metricsTokenFile                               string
	pprof                                          bool
	adminHosts                                     stringList
	maxStaleness, storeTimeout                     time.Duration
	tokenRate                                      float64
	ipv6Prefix                                     int
	signingAlg                                     string
	alg                                            jose.Alg       // parsed --signing-alg
	trusted                                        []netip.Prefix // parsed --trusted-proxy
	keyRotation, keyPrePublish, accessTTL          time.Duration
	dev                                            bool
	algs, trustedProxies                           stringList
	level                                          slog.Level
	tls                                            tlsFlags
}

func (f *serveFlags) register(fs *flagSet) {
	fs.StringVar(&f.configPath, "config", "", "YAML configuration `file` (reloaded on SIGHUP and when it changes)")
	fs.StringVar(&f.listen, "listen", "", "traffic `address` (default "+config.DefaultListen+"; port 0 picks a free port)")
	fs.StringVar(&f.adminListen, "admin-listen", "", "admin `address` for /metrics, /healthz, /readyz, /debug/pprof (default "+config.DefaultAdminListen+"; \"off\" disables)")
	fs.StringVar(&f.probeListen, "probe-listen", "", "`address` serving only /healthz and /readyz, for health checks from outside the host (default: none)")
	fs.StringVar(&f.dataDir, "data-dir", "", "`directory` holding the SQLite store and the dev files (default ./keygate-data)")
	fs.BoolVar(&f.dev, "dev", false, "dev mode: generate the root key, admin token and a demo client in the data directory if missing\n(the default without --root-key-file, KEYGATE_ROOT_KEY and --database-url)")
	fs.StringVar(&f.databaseURL, "database-url", "", "PostgreSQL `URL` (postgres://...) of the store; default SQLite in the data directory")
	fs.StringVar(&f.databaseURLFile, "database-url-file", "", "`file` holding the PostgreSQL URL, so that its password is not on the command line (or KEYGATE_DATABASE_URL)")
	fs.StringVar(&f.redisURLFile, "redis-url-file", "", "`file` holding the Redis URL, so that its password is not on the command line (or KEYGATE_REDIS_URL)")
	fs.BoolVar(&f.pprof, "pprof", false, "serve /debug/pprof/ on the admin listener, behind the admin token (never the command line)")
	fs.StringVar(&f.metricsTokenFile, "metrics-token-file", "", "`file` holding a bearer token that /metrics requires (or KEYGATE_METRICS_TOKEN; default: /metrics is open)")
	fs.Var(&f.adminHosts, "admin-host", "host `name` the admin listener answers to besides IP addresses and localhost (repeatable)")
	fs.StringVar(&f.redisURL, "redis-url", "", "Redis `URL` (redis://...) shared by a fleet: revocations, login rate limits, key-rotation notices (or KEYGATE_REDIS_URL)")
	fs.DurationVar(&f.maxStaleness, "revocation-max-staleness", 0, "with --redis-url, refuse every token once the shared revocation set has not been current for this `duration`, above 1s (0: never fail closed)")
	fs.Float64Var(&f.tokenRate, "token-rate-limit", 50, "token requests per second each client may make at /oauth2/token, burst twice that\n(shared through Redis in a fleet; 0: no limit)")
	fs.Var(&f.trustedProxies, "trusted-proxy", "reverse proxy `address or CIDR` whose X-Forwarded-For names the client for the per-address\nlogin limit (repeatable or comma-separated; default: none, the peer's address counts)")
	fs.IntVar(&f.ipv6Prefix, "login-ipv6-prefix", 64, "prefix `length` (32-128) an IPv6 client is counted by in the per-address login and\npre-authentication limits (or token_service.ipv6_prefix)")
	fs.DurationVar(&f.storeTimeout, "store-timeout", 5*time.Second, "with --database-url, fail a PostgreSQL operation (or a new connection) that has not answered in this `duration`")
	fs.StringVar(&f.rootKeyFile, "root-key-file", "", "root key `file` sealing the signing keys (or KEYGATE_ROOT_KEY in base64)")
	fs.StringVar(&f.keyringFile, "keyring-file", "", "passphrase header `file` (default keyring.json in the data directory; see keygate keyring init):\nwithout a root key the node starts sealed and waits for keygate unseal")
	fs.StringVar(&f.adminTokenFile, "admin-token-file", "", "`file` holding the admin API token (or KEYGATE_ADMIN_TOKEN; at least 32 characters)")
	fs.StringVar(&f.issuer, "issuer", "", "issuer `URL`: with --jwks-url the one trusted issuer; otherwise the issuer of the dev key's tokens (default \"http://\" + the listen address)")
	fs.StringVar(&f.audience, "audience", "", "`audience` tokens must carry (default keygate-demo in dev mode)")
	fs.StringVar(&f.proxy, "proxy", "", "the `proxy` in front of /auth: nginx, traefik, caddy or envoy; /auth then trusts only the forwarding\nheaders that proxy sets (default auto: X-Forwarded-* and X-Original-*, refused when they disagree; or forward_auth.proxy)")
	fs.StringVar(&f.jwksURL, "jwks-url", "", "quick start: trust tokens from --issuer verified with the keys at this JWKS `URL`")
	fs.Var(&f.algs, "alg", "quick start: allowed `algorithm` (repeatable; default every asymmetric one: RS256/384/512,\nPS256/384/512, ES256/384/512, EdDSA, each key bound to its own alg or the one its type implies)")
	fs.StringVar(&f.upstream, "upstream", "", "quick start: reverse-proxy every request to this `URL` after checking its token")
	fs.StringVar(&f.signingAlg, "signing-alg", "ES256", "`algorithm` of the signing keys the token service creates: ES256, ES384, ES512, RS256, PS256 or EdDSA")
	fs.DurationVar(&f.keyRotation, "key-rotation", 720*time.Hour, "how long a signing key signs before its successor takes over (`duration`; 0: manual rotation only)")
	fs.DurationVar(&f.keyPrePublish, "key-prepublish", time.Hour, "how long a new signing key is published before it signs (`duration`)")
	fs.DurationVar(&f.accessTTL, "access-token-ttl", 15*time.Minute, "lifetime of the access tokens the token service issues (`duration`)")
	fs.TextVar(&f.level, "log-level", slog.LevelInfo, "log `level`: debug, info, warn or error")
	f.tls.register(fs)
}

func (a *app) serve(ctx context.Context, args []string) error {
	fs := a.flags("keygate serve", "[flags]",
		"Runs keygate: the token service and the gateway. With no configuration it needs nothing\n"+
			"else installed (dev mode): it creates a root key, an admin token and a SQLite store in the\n"+
			"data directory, a demo client, and trusts the tokens its own signing keys sign, printing\n"+
			"the demo client and a sample token. With --config (or the quick-start flags) it verifies\n"+
			"tokens of the configured issuers. Traffic endpoints:\n"+
			"  /auth                        forward-auth for nginx auth_request, Traefik, Caddy\n"+
			"  POST /oauth2/token, /oauth2/revoke, /oauth2/introspect, /v1/login   the token service\n"+
			"  GET /.well-known/jwks.json   the public signing keys\n"+
			"  GET /.well-known/openid-configuration, /.well-known/oauth-authorization-server\n"+
			"  GET /healthz                 liveness\n"+
			"  everything else              the reverse proxy, when routes are configured\n"+
			"It stops gracefully on SIGINT or SIGTERM and reloads its configuration on SIGHUP.")
	var f serveFlags
	f.register(fs)
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	if _, err := gateway.Preset(f.proxy); err != nil {
		return usageErrorf("keygate serve", "--proxy %q: want nginx, traefik, caddy, envoy or auto", f.proxy)
	}
	cfg, err := f.gatewayConfig(a.env)
	if err != nil {
		return err
	}
	f.fromFile(&cfg.TokenService, fs)
	f.tls.fromFile(&cfg.TokenService, fs)
	if err := f.checkKeyPolicy(); err != nil {
		return err
	}
	if err := f.readURLFiles(); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: f.level}))
	for _, name := range []string{"database-url", "redis-url"} {
		if fs.isSet(name) && urlHasPassword(fs.Lookup(name).Value.String()) {
			log.Warn("--"+name+" holds a password, which every local user can read in the process list; give it in --"+name+"-file or KEYGATE_"+
				strings.ToUpper(strings.ReplaceAll(name, "-", "_"))+" instead", "flag", name)
		}
	}
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	var admin net.Listener
	if cfg.AdminListen != "off" {
		if admin, err = new(net.ListenConfig).Listen(ctx, "tcp", cfg.AdminListen); err != nil {
			ln.Close()
			return fmt.Errorf("admin listen: %w", err)
		}
		if err := checkAdminListener(log, admin, cfg, f.tls.insecureAdmin); err != nil {
			closeAll(ln, admin)
			return err
		}
	}
	var probe net.Listener
	if cfg.ProbeListen != "" {
		if probe, err = new(net.ListenConfig).Listen(ctx, "tcp", cfg.ProbeListen); err != nil {
			closeAll(ln, admin)
			return fmt.Errorf("probe listen: %w", err)
		}
	}
	srv, err := a.newServer(ctx, f, cfg, ln.Addr().String(), log)
	if err != nil {
		closeAll(ln, admin, probe)
		return err
	}
	defer srv.Close()
	if srv.Sealed() && admin == nil {
		closeAll(ln, probe)
		return errors.New("the node has no root key and would start sealed, but with --admin-listen off it could never be unsealed: give --root-key-file or KEYGATE_ROOT_KEY, or keep the admin listener")
	}
	scheme := "http"
	if cfg.TLS.Enabled() {
		scheme = "https"
	}
	base := baseURL(scheme, ln.Addr())
	b := srv.Bootstrap()
	a.printBootstrap(b, base)
	switch {
	case srv.Sealed():
		fmt.Fprintf(a.stdout, "keygate is sealed: it verifies tokens but issues none until unsealed:\n  keygate unseal [--admin URL of the admin listener]\n")
	case len(cfg.Issuers) == 0 && b.Dev && (b.RootKeyCreated || f.dev):
		// A working token goes to the terminal only in dev mode, and on a
		// restart that reuses the dev files only when --dev asks again:
		// stdout is often a container's log.
		if err := a.printSample(srv, f.audienceOrDefault(), base); err != nil {
			closeAll(ln, admin, probe)
			return err
		}
	}
	if a.ready != nil {
		a.ready(ln.Addr().String())
	}
	stop := a.reloadOnHangup(ctx, srv, f.configPath != "")
	defer stop()
	return srv.ServeListeners(ctx, server.Listeners{Traffic: ln, Admin: admin, Probe: probe})
}

// closeAll closes the listeners that are not nil.
func closeAll(lns ...net.Listener) {
	for _, l := range lns {
		if l != nil {
			l.Close()
		}
	}
}

// gatewayConfig assembles the configuration: the file if given, else the
// quick-start flags, then the flags that override either.
func (f *serveFlags) gatewayConfig(env []string) (*config.Config, error) {
	var cfg *config.Config
	var err error
	switch {
	case f.configPath != "" && f.jwksURL != "":
		return nil, usageErrorf("keygate serve", "--config and --jwks-url cannot be combined: put the issuer in the file")
	case f.configPath != "":
		if cfg, err = config.Load(f.configPath, env); err != nil {
			return nil, err
		}
	default:
		if cfg, err = f.quickStart(); err != nil {
			return nil, err
		}
		if err := cfg.ApplyEnv(env); err != nil {
			return nil, err
		}
	}
	f.overrides().Apply(cfg)
	cfg.SetDefaults()
	if f.dataDir != "" {
		cfg.DataDir = f.dataDir
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	return cfg, nil
}

// fromFile takes the token service's settings from the configuration file
// (and KEYGATE_DATABASE_URL / KEYGATE_REDIS_URL) where no flag was given.
func (f *serveFlags) fromFile(ts *config.TokenService, fs *flagSet) {
	pick(!fs.isSet("audience"), &f.audience, ts.Audience)
	// A URL or its file given as a flag wins over both from the file.
	byFlag := func(a, b string) bool { return fs.isSet(a) || fs.isSet(b) }
	pick(!byFlag("database-url", "database-url-file"), &f.databaseURL, ts.DatabaseURL)
	pick(!byFlag("database-url", "database-url-file"), &f.databaseURLFile, ts.DatabaseURLFile)
	pick(!byFlag("redis-url", "redis-url-file"), &f.redisURL, ts.RedisURL)
	pick(!byFlag("redis-url", "redis-url-file"), &f.redisURLFile, ts.RedisURLFile)
	pick(!fs.isSet("root-key-file"), &f.rootKeyFile, ts.RootKeyFile)
	pick(!fs.isSet("keyring-file"), &f.keyringFile, ts.KeyringFile)
	pick(!fs.isSet("admin-token-file"), &f.adminTokenFile, ts.AdminTokenFile)
	pick(!fs.isSet("signing-alg"), &f.signingAlg, ts.SigningAlg)
	pick(!fs.isSet("key-prepublish"), &f.keyPrePublish, ts.KeyPrePublish)
	pick(!fs.isSet("access-token-ttl"), &f.accessTTL, ts.AccessTokenTTL)
	pick(!fs.isSet("revocation-max-staleness"), &f.maxStaleness, ts.RevocationMaxStaleness)
	pick(!fs.isSet("store-timeout"), &f.storeTimeout, ts.StoreTimeout)
	pick(!fs.isSet("login-ipv6-prefix"), &f.ipv6Prefix, ts.IPv6Prefix)
	if !fs.isSet("trusted-proxy") && len(ts.TrustedProxies) > 0 {
		f.trustedProxies = slices.Clone(ts.TrustedProxies)
	}
	if !fs.isSet("token-rate-limit") && ts.TokenRateLimit != nil {
		f.tokenRate = *ts.TokenRateLimit
	}
	if !fs.isSet("key-rotation") && ts.KeyRotation != nil {
		f.keyRotation = *ts.KeyRotation
	}
}

// readURLFiles reads --database-url-file and --redis-url-file (or their
// token_service fields) into the URLs.
func (f *serveFlags) readURLFiles() error {
	for _, u := range []struct {
		name       string
		file       string
		url        *string
		prefixes   []string
		prefixText string
	}{
		{"database-url", f.databaseURLFile, &f.databaseURL, []string{"postgres://", "postgresql://"}, "a postgres:// URL"},
		{"redis-url", f.redisURLFile, &f.redisURL, []string{"redis://", "rediss://"}, "a redis:// or rediss:// URL"},
	} {
		if u.file == "" {
			continue
		}
		if *u.url != "" {
			return usageErrorf("keygate serve", "--%s and --%s-file cannot both be given", u.name, u.name)
		}
		b, err := os.ReadFile(u.file)
		if err != nil {
			return fmt.Errorf("--%s-file: %w", u.name, err)
		}
		v := strings.TrimSpace(string(b))
		ok := false
		for _, p := range u.prefixes {
			ok = ok || strings.HasPrefix(v, p)
		}
		if !ok { // the content is a secret: the error names the file only
			return fmt.Errorf("--%s-file %s: does not hold %s", u.name, u.file, u.prefixText)
		}
		*u.url = v
	}
	return nil
}

// urlHasPassword reports whether a URL carries a password in its user
// information.
func urlHasPassword(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return strings.Contains(raw, "@") // unparsable: assume the worst
	}
	_, set := u.User.Password()
	return set || strings.Contains(u.RawQuery, "password=")
}

// pick sets *dst to v when use is set and v is not the zero value.
func pick[T comparable](use bool, dst *T, v T) {
	var zero T
	if use && v != zero {
		*dst = v
	}
}

// checkKeyPolicy validates the signing-key, token-lifetime and proxy flags,
// keeping the parsed algorithm and proxy prefixes.
func (f *serveFlags) checkKeyPolicy() error {
	alg, err := jose.ParseAlg(f.signingAlg)
	if err != nil || !slices.Contains(server.SigningAlgs, alg) {
		return usageErrorf("keygate serve", "--signing-alg %q: want one of ES256, ES384, ES512, RS256, PS256, EdDSA", f.signingAlg)
	}
	f.alg = alg
	if f.trusted, err = config.ParsePrefixes(f.trustedProxies); err != nil {
		return usageErrorf("keygate serve", "--trusted-proxy: %v", err)
	}
	switch {
	case f.keyRotation < 0:
		return usageErrorf("keygate serve", "--key-rotation must not be negative")
	case f.keyPrePublish <= 0:
		return usageErrorf("keygate serve", "--key-prepublish must be positive")
	case f.accessTTL <= 0:
		return usageErrorf("keygate serve", "--access-token-ttl must be positive")
	case f.storeTimeout <= 0:
		return usageErrorf("keygate serve", "--store-timeout must be positive")
	case f.tokenRate < 0:
		return usageErrorf("keygate serve", "--token-rate-limit must not be negative (0: no limit)")
	case f.tokenRate > 0 && f.tokenLimit().Validate() != nil:
		return usageErrorf("keygate serve", "--token-rate-limit: %v", f.tokenLimit().Validate())
	case f.keyRotation > 0 && f.keyRotation <= f.keyPrePublish:
		return usageErrorf("keygate serve", "--key-rotation must be longer than --key-prepublish")
	case f.ipv6Prefix < 32 || f.ipv6Prefix > 128:
		return usageErrorf("keygate serve", "--login-ipv6-prefix must be between 32 and 128")
	}
	return nil
}

// tokenLimit maps --token-rate-limit to a limit with a burst of twice the
// rate; 0 is no limit.
func (f *serveFlags) tokenLimit() ratelimit.Limit {
	if f.tokenRate <= 0 {
		return ratelimit.Limit{}
	}
	return ratelimit.Limit{Rate: f.tokenRate, Burst: max(1, int(2*f.tokenRate))}
}

// rotation maps --key-rotation to server.Config.KeyRotation (0: manual).
func (f *serveFlags) rotation() time.Duration {
	if f.keyRotation == 0 {
		return -1
	}
	return f.keyRotation
}

func (f *serveFlags) overrides() server.Overrides {
	o := server.Overrides{Listen: f.listen, AdminListen: f.adminListen, ProbeListen: f.probeListen, Proxy: f.proxy,
		Pprof: f.pprof, MetricsTokenFile: f.metricsTokenFile, AdminHosts: f.adminHosts}
	o.TLS, o.AdminTLS = f.tls.overrides()
	return o
}

// quickStartAlgs are the algorithms the quick start (--jwks-url) allows
// without --alg: every asymmetric one. Each key of the JWKS is bound to one
// of them only, its "alg" or the one its type and curve imply (see
// jose.ParsePublicKeySet); HMAC never comes from a remote JWKS.
var quickStartAlgs = []jose.Alg{jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA}

// quickStart turns --jwks-url, --issuer, --audience, --alg and --upstream
// into a one-issuer configuration.
func (f *serveFlags) quickStart() (*config.Config, error) {
	cfg := &config.Config{}
	if f.jwksURL == "" {
		if f.upstream != "" || len(f.algs) > 0 {
			return nil, usageErrorf("keygate serve", "--upstream and --alg need --jwks-url (or a --config file)")
		}
		return cfg, nil
	}
	if f.issuer == "" {
		return nil, usageErrorf("keygate serve", "--jwks-url needs --issuer: the exact \"iss\" to trust")
	}
	algs := []string(f.algs)
	for _, a := range algs {
		if alg, err := jose.ParseAlg(a); err == nil && !slices.Contains(quickStartAlgs, alg) {
			return nil, usageErrorf("keygate serve", "--alg %s: a JWKS URL publishes public keys only; a shared secret goes in key_files of a --config file", a)
		}
	}
	if len(algs) == 0 {
		for _, a := range quickStartAlgs {
			algs = append(algs, a.String())
		}
	}
	is := config.Issuer{Issuer: f.issuer, JWKSURL: f.jwksURL, Algorithms: algs}
	if f.audience != "" {
		is.Audiences = []string{f.audience}
	}
	cfg.Issuers = []config.Issuer{is}
	if f.upstream != "" {
		cfg.Routes = []config.Route{{PathPrefix: "/", Upstream: f.upstream}}
	}
	return cfg, nil
}

func (f *serveFlags) audienceOrDefault() string {
	if f.audience == "" || f.jwksURL != "" {
		return "keygate-demo"
	}
	return f.audience
}

func (a *app) newServer(ctx context.Context, f serveFlags, cfg *config.Config, addr string, log *slog.Logger) (*server.Server, error) {
	issuer := f.issuer
	if len(cfg.Issuers) > 0 {
		issuer = "" // --issuer named the trusted issuer, or the file configures them
	}
	if issuer == "" {
		issuer = cfg.TokenService.Issuer
	}
	if issuer == "" {
		issuer = "http://" + addr
		if cfg.TLS.Enabled() {
			issuer = "https://" + addr
		}
	}
	return server.New(ctx, server.Config{
		GatewayOnly: f.gatewayOnly(cfg, a.lookupEnv),
		DataDir:     cfg.DataDir,
		Issuer:      issuer,
		Audience:    f.audienceOrDefault(),
		Logger:      log,
		Now:         a.now,
		Rand:        a.random,
		Gateway:     cfg,
		ConfigPath:  f.configPath,
		Env:         a.env,
		Overrides:   f.overrides(),
		Metrics:     telemetry.New(),

		Dev:            f.dev,
		DatabaseURL:    f.databaseURL,
		StoreTimeout:   f.storeTimeout,
		TokenLimit:     f.tokenLimit(),
		TrustedProxies: f.trusted,
		IPv6Prefix:     f.ipv6Prefix,
		PasswordHashes: cfg.TokenService.PasswordHashes,
		RootKeyFile:    f.rootKeyFile,
		RootKeyEnv:     "KEYGATE_ROOT_KEY",
		KeyringFile:    f.keyringFile,
		AdminTokenFile: f.adminTokenFile,
		AdminToken:     a.lookupEnv("KEYGATE_ADMIN_TOKEN"),
		MetricsToken:   a.lookupEnv("KEYGATE_METRICS_TOKEN"),
		LookupEnv: func(name string) (string, bool) {
			v := a.lookupEnv(name)
			return v, v != ""
		},

		RedisURL:               f.redisURL,
		RedisPrefix:            cfg.TokenService.RedisPrefix,
		RedisCAFile:            f.tls.redisCAFile,
		RedisCertFile:          f.tls.redisCertFile,
		RedisKeyFile:           f.tls.redisKeyFile,
		RevocationMaxStaleness: f.maxStaleness,

		SigningAlg:     f.alg,
		KeyRotation:    f.rotation(),
		KeyPrePublish:  f.keyPrePublish,
		AccessTokenTTL: f.accessTTL,
	})
}

// gatewayOnly reports whether serve runs the gateway alone: issuers are
// configured and nothing asks for a token service (--dev, a store, a root
// key or keyring, Redis, or any token_service setting but the admin token
// file).
// Such a node creates no files and no credentials.
func (f *serveFlags) gatewayOnly(cfg *config.Config, env func(string) string) bool {
	ts := cfg.TokenService
	ts.AdminTokenFile = ""
	if len(cfg.Issuers) == 0 || f.dev || !reflect.ValueOf(ts).IsZero() {
		return false
	}
	// An admin token alone does not: it also guards a gateway's pprof.
	for _, v := range []string{f.databaseURL, f.rootKeyFile, f.keyringFile, f.redisURL,
		f.tls.redisCAFile, f.tls.redisCertFile, env("KEYGATE_ROOT_KEY")} {
		if v != "" {
			return false
		}
	}
	// A keyring set up in the data directory asks for a sealed token service.
	_, err := os.Stat(filepath.Join(cfg.DataDir, server.KeyringFile))
	return err != nil
}

// reloadOnHangup reloads the configuration on SIGHUP until ctx is done or
// the returned stop is called.
func (a *app) reloadOnHangup(ctx context.Context, srv *server.Server, enabled bool) (stop func()) {
	if !enabled {
		return func() {}
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				rctx, rcancel := context.WithTimeout(ctx, time.Minute)
				srv.Reload(rctx) //nolint:errcheck // logged and counted by Reload
				rcancel()
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		cancel()
		<-done
	}
}

// lookupEnv returns the value of name in the app's environment.
func (a *app) lookupEnv(name string) string {
	for _, kv := range a.env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}

// printBootstrap prints, once, the secrets dev mode created on this start;
// base is the traffic listener's URL.
func (a *app) printBootstrap(b server.Bootstrap, base string) {
	if b.AdminToken != "" {
		fmt.Fprintf(a.stdout, "Admin token (saved in %s, shown once; the admin API is under /v1/admin/ on the admin listener):\n%s\n\n", b.AdminTokenPath, b.AdminToken)
	}
	if b.DemoClientID != "" {
		fmt.Fprintf(a.stdout, "Demo client (scope \"demo\", shown once):\nclient_id=%s\nclient_secret=%s\n\n", b.DemoClientID, b.DemoClientSecret)
		fmt.Fprintf(a.stdout, "Get a token:\ncurl -s -u '%s:%s' -d grant_type=client_credentials %s/oauth2/token\n\n", b.DemoClientID, b.DemoClientSecret, base)
	}
}

// printSample prints a demo token and a curl command that presents it.
func (a *app) printSample(srv *server.Server, audience, base string) error {
	token, err := srv.Mint(mint.Claims{Subject: "demo", Audience: []string{audience}, Scope: "demo", TTL: time.Hour})
	if err != nil {
		return fmt.Errorf("sample token: %w", err)
	}
	fmt.Fprintf(a.stdout, "Sample token (sub \"demo\", scope \"demo\", aud %q, expires in 1h):\n%s\n\n", audience, token)
	fmt.Fprintf(a.stdout, "Try it:\ncurl -i -H 'Authorization: Bearer %s' %s/auth\n", token, base)
	return nil
}

// baseURL is where a local client reaches addr over scheme ("http" or
// "https"); see localHostPort.
func baseURL(scheme string, addr net.Addr) string {
	return scheme + "://" + localHostPort(addr.String())
}

// localHostPort is hostport as a client on this host reaches it: an
// unspecified host (0.0.0.0, ::, none) becomes loopback, ::1 for ::.
func localHostPort(hostport string) string {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return hostport
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	return net.JoinHostPort(host, port)
}
