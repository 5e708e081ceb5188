// Package node owns the state a keygate node keeps for its token service,
// transit and tenants: the root key and the tenants' data keys under it
// (package tenantkey), the store, the signing keys, the revocation set,
// the rate limiters, the audit log and, in a fleet, the Redis connection
// that carries revocations and notices between nodes. [Open] opens all of
// it from the token_service and audit configuration, [Node.Run] runs its
// schedule and [Node.Close] releases it; package server serves it over
// HTTP, every request to its APIs recorded through [Node.Auditor]
// (package httpaudit).
//
// # Security
//
// Everything secret in the store is sealed under the keyring's root key,
// which never reaches a log, an error or the disk unless the operator put
// it there (a key file; dev mode writes one, 0600). A sealed node holds no
// root key and no private signing key: it publishes the stored public keys
// and verifies, and signs nothing until [Node.Unseal] has checked a
// candidate key completely (the keyring.json key-check value, and every
// stored signing key opening under it) before the keyring holds it, so no
// moment exists in which a wrong key could seal a new signing key.
// [Node.Seal] forgets both keys at once, and with them the audit log's
// checkpoint and HMAC keys, which are derived from the root key
// (keyring.DeriveKey) and never stored: a sealed node records every request
// all the same, unsigned and without hashed values, until it is unsealed
// (see audit.go). A revocation is applied to the
// node's memory as soon as the store holds it and shared through Redis;
// the memory answers every verification without I/O.
package node

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/keygate/keygate/internal/audit"
	"github.com/keygate/keygate/internal/audit/httpaudit"
	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/issuer"
	"github.com/keygate/keygate/internal/issuer/signingkeys"
	"github.com/keygate/keygate/internal/mint"
	"github.com/keygate/keygate/internal/ratelimit"
	"github.com/keygate/keygate/internal/revoke"
	"github.com/keygate/keygate/internal/rootkey"
	"github.com/keygate/keygate/internal/rootkey/tenantkey"
	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/telemetry"
	"github.com/keygate/keygate/jose"
)

// Files a node keeps in its data directory.
const (
	RootKeyFile    = "root.key"     // dev-mode root key (0600)
	KeyringFile    = "keyring.json" // passphrase unsealing's salt and parameters (no secret)
	AdminTokenFile = "admin.token"  // dev-mode admin token (0600)
	StoreFile      = "keygate.db"   // the SQLite store (0600)
	LockFile       = "keygate.lock" // serializes set-up by nodes starting at once
)

// RootKeyEnv is the environment variable that may hold the root key, in
// base64.
const RootKeyEnv = "KEYGATE_ROOT_KEY"

// Config configures a node: the token_service section of the
// configuration, with the command line's flags written in, and what the
// process supplies.
type Config struct {
	// TokenService holds the settings; unset fields take their defaults
	// (config.TokenService.WithDefaults).
	TokenService config.TokenService
	DataDir      string // holds the SQLite store and dev files; created (0700) if missing
	Issuer       string // the "iss" of the node's tokens
	Audience     string // the "aud" of the node's tokens
	// Dev generates what is missing in the data directory: a root key
	// (root.key), an admin token (admin.token) and a demo client. Without
	// a root key and a database URL, the node runs in dev mode anyway.
	Dev bool
	// AdminToken is the admin token the operator configured, which the
	// caller has read (a file or KEYGATE_ADMIN_TOKEN). Unset, a dev node
	// loads or creates admin.token in DataDir.
	AdminToken issuer.Bearer
	Logger     *slog.Logger       // nil discards logs
	Now        func() time.Time   // nil means time.Now
	Rand       io.Reader          // nil means crypto/rand
	Metrics    *telemetry.Metrics // nil: none
	// Traced gives store calls and Redis commands made under a recording
	// span child spans of their own (keygate.store.<method>,
	// keygate.redis.<command>); off, nothing is wrapped.
	Traced bool
	// LookupEnv reads RootKeyEnv; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// RedisStartWait bounds how long Open waits for the first revocation
	// sync from Redis (0: 5 s); past it the node starts anyway, and keeps
	// trying.
	RedisStartWait time.Duration
	// Audit configures the audit log: the audit section of the
	// configuration, with the command line's flags written in.
	Audit config.Audit
	// AuditStdout is where the audit stdout sink writes; nil: os.Stdout.
	AuditStdout io.Writer
	// AuditSinks are further audit sinks, beside the configured ones (an
	// embedding program's own; a test's failing one).
	AuditSinks []audit.Sink
	// AuditStatfs reads the free space of the audit file sink's
	// filesystem (audit.FileConfig.Statfs); nil: statfs(2). Tests give a
	// nearly full disk.
	AuditStatfs func(dir string) (free, total uint64, err error)
	// RefusalLimit replaces the default RefusalLimit when not zero, and
	// RefusalTotalLimit the default RefusalTotalLimit.
	RefusalLimit, RefusalTotalLimit ratelimit.Limit
}

