package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/mint"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/server"
	"github.com/keygate/keygate/internal/telemetry"
	"github.com/keygate/keygate/jose"
)

// serveFlags are the flags of serve. Those that set a field of the
// configuration (where it listens and keeps its data, how it logs, the
// proxy in front) are declared on the field (config.Flag) and held in
// settings; the others are the file's name, dev mode, the admin-exposure
// override and the quick start. Every other setting is the configuration
// file's or the environment's.
type serveFlags struct {
	settings               *config.CommandLine
	issuer, audience       string // the quick start's issuer's, else the token service's
	issuerOwn, audienceOwn bool   // --issuer, --audience are the token service's (writeTokenService)
	configPath, jwksURL    string
	upstream               string
	dev, insecureAdmin     bool
	algs                   stringList
}

func (f *serveFlags) register(fs *flagSet) {
	fs.StringVar(&f.configPath, "config", "", "YAML configuration `file` (reloaded on SIGHUP and when it changes)")
	f.settings = config.DefineFlags(fs.FlagSet)
	fs.BoolVar(&f.dev, "dev", false, "dev mode: generate the root key, admin token and a demo client in the data directory if missing\n(the default without a root key, a keyring or a database: token_service.root_key_file, KEYGATE_ROOT_KEY, ...)")
	fs.BoolVar(&f.insecureAdmin, "insecure-admin", false, "allow the admin listener on an address other than loopback without TLS (it carries unseal\npassphrases, root keys and the admin token)")
	fs.StringVar(&f.issuer, "issuer", "", "issuer `URL`: with --jwks-url the one trusted issuer; otherwise the issuer of the dev key's tokens (default \"http://\" + the listen address)")
	fs.StringVar(&f.audience, "audience", "", "`audience` tokens must carry (default keygate-demo in dev mode)")
	fs.StringVar(&f.jwksURL, "jwks-url", "", "quick start: trust tokens from --issuer verified with the keys at this JWKS `URL`")
	fs.Var(&f.algs, "alg", "quick start: allowed `algorithm` (repeatable; default every asymmetric one: RS256/384/512,\nPS256/384/512, ES256/384/512, EdDSA, each key bound to its own alg or the one its type implies)")
	fs.StringVar(&f.upstream, "upstream", "", "quick start: reverse-proxy every request to this `URL` after checking its token")
}

