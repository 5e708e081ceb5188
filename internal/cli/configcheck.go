package cli

import (
	"context"
	"fmt"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/keygate/keygate/internal/audit"
	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/gateway"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/secrets"
	"github.com/keygate/keygate/internal/transit"
	"github.com/keygate/keygate/internal/verify"
	"github.com/keygate/keygate/internal/verify/verifykeys"
)

// configCheck is keygate config check: the checks serve makes on a
// configuration before it connects to anything, and the configuration in
// effect (file, environment and defaults) printed back.
func (a *app) configCheck(_ context.Context, args []string) error {
	fs := a.flags("keygate config check", "[FILE]",
		"Validates a configuration file as keygate serve --config FILE would, with the KEYGATE_*\n"+
			"environment applied and the defaults filled in, without opening a listener or connecting to\n"+
			"anything, and prints the configuration in effect as YAML with the passwords of URLs\n"+
			"redacted, with the names of the KEYGATE_ variables that set a field and of those ignored\n"+
			"for being empty. FILE defaults to $KEYGATE_CONFIG. Files the configuration names (keys,\n"+
			"certificates, tokens) are read when serve starts, not here.")
	pos, err := fs.parse(args, 0, 1)
	if err != nil {
		return err
	}
	path := a.lookupEnv("KEYGATE_CONFIG")
	if len(pos) == 1 {
		path = pos[0]
	}
	if path == "" {
		return usageErrorf(fs.Name(), "give the configuration FILE (or KEYGATE_CONFIG)")
	}
	cfg, err := config.Load(path, a.env)
	if err != nil {
		return err
	}
	if err := checkTokenService(cfg.TokenService); err != nil {
		return err
	}
	eff := inEffect(*cfg)
	eff.TokenService.DatabaseURL = redactURL(eff.TokenService.DatabaseURL)
	eff.TokenService.RedisURL = redactURL(eff.TokenService.RedisURL)
	out, err := yaml.Marshal(eff)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "# %s: valid; in effect with the environment and defaults:\n", path)
	if r := config.ReadEnvReport(a.env); len(r.Set)+len(r.Ignored) > 0 {
		fmt.Fprintf(a.stdout, "# set by the environment: %s\n# empty in the environment, ignored: %s\n", namesOrNone(r.Set), namesOrNone(r.Ignored))
	}
	fmt.Fprintf(a.stdout, "%s", out)
	return nil
}