// Validate reports a missing required field.
func (c *Config) Validate() error {
	switch {
	case c.DataDir == "":
		return errors.New("no data directory")
	case c.Issuer == "":
		return errors.New("no issuer")
	case c.Audience == "":
		return errors.New("no audience")
	}
	return nil
}

// Node is an opened node. Create it with Open, run its schedule with Run
// and release it with Close.
type Node struct {
	cfg      Config // defaults applied
	ts       config.TokenService
	log      *slog.Logger
	keyring  *rootkey.Keyring
	unsealMu sync.Mutex // one unseal or seal at a time
	store    store.Store
	keys     *signingkeys.Manager
	keySrc   *managedKeys
	revs     revocations
	fleet    *fleet // nil without Redis
	limits   limits
	admin    issuer.Bearer // the configured admin token, or the dev one
	boot     Bootstrap
	schedule schedule
	tenants  *tenantkey.Keys // the tenants' data keys, unsealed
	hooks    hooks
	audit    auditing
	rekey    rekeying
}

// auditing is the node's audit log and what serves it.
type auditing struct {
	log     *audit.Log // nil when the audit log is off
	auditor *httpaudit.Auditor
	files   *audit.FileSink // nil without the file sink
	node    string          // the chain's node id
}

// Bootstrap reports what Open created on this start; the secrets in it are
// set only when they were created now, so that they are shown once.
type Bootstrap struct {
	Dev              bool   // dev mode: generated root key, admin token and demo client
	RootKeyPath      string // where the root key came from when it is a file
	RootKeyCreated   bool
	AdminTokenPath   string // the dev admin token file
	AdminToken       string // set only when the admin token file was created now
	DemoClientID     string // set only when the demo client was created now
	DemoClientSecret string
}

// DemoClientID is the id of the client dev mode creates on first start.
const DemoClientID = "kgc_demo"

