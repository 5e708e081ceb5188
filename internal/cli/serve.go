package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/gateway"
	"github.com/keygate/keygate/internal/mint"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/operr"
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
			"  /v1/transit/...              Vault's transit API (encryption as a service; see docs/transit.md)\n"+
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
	ts := cfg.TokenService
	f.writeTokenService(&ts) // as server.Start will, through the overrides
	if err := checkTokenService(ts); err != nil {
		return err
	}
	log, err := newLogger(cfg, a.stderr)
	if err != nil {
		return err
	}
	logSources(log, a.env, !fs.isSet("config"), fs.givenEmpty())
	srv, err := server.Start(ctx, a.startOptions(&f, cfg, log))
	if err != nil {
		return err
	}
	if err := a.printStart(srv, cfg, f.dev); err != nil {
		srv.Close()
		return err
	}
	if a.ready != nil {
		a.ready(srv.Addr().String())
	}
	return srv.Serve(ctx)
}

// printStart prints what an operator needs from this start: the secrets
// dev mode created (once), that the node is sealed, or, in dev mode, a
// sample token.
func (a *app) printStart(srv *server.Started, cfg *config.Config, dev bool) error {
	n := srv.Node()
	if n == nil {
		return nil
	}
	scheme := "http"
	if cfg.TLS.Enabled() {
		scheme = "https"
	}
	base := baseURL(scheme, srv.Addr())
	b := n.Bootstrap()
	a.printBootstrap(b, base)
	switch {
	case n.Sealed():
		fmt.Fprintf(a.stdout, "keygate is sealed: it verifies tokens but issues none until unsealed:\n  keygate unseal [--admin URL of the admin listener]\n")
	case len(cfg.Issuers) == 0 && b.Dev && (b.RootKeyCreated || dev):
		// A working token goes to the terminal only in dev mode, and on a
		// restart that reuses the dev files only when --dev asks again:
		// stdout is often a container's log.
		return a.printSample(n, base, cfg.ForwardAuth.Forwarding())
	}
	return nil
}

// newLogger is the node's logger, at the configuration's log_level and in
// its log_format (from the file, the environment or the flags), which
// Validate has checked.
func newLogger(cfg *config.Config, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		return nil, operr.Errorf("configuration: log_level: %w", err)
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
		return nil, operr.Errorf("configuration: %w", err)
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

// startOptions are server.Start's options: the configuration, the command
// line's overrides, and the secrets the environment gives.
func (a *app) startOptions(f *serveFlags, cfg *config.Config, log *slog.Logger) server.Options {
	return server.Options{
		Config: server.Config{
			Logger:       log,
			Now:          a.now,
			Metrics:      telemetry.New(),
			Gateway:      cfg,
			ConfigPath:   f.configPath,
			Env:          a.env,
			Overrides:    f.overrides,
			AdminToken:   a.lookupEnv("KEYGATE_ADMIN_TOKEN"),
			MetricsToken: a.lookupEnv("KEYGATE_METRICS_TOKEN"),
			Version:      version(),
		},
		Dev:           f.dev,
		InsecureAdmin: f.insecureAdmin,
		Rand:          a.random,
		LookupEnv: func(name string) (string, bool) {
			v := a.lookupEnv(name)
			return v, v != ""
		},
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
// presents it to /auth as the proxy in front (fw) would: with the
// forwarding headers that proxy sets, which its preset requires.
func (a *app) printSample(n *node.Node, base string, fw gateway.Forwarding) error {
	audience := n.Audience()
	token, err := n.Mint(mint.Claims{Subject: "demo", Audience: []string{audience}, Scope: "demo", TTL: time.Hour})
	if err != nil {
		return fmt.Errorf("sample token: %w", err)
	}
	fmt.Fprintf(a.stdout, "Sample token (sub \"demo\", scope \"demo\", aud %q, expires in 1h):\n%s\n\n", audience, token)
	var forwarded strings.Builder
	if fw.Required {
		host := strings.TrimPrefix(strings.TrimPrefix(base, "https://"), "http://")
		for _, hv := range []struct {
			names []string
			value string
		}{{fw.Method, "GET"}, {fw.URI, "/"}, {fw.Host, host}} {
			for _, name := range hv.names {
				fmt.Fprintf(&forwarded, "-H '%s: %s' ", name, hv.value)
			}
		}
	}
	title := "Try it:"
	if forwarded.Len() > 0 {
		proxy := fw.Proxy
		if proxy == gateway.ProxyCustom {
			proxy = "forward_auth.trusted_headers"
		}
		title = "Try it (with the forwarding headers " + proxy + " sets, which /auth then requires):"
	}
	fmt.Fprintf(a.stdout, "%s\ncurl -i %s-H 'Authorization: Bearer %s' %s%s\n", title, forwarded.String(), token, base, gateway.AuthPath)
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
