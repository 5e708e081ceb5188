package cli

import (
	"flag"
	"slices"
	"time"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/node"
)

// tokenFlags are serve's flags of the token_service section. Each one
// given on the command line writes its field of config.TokenService
// (write), so that it wins over the file, and the token service's settings
// travel one path from the file and the flags to the node. The defaults
// shown are the section's (config.TokenService.WithDefaults): a flag that
// is not given leaves the file's value, or the default, in force.
type tokenFlags struct {
	v           config.TokenService // the values given; unset flags hold their defaults
	keyRotation time.Duration       // --key-rotation: v.KeyRotation when given
	tokenRate   float64             // --token-rate-limit: v.TokenRateLimit when given
	trusted     stringList          // --trusted-proxy: v.TrustedProxies when given
	setters     map[string]func(*config.TokenService)
	given       []string // the names of the flags given, after parse
}

func (f *tokenFlags) register(fs *flagSet) {
	v := &f.v
	f.setters = map[string]func(*config.TokenService){}
	bind := func(name string, set func(ts *config.TokenService)) { f.setters[name] = set }

	fs.StringVar(&v.DatabaseURL, "database-url", "", "PostgreSQL `URL` (postgres://...) of the store; default SQLite in the data directory")
	bind("database-url", func(ts *config.TokenService) { ts.DatabaseURL, ts.DatabaseURLFile = v.DatabaseURL, "" })
	fs.StringVar(&v.DatabaseURLFile, "database-url-file", "", "`file` holding the PostgreSQL URL, so that its password is not on the command line (or KEYGATE_DATABASE_URL)")
	bind("database-url-file", func(ts *config.TokenService) { ts.DatabaseURL, ts.DatabaseURLFile = "", v.DatabaseURLFile })
	fs.StringVar(&v.RedisURLFile, "redis-url-file", "", "`file` holding the Redis URL, so that its password is not on the command line (or KEYGATE_REDIS_URL)")
	bind("redis-url-file", func(ts *config.TokenService) { ts.RedisURL, ts.RedisURLFile = "", v.RedisURLFile })
	fs.StringVar(&v.RedisURL, "redis-url", "", "Redis `URL` (redis://...) shared by a fleet: revocations, login rate limits, key-rotation notices (or KEYGATE_REDIS_URL)")
	bind("redis-url", func(ts *config.TokenService) { ts.RedisURL, ts.RedisURLFile = v.RedisURL, "" })
	fs.DurationVar(&v.RevocationMaxStaleness, "revocation-max-staleness", 0, "with --redis-url, refuse every token once the shared revocation set has not been current for this `duration`, above 1s (0: never fail closed)")
	bind("revocation-max-staleness", func(ts *config.TokenService) { ts.RevocationMaxStaleness = v.RevocationMaxStaleness })
	fs.Float64Var(&f.tokenRate, "token-rate-limit", config.DefaultTokenRateLimit, "token requests per second each client may make at /oauth2/token, burst twice that\n(shared through Redis in a fleet; 0: no limit)")
	bind("token-rate-limit", func(ts *config.TokenService) { r := f.tokenRate; ts.TokenRateLimit = &r })
	fs.Var(&f.trusted, "trusted-proxy", "reverse proxy `address or CIDR` whose X-Forwarded-For names the client for the per-address\nlogin limit (repeatable or comma-separated; default: none, the peer's address counts)")
	bind("trusted-proxy", func(ts *config.TokenService) { ts.TrustedProxies = slices.Clone(f.trusted) })
	fs.IntVar(&v.IPv6Prefix, "login-ipv6-prefix", config.DefaultIPv6Prefix, "prefix `length` (32-128) an IPv6 client is counted by in the per-address login and\npre-authentication limits (or token_service.ipv6_prefix)")
	bind("login-ipv6-prefix", func(ts *config.TokenService) { ts.IPv6Prefix = v.IPv6Prefix })
	fs.DurationVar(&v.StoreTimeout, "store-timeout", config.DefaultStoreTimeout, "with --database-url, fail a PostgreSQL operation (or a new connection) that has not answered in this `duration`")
	bind("store-timeout", func(ts *config.TokenService) { ts.StoreTimeout = v.StoreTimeout })
	fs.StringVar(&v.RootKeyFile, "root-key-file", "", "root key `file` sealing the signing keys (or KEYGATE_ROOT_KEY in base64)")
	bind("root-key-file", func(ts *config.TokenService) { ts.RootKeyFile = v.RootKeyFile })
	fs.StringVar(&v.KeyringFile, "keyring-file", "", "passphrase header `file` (default keyring.json in the data directory; see keygate keyring init):\nwithout a root key the node starts sealed and waits for keygate unseal")
	bind("keyring-file", func(ts *config.TokenService) { ts.KeyringFile = v.KeyringFile })
	fs.StringVar(&v.AdminTokenFile, "admin-token-file", "", "`file` holding the admin API token (or KEYGATE_ADMIN_TOKEN; at least 32 characters)")
	bind("admin-token-file", func(ts *config.TokenService) { ts.AdminTokenFile = v.AdminTokenFile })
	fs.StringVar(&v.SigningAlg, "signing-alg", config.DefaultSigningAlg, "`algorithm` of the signing keys the token service creates: ES256, ES384, ES512, RS256, PS256 or EdDSA")
	bind("signing-alg", func(ts *config.TokenService) { ts.SigningAlg = v.SigningAlg })
	fs.DurationVar(&f.keyRotation, "key-rotation", config.DefaultKeyRotation, "how long a signing key signs before its successor takes over (`duration`; 0: manual rotation only)")
	bind("key-rotation", func(ts *config.TokenService) { d := f.keyRotation; ts.KeyRotation = &d })
	fs.DurationVar(&v.KeyPrePublish, "key-prepublish", config.DefaultKeyPrePublish, "how long a new signing key is published before it signs (`duration`)")
	bind("key-prepublish", func(ts *config.TokenService) { ts.KeyPrePublish = v.KeyPrePublish })
	fs.DurationVar(&v.AccessTokenTTL, "access-token-ttl", config.DefaultAccessTokenTTL, "lifetime of the access tokens the token service issues (`duration`)")
	bind("access-token-ttl", func(ts *config.TokenService) { ts.AccessTokenTTL = v.AccessTokenTTL })
	fs.StringVar(&v.RedisCAFile, "redis-ca-file", "", "with a rediss:// URL, the CA certificates `file` Redis's certificate must chain to\n(default the system's; or token_service.redis_ca_file)")
	bind("redis-ca-file", func(ts *config.TokenService) { ts.RedisCAFile = v.RedisCAFile })
	fs.StringVar(&v.RedisCertFile, "redis-cert", "", "with a rediss:// URL, the client certificate `file` Redis asks for (or token_service.redis_cert_file)")
	bind("redis-cert", func(ts *config.TokenService) { ts.RedisCertFile = v.RedisCertFile })
	fs.StringVar(&v.RedisKeyFile, "redis-key", "", "private key `file` of --redis-cert (or token_service.redis_key_file)")
	bind("redis-key", func(ts *config.TokenService) { ts.RedisKeyFile = v.RedisKeyFile })
}