// inEffect returns c with the defaults serve applies to the fields left
// unset, so that config check prints the values a node runs with rather
// than the zeros that stand for them in the file (an issuer's jwks bounds
// only when it fetches keys). Fields whose default depends on the
// machine's disk (audit.file.min_free) stay as they are.
func inEffect(c config.Config) config.Config {
	c.TokenService = c.TokenService.WithDefaults()
	c.Audit = c.Audit.WithDefaults(c.DataDir)
	setDefault(&c.Audit.File.MaxSize, audit.DefaultMaxSize)
	setDefault(&c.Audit.File.SyncInterval, time.Second)
	setDefault(&c.Audit.CheckpointEvery, audit.DefaultCheckpointEvery)
	setDefault(&c.Audit.CheckpointInterval, audit.DefaultCheckpointInterval)
	if c.LogFormat == "" {
		c.LogFormat = "text"
	}
	setDefault(&c.Cache.MaxEntries, verify.DefaultCacheEntries)
	setDefault(&c.Cache.MaxBytes, verify.DefaultCacheBytes)
	setDefault(&c.Cache.MaxTTL, verify.DefaultCacheTTL)
	c.Issuers = slices.Clone(c.Issuers)
	for i := range c.Issuers {
		if is := &c.Issuers[i]; is.JWKSURL != "" || is.Discovery {
			j := &is.JWKS
			d := verifykeys.RemoteConfig{MinRefresh: j.MinRefresh, DefaultRefresh: j.DefaultRefresh, MaxRefresh: j.MaxRefresh,
				MaxStale: j.MaxStale, Timeout: j.Timeout, MaxBody: j.MaxBody, RefetchInterval: j.RefetchInterval}.WithDefaults()
			*j = config.JWKS{MinRefresh: d.MinRefresh, DefaultRefresh: d.DefaultRefresh, MaxRefresh: d.MaxRefresh,
				MaxStale: d.MaxStale, Timeout: d.Timeout, MaxBody: d.MaxBody, RefetchInterval: d.RefetchInterval}
		}
	}
	if c.ForwardAuth.Proxy == "" && c.ForwardAuth.TrustedHeaders == nil {
		c.ForwardAuth.Proxy = gateway.ProxyAuto
	}
	setDefault(&c.Transit.MaxBatchCost, transit.DefaultMaxBatchCost)
	setDefault(&c.Transit.PrivateKeyWorkers, max(1, runtime.GOMAXPROCS(0)-1))
	setDefault(&c.Transit.TenantQueue, transit.DefaultTenantQueue)
	setDefault(&c.Transit.CallerQueue, transit.DefaultCallerQueue)
	if c.Secrets.CacheBytes == 0 {
		// As serve opens the secret store: off on a shared store, where a
		// node would serve a path's old state until another node's change
		// notice arrived.
		c.Secrets.CacheBytes = secrets.DefaultCacheBytes
		if ts := c.TokenService; ts.DatabaseURL != "" || ts.DatabaseURLFile != "" {
			c.Secrets.CacheBytes = -1
		}
	}
	setDefault(&c.Secrets.CacheMaxAge, secrets.DefaultCacheMaxAge)
	return c
}

func setDefault[T int | int64 | time.Duration](v *T, def T) {
	if *v == 0 {
		*v = def
	}
}

func namesOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// redactURL replaces a URL's password, and a password query parameter,
// with "redacted"; a string that does not parse is redacted whole.
func redactURL(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "redacted"
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "redacted")
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "redacted")
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// checkTokenService validates what the file, the environment and the
// command line's --issuer give the token service together, with the
// defaults for what none sets, as usage errors naming the settings.
// Each field alone the configuration's validation has checked.
func checkTokenService(ts config.TokenService) error {
	ts = ts.WithDefaults()
	shared := ts.DatabaseURL != "" || ts.DatabaseURLFile != ""
	redis := ts.RedisURL != "" || ts.RedisURLFile != ""
	switch {
	case shared && ts.Issuer == "":
		// Each node would default to http://<its listen address>, and a
		// token of one would be wrong_issuer on every other.
		return usageErrorf("keygate serve", "a node on a shared database (token_service.database_url or KEYGATE_DATABASE_URL) "+
			"needs --issuer (token_service.issuer), the same URL on every node of the fleet")
	case ts.RevocationMaxStaleness > 0 && ts.RevocationMaxStaleness <= time.Second:
		// Redis publishes within milliseconds but resyncs every 30 s; a
		// bound this tight would fail the fleet closed on any hiccup.
		return usageErrorf("keygate serve", "token_service.revocation_max_staleness must be above 1s, not %v", ts.RevocationMaxStaleness)
	case ts.RevocationMaxStaleness > 0 && !redis:
		return usageErrorf("keygate serve", "token_service.revocation_max_staleness bounds how old the "+
			"revocation set shared through Redis may be: it needs a Redis URL (token_service.redis_url or KEYGATE_REDIS_URL)")
	}
	rotation, rate := *ts.KeyRotation, *ts.TokenRateLimit
	if lim := node.TokenLimit(rate); rate > 0 && lim.Validate() != nil {
		return usageErrorf("keygate serve", "token_service.token_rate_limit: %v", lim.Validate())
	}
	if rotation > 0 && rotation <= ts.KeyPrePublish {
		return usageErrorf("keygate serve", "token_service.key_rotation must be longer than token_service.key_prepublish")
	}
	return nil
}