func (a *app) serve(ctx context.Context, args []string) error {
	fs := a.flags("keygate serve", "[flags]",
		"Runs keygate: the token service and the gateway. With no configuration it needs nothing\n"+
			"else installed (dev mode): it creates a root key, an admin token and a SQLite store in the\n"+
			"data directory, a demo client, and trusts the tokens its own signing keys sign, printing\n"+
			"the demo client and a sample token. With --config (or the quick-start flags) it verifies\n"+
			"tokens of the configured issuers. Traffic endpoints:\n"+
			"  /auth                        forward-auth for nginx auth_request, Traefik, Caddy\n"+
			"  (--envoy-grpc-listen)        Envoy's ext_authz over gRPC, the same decision as /auth\n"+
			"  POST /oauth2/token, /oauth2/revoke, /oauth2/introspect, /v1/login   the token service\n"+
			"  /v1/transit/...              Vault's transit API (encryption as a service; see the README)\n"+
			"  GET /.well-known/jwks.json   the public signing keys\n"+
			"  GET /.well-known/openid-configuration, /.well-known/oauth-authorization-server\n"+
			"  GET /healthz                 liveness\n"+
			"  everything else              the reverse proxy, when routes are configured\n"+
			"Every request to the token service and the admin API is recorded in the audit log (the\n"+
			"audit section; by default files in the data directory's audit/) before it is answered,\n"+
			"and answered 503 when no audit sink takes the record.\n"+
			"It stops gracefully on SIGINT or SIGTERM and reloads its configuration on SIGHUP.\n"+
			"A flag that names a field of the configuration wins over the file and the variable; every\n"+
			"other setting is the file's or its KEYGATE_ variable's (docs/configuration.md lists them all,\n"+
			"keygate config check prints what is in effect).")
	var f serveFlags
	f.register(fs)
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	if fs.isSet("config") && f.configPath == "" {
		// Left out, it would start a node without its file, and so
		// without every protection the file sets.
		return usageErrorf("keygate serve", "--config is empty: name the configuration file, or leave the flag out")
	}
	f.audienceOwn = f.audience != "" && f.jwksURL == ""
	if err := f.settings.Check(); err != nil {
		return usageErrorf("keygate serve", "%v", err)
	}
	if !fs.isSet("config") {
		f.configPath = a.lookupEnv("KEYGATE_CONFIG")
		if strings.TrimSpace(f.configPath) == "" && a.envSet("KEYGATE_CONFIG") {
			// As with --config=: unset, it would start a dev node in
			// place of the one the file describes.
			return usageErrorf("keygate serve", "KEYGATE_CONFIG is empty: name the configuration file, or unset the variable")
		}
	}
	cfg, err := f.gatewayConfig(a.env)
	if err != nil {
		return err
	}
	f.issuerOwn = f.issuer != "" && len(cfg.Issuers) == 0
	file := cfg.TokenService
	f.writeTokenService(&cfg.TokenService)
	gatewayOnly := f.gatewayOnly(cfg, file, a.lookupEnv)
	if err := checkTokenService(cfg.TokenService); err != nil {
		return err
	}
	log, err := newLogger(cfg, a.stderr)
	if err != nil {
		return err
	}
	logSources(log, a.env, !fs.isSet("config"), fs.givenEmpty())
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
		if err := checkAdminListener(log, admin, cfg, f.insecureAdmin); err != nil {
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
	var envoy net.Listener
	if cfg.EnvoyGRPCListen != "" {
		if envoy, err = new(net.ListenConfig).Listen(ctx, "tcp", cfg.EnvoyGRPCListen); err != nil {
			closeAll(ln, admin, probe)
			return fmt.Errorf("envoy gRPC listen: %w", err)
		}
	}
	srv, err := a.newServer(ctx, &f, cfg, gatewayOnly, ln.Addr().String(), log)
	if err != nil {
		closeAll(ln, admin, probe, envoy)
		return err
	}
	defer srv.Close()
	n := srv.Node()
	if n != nil && n.Sealed() && admin == nil {
		closeAll(ln, probe, envoy)
		return errors.New("the node has no root key and would start sealed, but with --admin-listen off it could never be unsealed: give token_service.root_key_file or KEYGATE_ROOT_KEY, or keep the admin listener")
	}
	scheme := "http"
	if cfg.TLS.Enabled() {
		scheme = "https"
	}
	base := baseURL(scheme, ln.Addr())
	if n != nil {
		b := n.Bootstrap()
		a.printBootstrap(b, base)
		switch {
		case n.Sealed():
			fmt.Fprintf(a.stdout, "keygate is sealed: it verifies tokens but issues none until unsealed:\n  keygate unseal [--admin URL of the admin listener]\n")
		case len(cfg.Issuers) == 0 && b.Dev && (b.RootKeyCreated || f.dev):
			// A working token goes to the terminal only in dev mode, and on
			// a restart that reuses the dev files only when --dev asks
			// again: stdout is often a container's log.
			if err := a.printSample(n, base); err != nil {
				closeAll(ln, admin, probe, envoy)
				return err
			}
		}
	}
	if a.ready != nil {
		a.ready(ln.Addr().String())
	}
	stop := a.reloadOnHangup(ctx, srv, f.configPath != "")
	defer stop()
	return srv.ServeListeners(ctx, server.Listeners{Traffic: ln, Admin: admin, Probe: probe, EnvoyGRPC: envoy})
}

// newLogger is the node's logger, at the configuration's log_level and in
// its log_format (from the file, the environment or the flags), which
// Validate has checked.
func newLogger(cfg *config.Config, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		return nil, fmt.Errorf("configuration: log_level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}

// serveEnv are the variables serve reads besides the fields'
// (config.EnvVars): secrets, which have no field.
var serveEnv = []string{node.RootKeyEnv, "KEYGATE_ADMIN_TOKEN", "KEYGATE_METRICS_TOKEN"}

// logSources logs, by name only (a value may be a secret), the KEYGATE_
// variables that configure the node, those ignored for being empty, and
// the flags ignored for being empty: the operator sees what the
// environment changed, and that an empty variable cleared nothing.
// withConfig adds KEYGATE_CONFIG, which --config overrides.
func logSources(log *slog.Logger, env []string, withConfig bool, emptyFlags []string) {
	r := config.ReadEnvReport(env)
	names := serveEnv
	if withConfig {
		names = append(slices.Clip(names), "KEYGATE_CONFIG")
	}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case !slices.Contains(names, k):
		case v == "": // as their readers take it (a blank one is refused)
			r.Ignored = append(r.Ignored, k)
		default:
			r.Set = append(r.Set, k)
		}
	}
	slices.Sort(r.Set)
	slices.Sort(r.Ignored)
	if len(r.Set) > 0 {
		log.Info("configuration from the environment", "variables", strings.Join(slices.Compact(r.Set), ","))
	}
	if len(r.Ignored) > 0 {
		log.Warn("empty environment variables ignored: the file's values and the defaults stay in force", "variables", strings.Join(slices.Compact(r.Ignored), ","))
	}
	if len(emptyFlags) > 0 {
		log.Warn("flags given an empty value ignored: the file's values and the defaults stay in force", "flags", "--"+strings.Join(emptyFlags, ",--"))
	}
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
// quick-start flags, then the environment and the flags that override
// either, validated. The token service's --issuer and --audience are
// written in after that (writeTokenService), as they are on a reload.
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
	f.settings.Apply(cfg)
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	return cfg, nil
}

// writeTokenService writes the token_service settings of the command line
// into ts: --issuer as the token service's issuer when it does not name a
// trusted issuer (no --jwks-url, no issuers in the file), and --audience
// as its audience except in a quick start, where it is the trusted
// issuer's.
func (f *serveFlags) writeTokenService(ts *config.TokenService) {
	if f.issuerOwn {
		ts.Issuer = f.issuer
	}
	if f.audienceOwn {
		ts.Audience = f.audience
	}
}

// overrides writes the command line's settings over a configuration the
// file and the environment gave, on every reload as at the start.
func (f *serveFlags) overrides(c *config.Config) {
	f.settings.Apply(c)
	f.writeTokenService(&c.TokenService)
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

// newServer opens the server and, unless gatewayOnly, the node on the
// token_service settings in cfg. addr is the traffic listener's address,
// the token service's issuer unless one is configured.
func (a *app) newServer(ctx context.Context, f *serveFlags, cfg *config.Config, gatewayOnly bool, addr string, log *slog.Logger) (*server.Server, error) {
	scfg := server.Config{
		Logger:       log,
		Now:          a.now,
		Metrics:      telemetry.New(),
		Gateway:      cfg,
		ConfigPath:   f.configPath,
		Env:          a.env,
		Overrides:    f.overrides,
		AdminToken:   a.lookupEnv("KEYGATE_ADMIN_TOKEN"),
		MetricsToken: a.lookupEnv("KEYGATE_METRICS_TOKEN"),
	}
	if gatewayOnly {
		return server.New(ctx, scfg)
	}
	issuer, audience := cfg.TokenService.Issuer, cfg.TokenService.Audience
	if issuer == "" {
		issuer = "http://" + addr
		if cfg.TLS.Enabled() {
			issuer = "https://" + addr
		}
	}
	if audience == "" {
		audience = "keygate-demo"
	}
	scfg.Node = &node.Config{
		TokenService: cfg.TokenService,
		Audit:        cfg.Audit,
		DataDir:      cfg.DataDir,
		Issuer:       issuer,
		Audience:     audience,
		Dev:          f.dev,
		Rand:         a.random,
		LookupEnv: func(name string) (string, bool) {
			v := a.lookupEnv(name)
			return v, v != ""
		},
	}
	return server.New(ctx, scfg)
}

// gatewayOnly reports whether serve runs the gateway alone: issuers are
// configured and nothing asks for a token service (--dev, a root key in
// the environment, a keyring in the data directory, or any token_service
// setting of the file or the environment but the admin token file). Such
// a node creates no files and no credentials. file is the section before
// the command line's --issuer and --audience were written in: they alone
// ask for nothing.
func (f *serveFlags) gatewayOnly(cfg *config.Config, file config.TokenService, env func(string) string) bool {
	// An admin token does not ask for a token service: it also guards a
	// gateway's pprof.
	file.AdminTokenFile = ""
	if len(cfg.Issuers) == 0 || f.dev || !reflect.ValueOf(file).IsZero() || env(node.RootKeyEnv) != "" {
		return false
	}
	// A keyring set up in the data directory asks for a sealed token service.
	_, err := os.Stat(filepath.Join(cfg.DataDir, node.KeyringFile))
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

// envSet reports whether the environment gives name, even empty.
func (a *app) envSet(name string) bool {
	return slices.ContainsFunc(a.env, func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
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
func (a *app) printBootstrap(b node.Bootstrap, base string) {
	if b.AdminToken != "" {
		fmt.Fprintf(a.stdout, "Admin token (saved in %s, shown once; the admin API is under /v1/admin/ on the admin listener):\n%s\n\n", b.AdminTokenPath, b.AdminToken)
	}
	if b.DemoClientID != "" {
		fmt.Fprintf(a.stdout, "Demo client (scope \"demo\", shown once):\nclient_id=%s\nclient_secret=%s\n\n", b.DemoClientID, b.DemoClientSecret)
		fmt.Fprintf(a.stdout, "Get a token:\ncurl -s -u '%s:%s' -d grant_type=client_credentials %s/oauth2/token\n\n", b.DemoClientID, b.DemoClientSecret, base)
	}
}

// printSample prints a demo token of the node and a curl command that
// presents it.
func (a *app) printSample(n *node.Node, base string) error {
	audience := n.Audience()
	token, err := n.Mint(mint.Claims{Subject: "demo", Audience: []string{audience}, Scope: "demo", TTL: time.Hour})
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