// parsed records which of the flags were given (with a value).
func (f *tokenFlags) parsed(fs *flagSet) {
	fs.visitGiven(func(fl *flag.Flag) {
		if _, ok := f.setters[fl.Name]; ok {
			f.given = append(f.given, fl.Name)
		}
	})
}

// write writes the flags given into ts.
func (f *tokenFlags) write(ts *config.TokenService) {
	for _, name := range f.given {
		f.setters[name](ts)
	}
}

// check validates the flags' own values (those not given hold their
// defaults, which pass), as usage errors naming the flags. What the file
// sets, the configuration's validation checks; what the two give together
// is checked by checkTokenService.
func (f *tokenFlags) check() error {
	v := &f.v
	if !slices.Contains(config.SigningAlgs, v.SigningAlg) {
		return usageErrorf("keygate serve", "--signing-alg %q: want one of ES256, ES384, ES512, RS256, PS256, EdDSA", v.SigningAlg)
	}
	if _, err := config.ParsePrefixes(f.trusted); err != nil {
		return usageErrorf("keygate serve", "--trusted-proxy: %v", err)
	}
	switch {
	case f.keyRotation < 0:
		return usageErrorf("keygate serve", "--key-rotation must not be negative")
	case v.KeyPrePublish <= 0:
		return usageErrorf("keygate serve", "--key-prepublish must be positive")
	case v.AccessTokenTTL <= 0:
		return usageErrorf("keygate serve", "--access-token-ttl must be positive")
	case v.StoreTimeout <= 0:
		return usageErrorf("keygate serve", "--store-timeout must be positive")
	case f.tokenRate < 0:
		return usageErrorf("keygate serve", "--token-rate-limit must not be negative (0: no limit)")
	case v.IPv6Prefix < 32 || v.IPv6Prefix > 128:
		return usageErrorf("keygate serve", "--login-ipv6-prefix must be between 32 and 128")
	case slices.Contains(f.given, "database-url") && slices.Contains(f.given, "database-url-file"):
		return usageErrorf("keygate serve", "--database-url and --database-url-file cannot both be given")
	case slices.Contains(f.given, "redis-url") && slices.Contains(f.given, "redis-url-file"):
		return usageErrorf("keygate serve", "--redis-url and --redis-url-file cannot both be given")
	}
	return nil
}

// checkTokenService validates what the file and the flags give together,
// with the defaults for what neither sets, as usage errors naming the
// flags.
func checkTokenService(ts config.TokenService) error {
	ts = ts.WithDefaults()
	shared := ts.DatabaseURL != "" || ts.DatabaseURLFile != ""
	redis := ts.RedisURL != "" || ts.RedisURLFile != ""
	switch {
	case shared && ts.Issuer == "":
		// Each node would default to http://<its listen address>, and a
		// token of one would be wrong_issuer on every other.
		return usageErrorf("keygate serve", "a node on a shared database (--database-url, KEYGATE_DATABASE_URL or token_service.database_url) "+
			"needs --issuer (token_service.issuer), the same URL on every node of the fleet")
	case ts.RevocationMaxStaleness > 0 && ts.RevocationMaxStaleness <= time.Second:
		// Redis publishes within milliseconds but resyncs every 30 s; a
		// bound this tight would fail the fleet closed on any hiccup.
		return usageErrorf("keygate serve", "--revocation-max-staleness must be above 1s, not %v", ts.RevocationMaxStaleness)
	case ts.RevocationMaxStaleness > 0 && !redis:
		return usageErrorf("keygate serve", "--revocation-max-staleness (token_service.revocation_max_staleness) bounds how old the "+
			"revocation set shared through Redis may be: it needs --redis-url (KEYGATE_REDIS_URL or token_service.redis_url)")
	}
	rotation, rate := *ts.KeyRotation, *ts.TokenRateLimit
	if lim := node.TokenLimit(rate); rate > 0 && lim.Validate() != nil {
		return usageErrorf("keygate serve", "--token-rate-limit: %v", lim.Validate())
	}
	if rotation > 0 && rotation <= ts.KeyPrePublish {
		return usageErrorf("keygate serve", "--key-rotation must be longer than --key-prepublish")
	}
	return nil
}