// Open opens the node cfg describes: the data directory (locked while it
// is set up), the keyring (a root key file or variable, a passphrase
// header, sealed, or in dev mode a generated key), the store (PostgreSQL
// with a database URL, else SQLite in the data directory), the signing
// keys, the revocations, and with a Redis URL the fleet. In dev mode it
// also creates what is missing (see Bootstrap). It does not run the
// schedule (Run). Close releases what it opened.
func Open(ctx context.Context, cfg Config) (_ *Node, err error) {
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
	if cfg.LookupEnv == nil {
		cfg.LookupEnv = os.LookupEnv
	}
	if cfg.RedisStartWait == 0 {
		cfg.RedisStartWait = 5 * time.Second
	}
	n := &Node{cfg: cfg, ts: cfg.TokenService.WithDefaults(), log: cfg.Logger, admin: cfg.AdminToken, rekey: newRekeying()}
	if !slices.Contains(config.SigningAlgs, n.ts.SigningAlg) {
		return nil, fmt.Errorf("signing algorithm %q: want one of %v", n.ts.SigningAlg, config.SigningAlgs)
	}
	defer func() {
		if err != nil {
			n.Close() // what was opened before the failure; Close skips the rest
		}
	}()
	if err := n.readURLFiles(); err != nil {
		return nil, err
	}
	if n.ts.DatabaseURL != "" {
		if w := databaseTLSWarning(n.ts.DatabaseURL); w != "" {
			n.log.Warn("database_url: " + w)
		}
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	unlock, err := lockDir(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("lock data directory: %w", err)
	}
	defer unlock()
	var auditNode string
	if !cfg.Audit.Disabled {
		if auditNode, err = n.nodeID(); err != nil {
			return nil, err
		}
	}
	dev, err := n.openKeyring()
	if err != nil {
		return nil, err
	}
	if n.store, err = openStore(ctx, n.ts, cfg.DataDir); err != nil {
		return nil, err
	}
	if cfg.Traced {
		n.store = tracedStore{n.store}
	}
	n.tenants = tenantkey.New(tenantkey.Config{Store: n.store, Root: sealer{n}, Rand: cfg.Rand, Logger: n.log})
	if err := n.openRekey(ctx); err != nil {
		return nil, err
	}
	if err := n.loadSigningKeys(ctx); err != nil {
		return nil, err
	}
	nrevs, err := n.loadRevocations(ctx)
	if err != nil {
		return nil, err
	}
	if err := n.openFleet(ctx); err != nil {
		return nil, err
	}
	if err := n.openLimits(); err != nil {
		return nil, err
	}
	if !cfg.Audit.Disabled {
		if err := n.openAudit(ctx, auditNode); err != nil {
			return nil, err
		}
	} else {
		n.log.Warn("the audit log is off (audit.disabled): requests are not recorded")
	}
	if !n.admin.Set() && dev {
		if err := n.devAdminToken(); err != nil {
			return nil, err
		}
	}
	if !n.admin.Set() {
		n.log.Warn("no admin token configured: the admin API (/v1/admin/) is off")
	}
	if dev {
		if err := n.demoClient(ctx); err != nil {
			return nil, err
		}
	}
	if m := cfg.Metrics; m != nil {
		m.Sealed(n.keyring.Sealed)
		m.KeySchedule(func() (int, time.Time) {
			st := n.keys.Status()
			return st.Published, st.ActiveSince
		})
	}
	n.log.Info("token service ready", "store", storeKind(n.ts.DatabaseURL), "dev", dev, "sealed", n.keyring.Sealed(),
		"kid", n.Thumbprint(), "revocations", nrevs, "redis", n.fleet != nil)
	return n, nil
}

// Close stops the fleet's subscriptions and closes the Redis client and
// the store. Call it after Run has returned.
func (n *Node) Close() {
	n.closeAudit()
	n.closeFleet()
	if n.store != nil {
		if err := n.store.Close(); err != nil {
			n.log.Warn("closing the store", "err", err)
		}
		n.store = nil
	}
}

// SharedStore reports whether the node's store is shared with other
// nodes (PostgreSQL), rather than its own (SQLite in its data directory).
func (n *Node) SharedStore() bool { return n.ts.DatabaseURL != "" }

// Issuer is the "iss" of the node's tokens, and Audience their "aud".
func (n *Node) Issuer() string   { return n.cfg.Issuer }
func (n *Node) Audience() string { return n.cfg.Audience }

// Keyring returns the node's keyring.
func (n *Node) Keyring() *rootkey.Keyring { return n.keyring }

// Store returns the node's store.
func (n *Node) Store() store.Store { return n.store }

// Keys returns the signing-key manager.
func (n *Node) Keys() *signingkeys.Manager { return n.keys }

// Revocations is the node's revocation set, answering from memory: kept
// current through Redis in a fleet.
func (n *Node) Revocations() revoke.Checker { return n.revs.checker() }

// Publisher is what the token service tells of the revocations it stores
// and the rotations it makes: the node's memory and, with Redis, the fleet.
func (n *Node) Publisher() issuer.Publisher { return publisher{n} }

// AdminToken is the admin token: the configured one, or in dev mode the
// one in the data directory; unset when there is neither.
func (n *Node) AdminToken() issuer.Bearer { return n.admin }

// Bootstrap reports what Open created in dev mode, with the secrets to show
// once.
func (n *Node) Bootstrap() Bootstrap { return n.boot }

// Thumbprint returns the RFC 7638 thumbprint of the signing key in force,
// which is also its kid; "" while sealed.
func (n *Node) Thumbprint() string {
	if sg := n.keys.Signer(); sg != nil {
		return sg.Key().Thumbprint()
	}
	return ""
}

// Mint signs claims with the signing key in force; an empty Issuer becomes
// the node's own, and claims that name no tenant (issuer.TenantClaim) are
// the default tenant's, as every token the token service signs names its
// tenant. It fails with signingkeys.ErrSealed while sealed.
func (n *Node) Mint(c mint.Claims) (string, error) {
	if c.Issuer == "" {
		c.Issuer = n.cfg.Issuer
	}
	if _, ok := c.Extra[issuer.TenantClaim]; !ok {
		extra := maps.Clone(c.Extra) // the caller's map stays as it was
		if extra == nil {
			extra = make(map[string]json.RawMessage, 1)
		}
		extra[issuer.TenantClaim] = json.RawMessage(`"` + store.DefaultTenant + `"`)
		c.Extra = extra
	}
	sg := n.keys.Signer()
	if sg == nil {
		return "", signingkeys.ErrSealed
	}
	return mint.Sign(sg, c, n.cfg.Now(), n.cfg.Rand)
}

// Algorithms are the algorithms of the node's tokens: the configured
// signing algorithm and those of the keys already published.
func (n *Node) Algorithms() []jose.Alg {
	algs := []jose.Alg{n.keyPolicy().Alg}
	for _, k := range n.keys.KeySet().Keys() {
		if !slices.Contains(algs, k.Alg()) {
			algs = append(algs, k.Alg())
		}
	}
	return algs
}

// IssuerConfig is the token service's configuration from the node's
// settings and state; the caller adds what it alone knows (Trusts).
func (n *Node) IssuerConfig() issuer.Config {
	icfg := issuer.Config{
		Issuer:         n.cfg.Issuer,
		Audience:       []string{n.cfg.Audience},
		Store:          n.store,
		Keys:           n.keys,
		Publisher:      n.Publisher(),
		Checker:        n.Revocations(), // introspection answers from memory, like /auth
		Limiter:        n.limits.login,
		TokenLimiter:   n.limits.token,
		PreAuthLimiter: n.limits.preauth,
		Now:            n.cfg.Now,
		Rand:           n.cfg.Rand,
		Logger:         n.log,
		AccessTokenTTL: n.ts.AccessTokenTTL,
		IPv6Prefix:     n.ts.IPv6Prefix,
		PasswordHashes: n.ts.PasswordHashes,
	}
	icfg.TrustedProxies, _ = config.ParsePrefixes(n.ts.TrustedProxies) // validated by config and serve
	if m := n.cfg.Metrics; m != nil {
		icfg.Observe = m.TokenRequest
	}
	return icfg
}

// keyPolicy is the signing-key schedule the settings ask for.
func (n *Node) keyPolicy() signingkeys.Policy { return keyPolicy(n.ts) }

func keyPolicy(ts config.TokenService) signingkeys.Policy {
	alg, _ := jose.ParseAlg(ts.SigningAlg) // checked by config and serve; Open refuses another
	return signingkeys.Policy{Alg: alg, RotateEvery: *ts.KeyRotation, PrePublish: ts.KeyPrePublish,
		MaxTokenTTL: max(time.Hour, ts.AccessTokenTTL)}
}

// limits are the token service's rate limiters, and the audit log's.
type limits struct {
	login, token, preauth issuer.Limiter // token is nil without a limit
	refused               issuer.Limiter // refusals before authentication, per address (httpaudit.RefusalConfig)
	refusedTotal          issuer.Limiter // ... from every address together, on this node
}

// LoginLimit bounds /v1/login attempts per account and per address.
var LoginLimit = ratelimit.Limit{Rate: 10.0 / 60, Burst: 5}

// PreAuthLimit bounds, per client address, the store reads the token
// endpoints make for client_ids not read in the last 2 s: enough for a
// hundred clients behind one address, few enough that random client_ids
// cannot make the store the bottleneck.
var PreAuthLimit = ratelimit.Limit{Rate: 50, Burst: 200}

// RefusalLimit bounds, per client address, the refusals before
// authentication (a bad or missing admin token, transit token or client
// credential) recorded one by one in the audit log: past it they are
// answered 429 and recorded as one aggregate record per address each
// TickInterval. A client that keeps retrying with a bad credential gets
// its 401s or 403s for the burst and one a second after; an attacker's
// flood costs the disk that, not a record per request.
var RefusalLimit = ratelimit.Limit{Rate: 1, Burst: 30}

// RefusalTotalLimit bounds the refusals before authentication that a node
// records one by one from every address together, so that whoever holds
// many addresses (an IPv6 /48 holds 65,536 /64s, each with its own
// RefusalLimit) cannot write a record per request: past it they are
// answered 429 and counted in the aggregate records too. It is the node's
// own (its disk's), never shared through Redis.
var RefusalTotalLimit = ratelimit.Limit{Rate: 20, Burst: 600}

// TokenLimit is the per-client limit of a token rate (requests per second,
// burst twice that); 0 is no limit, the zero Limit.
func TokenLimit(perSecond float64) ratelimit.Limit {
	if perSecond <= 0 {
		return ratelimit.Limit{}
	}
	return ratelimit.Limit{Rate: perSecond, Burst: max(1, int(2*perSecond))}
}

func (n *Node) openLimits() (err error) {
	if n.limits.login, err = n.Limiter("login", LoginLimit); err != nil {
		return fmt.Errorf("login rate limit: %w", err)
	}
	if lim := TokenLimit(*n.ts.TokenRateLimit); lim != (ratelimit.Limit{}) {
		if n.limits.token, err = n.Limiter("token", lim); err != nil {
			return fmt.Errorf("token rate limit: %w", err)
		}
	}
	if n.limits.preauth, err = n.Limiter("preauth", PreAuthLimit); err != nil {
		return fmt.Errorf("pre-authentication rate limit: %w", err)
	}
	refusals := RefusalLimit
	if n.cfg.RefusalLimit != (ratelimit.Limit{}) {
		refusals = n.cfg.RefusalLimit
	}
	if n.limits.refused, err = n.Limiter("unauthenticated", refusals); err != nil {
		return fmt.Errorf("unauthenticated refusals' rate limit: %w", err)
	}
	total := RefusalTotalLimit
	if n.cfg.RefusalTotalLimit != (ratelimit.Limit{}) {
		total = n.cfg.RefusalTotalLimit
	}
	if n.limits.refusedTotal, err = ratelimit.NewLocal(ratelimit.LocalConfig{Limit: total, Now: n.cfg.Now}); err != nil {
		return fmt.Errorf("unauthenticated refusals' node-wide limit: %w", err)
	}
	return nil
}

func storeKind(url string) string {
	if url != "" {
		return "postgres"
	}
	return "sqlite"
}
