// Package config reads keygate's configuration: a YAML file, then KEYGATE_*
// environment overrides, then the few command-line flags, validated as a
// whole with errors that name the offending field. Each setting is declared
// once, as a field of Config whose tags give its YAML key and, where it
// deserves one, its flag; its variable follows from its path (see Flag). A
// Config is a plain value; the server builds its runtime state from one and
// swaps it atomically on reload.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/keygate/keygate/internal/audit"
	"github.com/keygate/keygate/internal/gateway"
	"github.com/keygate/keygate/internal/operr"
	"github.com/keygate/keygate/internal/verify"
	"github.com/keygate/keygate/internal/verify/verifykeys"
	"github.com/keygate/keygate/jose"
)

// Default listen addresses. The admin listener (metrics, health, pprof) stays
// on loopback unless configured otherwise.
const (
	DefaultListen      = "127.0.0.1:8080"
	DefaultAdminListen = "127.0.0.1:9090"
)

// MaxTokenSize is the largest max_token_size: a token arrives in a header,
// and the server reads at most 64 KiB of them.
const MaxTokenSize = 60 << 10

// Config is keygate's whole configuration.
type Config struct {
	// Listen is the traffic listener's address: /auth, the token
	// endpoints, transit and the reverse proxy (default 127.0.0.1:8080).
	Listen string `yaml:"listen" flag:"listen" usage:"traffic {address} (default 127.0.0.1:8080; port 0 picks a free port)"`
	// AdminListen is the admin listener's address: /metrics, /healthz,
	// /readyz, the admin API, seal and unseal (default 127.0.0.1:9090;
	// "off" disables it). Off loopback it needs admin_tls.
	AdminListen string `yaml:"admin_listen" flag:"admin-listen" usage:"admin {address} for /metrics, /healthz, /readyz, the admin API, seal and unseal\n(default 127.0.0.1:9090; \"off\" disables)"`
	// ProbeListen, if set, serves /healthz and /readyz alone, for a
	// probe port opened wider than the admin listener.
	ProbeListen string `yaml:"probe_listen" flag:"probe-listen" usage:"{address} serving only /healthz and /readyz, for health checks from outside the host (default: none)"`
	// EnvoyGRPCListen, if set, serves Envoy's external authorization
	// (envoy.service.auth.v3.Authorization, package extauthz) over gRPC,
	// with grpc.health.v1: over TLS with the tls section's certificate
	// when it is set, otherwise plaintext HTTP/2.
	EnvoyGRPCListen string `yaml:"envoy_grpc_listen" flag:"envoy-grpc-listen" usage:"{address} serving Envoy's external authorization over gRPC (envoy.service.auth.v3.Authorization,\nwith grpc.health.v1; TLS with the tls section's certificate when set; default: none)"`
	// EnvoyGRPCReflection also serves gRPC reflection there; off by
	// default.
	EnvoyGRPCReflection bool `yaml:"envoy_grpc_reflection"`
	// Pprof serves /debug/pprof/ on the admin listener, behind the admin
	// token; off by default.
	Pprof bool `yaml:"pprof"`
	// MetricsTokenFile holds a bearer token /metrics then requires.
	MetricsTokenFile string `yaml:"metrics_token_file"`
	// AdminHosts are host names the admin listener answers to besides IP
	// addresses and localhost (DNS-rebinding protection).
	AdminHosts []string `yaml:"admin_hosts"`
	// LogLevel is debug, info (the default), warn or error.
	LogLevel string `yaml:"log_level" flag:"log-level" usage:"log {level}: debug, info (the default), warn or error"`
	// LogFormat is text (the default: key=value lines) or json (one JSON
	// object per line, for a log shipper).
	LogFormat string `yaml:"log_format" flag:"log-format" usage:"log {format}: text (key=value lines, the default) or json"`
	// DataDir holds the SQLite store, the dev root key and admin token,
	// the keyring header, the node id and the audit files (default
	// ./keygate-data; a gateway-only node creates nothing there).
	DataDir string `yaml:"data_dir" flag:"data-dir" usage:"{directory} holding the SQLite store and the dev files (default ./keygate-data)"`
	// MaxTokenSize is the largest token verified, in bytes (default 8 KiB,
	// at most 60 KiB); a larger one is refused with keygate's own 401.
	MaxTokenSize int `yaml:"max_token_size"`
	// Cache bounds the verified-token cache.
	Cache Cache `yaml:"cache"`
	// Issuers are the token issuers the gateway trusts, chosen by a
	// token's "iss"; none: the token service's own tokens (dev mode).
	Issuers []Issuer `yaml:"issuers"`
	// ForwardAuth configures /auth: which forwarding headers name the
	// request, and the rules it is decided by.
	ForwardAuth Forward `yaml:"forward_auth"`
	Routes      []Route `yaml:"routes"` // reverse proxy routes; none means no proxy
	// TokenService configures the token service. It is read at start:
	// a reload applies the rest of the file and warns that changes here
	// wait for a restart.
	TokenService TokenService `yaml:"token_service"`
	// TLS, if set, serves the traffic listener, and the probe listener
	// with the same certificate, over TLS (HTTP/2 and HTTP/1.1).
	TLS TLS `yaml:"tls"`
	// AdminTLS, if set, serves the admin listener over TLS; with a client
	// CA file, only to clients that present a certificate from one of
	// those CAs. Like TokenService, both sections are read at start (the
	// files they name are followed while running).
	AdminTLS AdminTLS `yaml:"admin_tls"`
	// Audit configures the audit log of a node that runs the token
	// service; it is on by default, with the file sink. Read at start,
	// like TokenService.
	Audit Audit `yaml:"audit"`
	// AccessLog writes one JSON line per gateway decision (forward-auth,
	// the proxy, Envoy's ext_authz). Read at start, like TokenService.
	AccessLog AccessLog `yaml:"access_log"`
	// Tracing exports OpenTelemetry traces over OTLP; off by default. The
	// standard OTEL_* environment variables apply too, and win over this
	// section. Read at start, like TokenService.
	Tracing Tracing `yaml:"tracing"`
	// Transit bounds the work transit requests make, so that no tenant
	// crowds out another or the gateway. Read at start, like TokenService.
	Transit Transit `yaml:"transit"`
	// Secrets tunes the secret store (Vault's KV version 2 API). Read at
	// start, like TokenService.
	Secrets Secrets `yaml:"secrets"`
}

// Secrets is the secrets section.
type Secrets struct {
	// CacheBytes bounds the read cache, which holds recently read secrets
	// as the store holds them, sealed, with the metadata a read needs, so
	// that a read costs no query. By default 33554432 (32 MiB) on a node
	// with its own store (SQLite), and off on a shared store (PostgreSQL):
	// there a change at one node reaches the others' caches through Redis
	// a few milliseconds after it is answered, so a read at another node
	// in between would return the previous version. A size turns it on
	// there too, trading that for reads without a query; -1 turns it off.
	CacheBytes int64 `yaml:"cache_bytes"`
	// CacheMaxAge is how long a cached secret is served before it is read
	// again (default 30s): what a node that missed a change notice, while
	// Redis was unreachable, may serve of the path's old state.
	CacheMaxAge time.Duration `yaml:"cache_max_age"`
}

func (s *Secrets) validate(field string, bad func(field, format string, args ...any)) {
	if s.CacheBytes < -1 {
		bad(field+".cache_bytes", "must be -1 (no cache), 0 (the default) or a size in bytes")
	}
	if s.CacheMaxAge < 0 {
		bad(field+".cache_max_age", "must not be negative (0: the default)")
	}
}

// Transit is the transit section. Costs are in units of one AES-GCM
// encryption of a small input: an ed25519 or ecdsa-p256 signature costs
// about 100, an rsa-2048 signature or decryption 4,000, an rsa-4096 one
// 25,000 (docs/transit.md lists them all).
type Transit struct {
	// MaxBatchCost bounds what the items of one batch request may cost
	// together (default 1000000, about 0.4 s of one core); a
	// larger batch is refused with 413 before any of it is done.
	MaxBatchCost int64 `yaml:"max_batch_cost"`
	// PrivateKeyWorkers is how many asymmetric-key operations (signing and
	// verification, RSA encryption and decryption, generating an
	// asymmetric key, key import) run at once, shared fairly between
	// tenants and between the clients of a tenant (default: one fewer than
	// the cores, at least 1, so that a core stays for the gateway). AES,
	// ChaCha20 and HMAC operations do not use them.
	PrivateKeyWorkers int `yaml:"private_key_workers"`
	// TenantQueue and CallerQueue bound the requests with asymmetric-key
	// work one tenant, and one client or user of a tenant, may have in
	// progress at once (defaults 64 and 16; a batch counts once). Past them
	// that tenant's or client's next such request is answered 429.
	TenantQueue int `yaml:"tenant_queue"`
	CallerQueue int `yaml:"caller_queue"`
}

func (t *Transit) validate(field string, bad func(field, format string, args ...any)) {
	if t.MaxBatchCost < 0 {
		bad(field+".max_batch_cost", "must not be negative (0: the default)")
	}
	if t.PrivateKeyWorkers < 0 {
		bad(field+".private_key_workers", "must not be negative (0: the default)")
	}
	if t.TenantQueue < 0 {
		bad(field+".tenant_queue", "must not be negative (0: the default)")
	}
	if t.CallerQueue < 0 {
		bad(field+".caller_queue", "must not be negative (0: the default)")
	}
}

// Tracing is the tracing section: OpenTelemetry spans for forward-auth,
// the proxy, ext_authz, the token service and JWKS fetches, exported over
// OTLP. Spans never carry a token, a claim value other than the issuer, a
// key or a secret. The exporter's headers (an API key, for one) come only
// from OTEL_EXPORTER_OTLP_HEADERS or OTEL_EXPORTER_OTLP_TRACES_HEADERS,
// never from this file.
type Tracing struct {
	// Enabled turns tracing on; so do OTEL_TRACES_EXPORTER=otlp and an
	// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT in
	// the environment, and OTEL_SDK_DISABLED=true or
	// OTEL_TRACES_EXPORTER=none turns it off whatever this says.
	Enabled bool `yaml:"enabled"`
	// Endpoint is the collector's URL: http:// for plaintext, https:// for
	// TLS (default: the OTLP default for the protocol,
	// http://localhost:4318 or localhost:4317).
	Endpoint string `yaml:"endpoint"`
	// Protocol is grpc or http/protobuf (the default, as OTLP's).
	Protocol string `yaml:"protocol"`
	// SampleRatio is the share of traces started here that are sampled, 0
	// to 1 (default 1); a request with a traceparent follows its parent's
	// decision. OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG win over it.
	SampleRatio *float64 `yaml:"sample_ratio"`
	// CAFile holds the CA certificates (PEM) an https Endpoint is checked
	// against, instead of the system's.
	CAFile string `yaml:"ca_file"`
	// ServiceName is the service.name of the spans (default keygate);
	// OTEL_SERVICE_NAME wins over it.
	ServiceName string `yaml:"service_name"`
}

// AccessLog is the access_log section: a line per decision with time,
// front end, method, host, path (without its query), status, reason,
// issuer, subject, kid, latency and trace id; never a token, a header or
// another claim.
type AccessLog struct {
	Enabled bool `yaml:"enabled"` // off by default
	// Output is stderr (the default), stdout, or a file appended to (0600;
	// reopened by nothing: rotate it with copytruncate).
	Output string `yaml:"output"`
	// SampleAllowed is the share of allowed decisions written, 0 to 1
	// (default 1); refusals are always written.
	SampleAllowed *float64 `yaml:"sample_allowed"`
}

// Audit is the audit section: where the node's audit records go. Every
// request to the token service and the admin API is recorded before it is
// answered; when no sink takes the record, the request fails.
type Audit struct {
	// Disabled turns the audit log off: nothing is recorded.
	Disabled bool `yaml:"disabled"`
	// Node names this node's chain of records; the default is the id
	// generated at the first start and kept in the data directory
	// (node.id). Two nodes writing to one store need different names.
	Node string `yaml:"node"`
	// File is the file sink: JSON lines, on unless Disabled.
	File AuditFile `yaml:"file"`
	// Stdout also writes every line to standard output, for a log
	// shipper; Store also appends them to the store (SQLite or
	// PostgreSQL), apart from the node's files.
	Stdout bool `yaml:"stdout"`
	Store  bool `yaml:"store"`
	// CheckpointEvery and CheckpointInterval: a signed checkpoint is
	// written after this many records, and this often while records come
	// in (defaults 1000 and 1s).
	CheckpointEvery    int           `yaml:"checkpoint_every"`
	CheckpointInterval time.Duration `yaml:"checkpoint_interval"`
}

// AuditFile is the audit file sink.
type AuditFile struct {
	Disabled bool   `yaml:"disabled"` // no file sink (then stdout or store must be on)
	Dir      string `yaml:"dir"`      // default <data_dir>/audit
	// MaxSize is the size in bytes at which a file is rotated; the
	// chain continues in the next (default 64 MiB).
	MaxSize int64 `yaml:"max_size"`
	// Sync is when a write is made durable: interval (the default: every
	// SyncInterval, default 1s; a crash of the machine, not of keygate,
	// loses up to that much of what was answered), batch (each group of
	// records is fsynced before any of its requests is answered; on this
	// project's VM it costs half of transit's throughput, BENCHMARKS.md)
	// or never (left to the operating system, as Vault's file device does).
	Sync         string        `yaml:"sync"`
	SyncInterval time.Duration `yaml:"sync_interval"` // the interval policy's period (default 1s)
	// MinFree is the free space, in bytes, on the directory's filesystem
	// below which keygate warns (a log line, keygate_audit_disk_free_bytes
	// under keygate_audit_disk_min_free_bytes) and /readyz answers 503
	// audit_disk_low, before writes fail on a full disk (default the
	// smaller of 1 GiB and 5% of the filesystem; -1: no warning).
	MinFree int64 `yaml:"min_free"`
}

// Audit file sync policies.
var AuditSyncs = []string{"batch", "interval", "never"}

// DefaultAuditDir is the file sink's directory under the data directory.
const DefaultAuditDir = "audit"

// WithDefaults returns a with the file sink's directory (under dataDir)
// and sync policy filled in when unset.
func (a Audit) WithDefaults(dataDir string) Audit {
	if a.File.Dir == "" {
		a.File.Dir = filepath.Join(dataDir, DefaultAuditDir)
	}
	if a.File.Sync == "" {
		a.File.Sync = "interval"
	}
	return a
}

func (a *Audit) validate(field string, bad func(field, format string, args ...any)) {
	if a.Node != "" && !audit.ValidID(a.Node) {
		bad(field+".node", "must be 1 to %d printable ASCII characters without spaces, quotes or backslashes", audit.MaxIDLen)
	}
	if a.File.MaxSize < 0 {
		bad(field+".file.max_size", "must not be negative (0: the default, 64 MiB)")
	}
	if a.File.Sync != "" && !slices.Contains(AuditSyncs, a.File.Sync) {
		bad(field+".file.sync", "must be one of %s, not %q", strings.Join(AuditSyncs, ", "), a.File.Sync)
	}
	if a.File.SyncInterval < 0 {
		bad(field+".file.sync_interval", "must not be negative")
	}
	if a.File.MinFree < -1 {
		bad(field+".file.min_free", "must be a number of bytes, 0 (the default: the smaller of 1 GiB and 5%% of the filesystem) or -1 (no warning)")
	}
	if a.CheckpointEvery < 0 {
		bad(field+".checkpoint_every", "must not be negative (0: the default, 1000)")
	}
	if a.CheckpointInterval < 0 {
		bad(field+".checkpoint_interval", "must not be negative (0: the default, 1s)")
	}
	if !a.Disabled && a.File.Disabled && !a.Stdout && !a.Store {
		bad(field, "no sink: enable file, stdout or store, or set disabled to turn the audit log off")
	}
}

// TLS names a listener's certificate (followed by any intermediates) and
// its private key, PEM files read again when their content changes.
type TLS struct {
	CertFile string `yaml:"cert_file"` // the certificate, then any intermediates (PEM)
	KeyFile  string `yaml:"key_file"`  // its private key (PEM)
}

// Enabled reports whether either file is set (Validate demands both).
func (t TLS) Enabled() bool { return t.CertFile != "" || t.KeyFile != "" }

// AdminTLS is the admin listener's TLS: a certificate, and optionally the
// CAs whose client certificates it requires (mutual TLS, on every path of
// the listener).
type AdminTLS struct {
	TLS          `yaml:",inline"`
	ClientCAFile string `yaml:"client_ca_file"` // CAs (PEM) of the client certificates the admin listener requires; none: no client certificate
}

// Enabled reports whether any of the files is set.
func (t AdminTLS) Enabled() bool { return t.TLS.Enabled() || t.ClientCAFile != "" }

// Cache bounds the verified-token cache.
type Cache struct {
	MaxEntries int           `yaml:"max_entries"` // cached tokens at most (default 100000)
	MaxBytes   int64         `yaml:"max_bytes"`   // memory the entries account for, in bytes (default 64 MiB)
	MaxTTL     time.Duration `yaml:"max_ttl"`     // how long a token stays cached, whatever its exp (default 5m)
	// Disabled verifies every request in full: nothing is cached.
	Disabled bool `yaml:"disabled"`
}

// Issuer is one trusted token issuer (one tenant) and the policy its tokens
// must meet. Exactly one key source is set: JWKSURL, Discovery or KeyFiles.
type Issuer struct {
	Issuer    string `yaml:"issuer"`    // the tokens' "iss", exactly; required
	JWKSURL   string `yaml:"jwks_url"`  // an https URL serving the issuer's JWKS
	Discovery bool   `yaml:"discovery"` // find jwks_uri via OIDC discovery of Issuer
	// KeyFiles are PEM public or private keys, JWKs and JWKS documents
	// (an HMAC secret as an oct JWKS), re-read when they change and on
	// every reload.
	KeyFiles []string `yaml:"key_files"`
	// Algorithms is the allow-list (RS256 ... EdDSA, HS256 ... for oct
	// keys); required; each key verifies one algorithm only.
	Algorithms []string `yaml:"algorithms"`
	// Audiences: the token's "aud" must hold one of them (all of them with
	// all_audiences); none: aud is not checked.
	Audiences    []string          `yaml:"audiences"`
	AllAudiences bool              `yaml:"all_audiences"` // require every audience instead of any one
	Leeway       *time.Duration    `yaml:"leeway"`        // clock skew allowed on exp, nbf and iat (default 60s)
	Require      []string          `yaml:"require"`       // claims a token must carry (default [exp])
	Scopes       []string          `yaml:"scopes"`        // scopes every token of this issuer must hold, on every route
	Type         string            `yaml:"type"`          // the "typ" header required, such as at+jwt (RFC 9068); none: not checked
	Headers      map[string]string `yaml:"headers"`       // response header -> claim (dotted path)
	JWKS         JWKS              `yaml:"jwks"`          // how jwks_url or discovery keys are fetched
}

// JWKS tunes remote key fetching; zero values take the keys package defaults.
type JWKS struct {
	MinRefresh      time.Duration `yaml:"min_refresh"`      // the shortest refresh interval a response's max-age may ask for (default 10s)
	DefaultRefresh  time.Duration `yaml:"default_refresh"`  // when the response has no max-age (default 5m)
	MaxRefresh      time.Duration `yaml:"max_refresh"`      // the longest refresh interval (default 24h)
	MaxStale        time.Duration `yaml:"max_stale"`        // how long the last good keys serve while fetches fail; then the issuer's tokens are refused (default 24h)
	Timeout         time.Duration `yaml:"timeout"`          // bound on each fetch, body included (default 5s)
	MaxBody         int64         `yaml:"max_body"`         // the largest JWKS document, in bytes (default 1 MiB)
	RefetchInterval time.Duration `yaml:"refetch_interval"` // least time between two fetches an unknown kid starts (default 10s)
}

// Forward configures the forward-auth endpoint.
type Forward struct {
	Cookie string `yaml:"cookie"` // also accept the token from this cookie
	// Proxy names the proxy in front (auto, nginx, traefik, caddy, envoy):
	// it decides which forwarding headers name the request the rules are
	// matched on (see gateway.Forwarding). Default auto.
	Proxy string `yaml:"proxy" flag:"proxy" replaces:"trusted_headers" usage:"the {proxy} in front of /auth: nginx, traefik, caddy or envoy; /auth then trusts only the forwarding\nheaders that proxy sets (default auto: X-Forwarded-* and X-Original-*, refused when they disagree)"`
	// TrustedHeaders names the forwarding headers one by one instead of a
	// Proxy preset.
	TrustedHeaders *TrustedHeaders `yaml:"trusted_headers"`
	Rules          []Route         `yaml:"rules"` // matched on the forwarded method, URI and host
}

// TrustedHeaders are the headers a custom proxy set-up overwrites on every
// forward-auth request; each is then required. An empty one takes that
// part from the request keygate receives.
type TrustedHeaders struct {
	Method string `yaml:"method"` // the header naming the request's method
	URI    string `yaml:"uri"`    // the header naming its path and query
	Host   string `yaml:"host"`   // the header naming its host
}

// Forwarding returns the forwarding headers forward-auth trusts; Validate
// has checked the names.
func (f *Forward) Forwarding() gateway.Forwarding {
	if th := f.TrustedHeaders; th != nil {
		return gateway.CustomForwarding(gateway.ProxyCustom, th.Method, th.URI, th.Host)
	}
	fw, _ := gateway.Preset(f.Proxy)
	return fw
}

// Route matches requests by host, path prefix and method, and says what they
// need: anonymous access, or a token from some issuers with some scopes.
// Paths are read as gateway.Router.Match describes.
type Route struct {
	Host       string   `yaml:"host"`        // the request's host, exactly; none: any host
	PathPrefix string   `yaml:"path_prefix"` // the canonical path's prefix, on segment boundaries ("/api" covers /api and /api/x, not /apix)
	Methods    []string `yaml:"methods"`     // upper case; none: any method; GET covers HEAD; a request's method is matched in any case
	Upstream   string   `yaml:"upstream"`    // reverse proxy only
	Anonymous  bool     `yaml:"anonymous"`   // let requests through without a token (a token given is still checked)
	Issuers    []string `yaml:"issuers"`     // empty: any configured issuer
	Scopes     []string `yaml:"scopes"`      // scopes the token must all hold (403 insufficient_scope otherwise)
	// CaseInsensitive matches path_prefix ignoring case, for an upstream
	// that does; the default is case-sensitive.
	CaseInsensitive bool `yaml:"case_insensitive"`
	// AllowPathParams accepts ";" parameters ("/app;jsessionid=1"),
	// AllowEncodedSlashes %2F and %5C, and AllowDotsAfterEmpty a ".." after
	// an empty segment ("/a//../b"), in the paths this rule covers;
	// otherwise such paths are refused.
	AllowPathParams     bool `yaml:"allow_path_params"`
	AllowEncodedSlashes bool `yaml:"allow_encoded_slashes"`
	AllowDotsAfterEmpty bool `yaml:"allow_dots_after_empty"`
}

// TokenService is the token service's section. Empty fields take their
// defaults (WithDefaults).
type TokenService struct {
	Issuer   string `yaml:"issuer"`   // "iss" of issued tokens (default http://<listen>; required on a shared database)
	Audience string `yaml:"audience"` // "aud" of issued tokens
	// DatabaseURL is the fleet's PostgreSQL (postgres://...; also
	// KEYGATE_DATABASE_URL); none: SQLite in data_dir.
	DatabaseURL string `yaml:"database_url"`
	// RedisURL is the fleet's Redis (redis://, rediss:// with TLS; also
	// KEYGATE_REDIS_URL), for revocations, rate limits and key notices.
	RedisURL string `yaml:"redis_url"`
	// DatabaseURLFile and RedisURLFile hold the URLs instead, so that a
	// password in them is in neither the file nor the command line.
	DatabaseURLFile string `yaml:"database_url_file"`
	RedisURLFile    string `yaml:"redis_url_file"`
	RedisPrefix     string `yaml:"redis_prefix"`     // the prefix of every Redis key keygate uses (default keygate)
	RootKeyFile     string `yaml:"root_key_file"`    // the root key (base64, 0600; also KEYGATE_ROOT_KEY)
	KeyringFile     string `yaml:"keyring_file"`     // keyring.json of a passphrase-sealed node (default <data_dir>/keyring.json)
	AdminTokenFile  string `yaml:"admin_token_file"` // the admin API's bearer token, 32+ characters (also KEYGATE_ADMIN_TOKEN)
	SigningAlg      string `yaml:"signing_alg"`      // ES256 (the default), ES384, ES512, RS256, PS256 or EdDSA
	// KeyRotation: nil means the default (720h); 0 means manual only.
	KeyRotation            *time.Duration `yaml:"key_rotation"`
	KeyPrePublish          time.Duration  `yaml:"key_prepublish"`           // how long the next signing key is published before it signs (default 1h)
	AccessTokenTTL         time.Duration  `yaml:"access_token_ttl"`         // lifetime of issued access tokens (default 15m)
	RevocationMaxStaleness time.Duration  `yaml:"revocation_max_staleness"` // with Redis: refuse every token once the revocation set is this old (above 1s; default 0, never)
	StoreTimeout           time.Duration  `yaml:"store_timeout"`            // bound on each PostgreSQL operation and new connection (default 5s)
	// TokenRateLimit is token requests per second per client (burst
	// twice that); nil means the default (50), 0 means no limit.
	TokenRateLimit *float64 `yaml:"token_rate_limit"`
	// TrustedProxies are reverse proxies (addresses or CIDR prefixes) whose
	// X-Forwarded-For names the client for the per-address login limit.
	TrustedProxies []string `yaml:"trusted_proxies"`
	// RedisCAFile holds the CA certificates (PEM) a rediss:// server's
	// certificate must chain to, instead of the system's; RedisCertFile and
	// RedisKeyFile are the client certificate Redis asks for by default
	// (tls-auth-clients yes). The certificate and key go together, and
	// any of the three needs a rediss:// URL: that is checked when the node
	// connects, with the URL known (redis_url_file is read only then).
	RedisCAFile   string `yaml:"redis_ca_file"`
	RedisCertFile string `yaml:"redis_cert_file"`
	RedisKeyFile  string `yaml:"redis_key_file"`
	// IPv6Prefix is the prefix length an IPv6 client is counted by in the
	// per-address limits (0: 64; else 32 to 128).
	IPv6Prefix int `yaml:"ipv6_prefix"`
	// PasswordHashes bounds the Argon2id password hashes running at once
	// (0: one per core, within a quarter of GOMEMLIMIT).
	PasswordHashes int `yaml:"password_hashes"`
}

// Defaults of the token_service section.
const (
	DefaultSigningAlg     = "ES256"
	DefaultKeyRotation    = 720 * time.Hour
	DefaultKeyPrePublish  = time.Hour
	DefaultAccessTokenTTL = 15 * time.Minute
	DefaultStoreTimeout   = 5 * time.Second
	DefaultTokenRateLimit = 50.0 // requests per second per client
	DefaultIPv6Prefix     = 64
	DefaultRedisPrefix    = "keygate"
)

// WithDefaults returns t with every field that is not set at its default.
// KeyRotation and TokenRateLimit are then set, and 0 in them is what it is
// in the file: manual rotation only, and no limit.
func (t TokenService) WithDefaults() TokenService {
	set := func(dst *time.Duration, def time.Duration) {
		if *dst == 0 {
			*dst = def
		}
	}
	if t.SigningAlg == "" {
		t.SigningAlg = DefaultSigningAlg
	}
	if t.KeyRotation == nil {
		d := DefaultKeyRotation
		t.KeyRotation = &d
	}
	set(&t.KeyPrePublish, DefaultKeyPrePublish)
	set(&t.AccessTokenTTL, DefaultAccessTokenTTL)
	set(&t.StoreTimeout, DefaultStoreTimeout)
	if t.TokenRateLimit == nil {
		r := DefaultTokenRateLimit
		t.TokenRateLimit = &r
	}
	if t.IPv6Prefix == 0 {
		t.IPv6Prefix = DefaultIPv6Prefix
	}
	if t.RedisPrefix == "" {
		t.RedisPrefix = DefaultRedisPrefix
	}
	return t
}

// ParsePrefixes parses addresses and CIDR prefixes ("10.0.0.0/8", "::1");
// an address is a prefix of its full length.
func ParsePrefixes(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("%q is not an IP address or CIDR prefix", s)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// SigningAlgs are the algorithms token_service.signing_alg may name.
var SigningAlgs = []string{"ES256", "ES384", "ES512", "RS256", "PS256", "EdDSA"}

// DefaultLeeway is the clock skew tolerated on exp, nbf and iat: the
// verifier's own default, so that a file that leaves leeway out means what
// a policy that leaves it zero means.
const DefaultLeeway = verify.DefaultLeeway

// Load reads path, applies environment overrides from env (os.Environ form)
// and defaults, and validates the result. Its errors are for the operator
// (operr): each names the file, or the variable, and what is wrong.
func Load(path string, env []string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, operr.Errorf("config file: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, operr.Errorf("config %s: %w", path, err)
	}
	if err := c.ApplyEnv(env); err != nil {
		return nil, err
	}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		return nil, operr.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes YAML strictly: unknown fields and trailing documents are
// errors, and a value that does not fit its field is a *TypeError naming
// its YAML path.
func Parse(data []byte) (*Config, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if err := checkTypes(&doc, reflect.TypeFor[Config]()); err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	c := new(Config)
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	var extra any
	if err := dec.Decode(&extra); err == nil {
		return nil, errors.New("more than one YAML document")
	}
	return c, nil
}

// SetDefaults fills unset fields.
func (c *Config) SetDefaults() {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.AdminListen == "" {
		c.AdminListen = DefaultAdminListen
	}
	if c.LogLevel == "" {
		c.LogLevel = "info"
	}
	if c.DataDir == "" {
		c.DataDir = "./keygate-data"
	}
	if c.MaxTokenSize == 0 {
		c.MaxTokenSize = jose.DefaultMaxTokenSize
	}
	for i := range c.Issuers {
		is := &c.Issuers[i]
		if is.Leeway == nil {
			d := DefaultLeeway
			is.Leeway = &d
		}
		if is.Require == nil {
			is.Require = []string{"exp"}
		}
	}
}

// A FieldError is one problem of a configuration, at the field its YAML
// path names.
type FieldError struct {
	Field   string // the YAML path: log_level, token_service.issuer, issuers[0].jwks_url
	Problem string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Problem }

// Validate checks the whole configuration and reports every problem, each
// a *FieldError, joined.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
	}
	checkAddr := func(field, addr string) {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			bad(field, "not a host:port address: %q", addr)
		}
	}
	checkAddr("listen", c.Listen)
	if c.AdminListen != "off" {
		checkAddr("admin_listen", c.AdminListen)
	}
	if c.ProbeListen != "" {
		checkAddr("probe_listen", c.ProbeListen)
	}
	if c.EnvoyGRPCListen != "" {
		checkAddr("envoy_grpc_listen", c.EnvoyGRPCListen)
	}
	if c.EnvoyGRPCReflection && c.EnvoyGRPCListen == "" {
		bad("envoy_grpc_reflection", "is set but envoy_grpc_listen is not")
	}
	for _, h := range c.AdminHosts {
		if h == "" || strings.ContainsAny(h, ":/ ") {
			bad("admin_hosts", "%q is not a host name", h)
		}
	}
	if sa := c.AccessLog.SampleAllowed; sa != nil && (*sa < 0 || *sa > 1) {
		bad("access_log.sample_allowed", "must be between 0 and 1, not %v", *sa)
	}
	if c.LogFormat != "" && c.LogFormat != "text" && c.LogFormat != "json" {
		bad("log_format", "must be text or json, not %q", c.LogFormat)
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, strings.ToLower(c.LogLevel)) {
		bad("log_level", "must be debug, info, warn or error, not %q", c.LogLevel)
	}
	if c.MaxTokenSize < 512 || c.MaxTokenSize > MaxTokenSize {
		bad("max_token_size", "must be between 512 and %d bytes (a request's headers are read up to 64 KiB), not %d", MaxTokenSize, c.MaxTokenSize)
	}
	if c.Cache.MaxEntries < 0 || c.Cache.MaxBytes < 0 || c.Cache.MaxTTL < 0 {
		bad("cache", "limits must not be negative")
	}
	seen := map[string]bool{}
	for i := range c.Issuers {
		c.Issuers[i].validate(fmt.Sprintf("issuers[%d]", i), bad)
		if iss := c.Issuers[i].Issuer; seen[iss] {
			bad(fmt.Sprintf("issuers[%d].issuer", i), "%q is configured twice", iss)
		} else {
			seen[iss] = true
		}
	}
	c.ForwardAuth.validate("forward_auth", bad)
	for i, r := range c.ForwardAuth.Rules {
		r.validate(fmt.Sprintf("forward_auth.rules[%d]", i), false, seen, bad)
	}
	for i, r := range c.Routes {
		r.validate(fmt.Sprintf("routes[%d]", i), true, seen, bad)
	}
	c.TokenService.validate("token_service", bad)
	c.Audit.validate("audit", bad)
	c.TLS.validate("tls", bad)
	c.AdminTLS.TLS.validate("admin_tls", bad)
	if c.AdminTLS.ClientCAFile != "" && !c.AdminTLS.TLS.Enabled() {
		bad("admin_tls.client_ca_file", "needs admin_tls.cert_file and admin_tls.key_file: client certificates are asked for in the TLS handshake")
	}
	c.Tracing.validate("tracing", bad)
	c.Transit.validate("transit", bad)
	c.Secrets.validate("secrets", bad)
	if c.AdminTLS.Enabled() && c.AdminListen == "off" {
		bad("admin_tls", "is set but the admin listener is off (admin_listen: off)")
	}
	return errors.Join(errs...)
}

// validate checks the tracing section's values; whether the collector
// answers is not checked: a dead collector never stops keygate.
func (t Tracing) validate(field string, bad func(field, format string, args ...any)) {
	switch t.Protocol {
	case "", "grpc", "http/protobuf":
	default:
		bad(field+".protocol", "must be grpc or http/protobuf, not %q", t.Protocol)
	}
	if t.Endpoint != "" {
		if u, err := url.Parse(t.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad(field+".endpoint", "must be an http:// or https:// URL")
		}
	}
	if r := t.SampleRatio; r != nil && (*r < 0 || *r > 1) {
		bad(field+".sample_ratio", "must be between 0 and 1, not %v", *r)
	}
}

// validate checks that a certificate comes with its key and a key with its
// certificate; whether the files load is checked when the listener starts.
func (t TLS) validate(field string, bad func(field, format string, args ...any)) {
	switch {
	case t.CertFile != "" && t.KeyFile == "":
		bad(field+".key_file", "is required with %s.cert_file", field)
	case t.KeyFile != "" && t.CertFile == "":
		bad(field+".cert_file", "is required with %s.key_file", field)
	}
}

func (f *Forward) validate(field string, bad func(field, format string, args ...any)) {
	if _, err := gateway.Preset(f.Proxy); err != nil {
		bad(field+".proxy", "must be one of %s, not %q", strings.Join(gateway.Proxies, ", "), f.Proxy)
	}
	th := f.TrustedHeaders
	if th == nil {
		return
	}
	if f.Proxy != "" {
		bad(field+".trusted_headers", "cannot be combined with proxy: name the headers or the proxy")
	}
	for _, h := range []struct{ name, v string }{{"method", th.Method}, {"uri", th.URI}, {"host", th.Host}} {
		if h.v != "" && !verify.ValidHeaderName(h.v) {
			bad(field+".trusted_headers."+h.name, "%q is not a valid header name", h.v)
		}
	}
}

func (t *TokenService) validate(field string, bad func(field, format string, args ...any)) {
	if t.Issuer != "" {
		if u, err := url.Parse(t.Issuer); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			bad(field+".issuer", "must be an http(s) URL, not %q", t.Issuer)
		}
	}
	if t.DatabaseURL != "" && !strings.HasPrefix(t.DatabaseURL, "postgres://") && !strings.HasPrefix(t.DatabaseURL, "postgresql://") {
		bad(field+".database_url", "must be a postgres:// URL")
	}
	if t.DatabaseURL != "" && t.DatabaseURLFile != "" {
		bad(field+".database_url_file", "cannot be combined with database_url (or KEYGATE_DATABASE_URL)")
	}
	if t.RedisURL != "" && t.RedisURLFile != "" {
		bad(field+".redis_url_file", "cannot be combined with redis_url (or KEYGATE_REDIS_URL)")
	}
	if t.RedisURL != "" && !strings.HasPrefix(t.RedisURL, "redis://") && !strings.HasPrefix(t.RedisURL, "rediss://") {
		bad(field+".redis_url", "must be a redis:// or rediss:// URL")
	}
	if t.SigningAlg != "" && !slices.Contains(SigningAlgs, t.SigningAlg) {
		bad(field+".signing_alg", "must be one of %s, not %q", strings.Join(SigningAlgs, ", "), t.SigningAlg)
	}
	if t.KeyRotation != nil && *t.KeyRotation < 0 {
		bad(field+".key_rotation", "must not be negative (0 means manual rotation only)")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"key_prepublish", t.KeyPrePublish}, {"access_token_ttl", t.AccessTokenTTL}, {"revocation_max_staleness", t.RevocationMaxStaleness},
		{"store_timeout", t.StoreTimeout}} {
		if d.v < 0 {
			bad(field+"."+d.name, "must not be negative")
		}
	}
	if t.KeyRotation != nil && *t.KeyRotation > 0 && t.KeyPrePublish > 0 && *t.KeyRotation <= t.KeyPrePublish {
		bad(field+".key_rotation", "must be longer than key_prepublish")
	}
	if t.TokenRateLimit != nil && (*t.TokenRateLimit < 0 || *t.TokenRateLimit > 1e6) { // 1e6: ratelimit's bound
		bad(field+".token_rate_limit", "must be between 0 (no limit) and 1e6 requests per second")
	}
	if _, err := ParsePrefixes(t.TrustedProxies); err != nil {
		bad(field+".trusted_proxies", "%v", err)
	}
	if t.IPv6Prefix != 0 && (t.IPv6Prefix < 32 || t.IPv6Prefix > 128) {
		bad(field+".ipv6_prefix", "must be between 32 and 128, not %d", t.IPv6Prefix)
	}
	if t.PasswordHashes < 0 || t.PasswordHashes > 1024 {
		bad(field+".password_hashes", "must be between 0 (one per core) and 1024, not %d", t.PasswordHashes)
	}
	if t.RevocationMaxStaleness > 0 && t.RevocationMaxStaleness <= time.Second {
		bad(field+".revocation_max_staleness", "must be above 1s")
	}
	// The Redis TLS files and the URL's scheme are checked together when
	// the node connects (node's redisTLS): the URL may be in
	// redis_url_file, read only then.
}

func (is *Issuer) validate(field string, bad func(field, format string, args ...any)) {
	if is.Issuer == "" {
		bad(field+".issuer", "is required")
	}
	sources := 0
	for _, set := range []bool{is.JWKSURL != "", is.Discovery, len(is.KeyFiles) > 0} {
		if set {
			sources++
		}
	}
	if sources != 1 {
		bad(field, "needs exactly one key source: jwks_url, discovery or key_files")
	}
	if is.JWKSURL != "" && !secureURL(is.JWKSURL) {
		bad(field+".jwks_url", "must be an https URL (http only for a loopback host): %q", is.JWKSURL)
	}
	if is.Discovery && !secureURL(is.Issuer) {
		bad(field+".discovery", "needs an https issuer URL (http only for a loopback host), not %q", is.Issuer)
	}
	if len(is.Algorithms) == 0 {
		bad(field+".algorithms", "list at least one algorithm (an explicit allow-list is required)")
	}
	for j, a := range is.Algorithms {
		if _, err := jose.ParseAlg(a); err != nil {
			bad(fmt.Sprintf("%s.algorithms[%d]", field, j), "unsupported algorithm %q", a)
		}
	}
	if is.Leeway != nil && (*is.Leeway < 0 || *is.Leeway > time.Hour) {
		bad(field+".leeway", "must be between 0 and 1h, not %v", *is.Leeway)
	}
	for h := range is.Headers {
		if !verify.ValidHeaderName(h) {
			bad(field+".headers", "%q is not a valid header name", h)
		}
	}
}

func (r *Route) validate(field string, proxy bool, issuers map[string]bool, bad func(field, format string, args ...any)) {
	if err := gateway.CheckPathPrefix(r.PathPrefix); err != nil {
		bad(field+".path_prefix", "%v", err)
	}
	if proxy {
		if u, err := url.Parse(r.Upstream); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad(field+".upstream", "not an http(s) URL: %q", r.Upstream)
		}
	} else if r.Upstream != "" {
		bad(field+".upstream", "forward-auth rules have no upstream")
	}
	for _, iss := range r.Issuers {
		if !issuers[iss] {
			bad(field+".issuers", "%q is not a configured issuer", iss)
		}
	}
	if r.Anonymous && (len(r.Scopes) > 0 || len(r.Issuers) > 0) {
		bad(field, "an anonymous route cannot require issuers or scopes")
	}
	for _, m := range r.Methods {
		if err := gateway.CheckMethod(m); err != nil {
			bad(field+".methods", "%v", err)
		} else if strings.ToUpper(m) != m {
			bad(field+".methods", "methods are upper case, not %q", m)
		}
	}
}

// secureURL is verifykeys.CheckURL's verdict: https, or http to a loopback host
// only, since keys fetched over plain HTTP from elsewhere could be
// replaced in transit.
func secureURL(raw string) bool {
	_, err := verifykeys.CheckURL(raw)
	return err == nil
}

// Algs returns the issuer's algorithms, parsed; Validate has checked them.
func (is *Issuer) Algs() []jose.Alg {
	out := make([]jose.Alg, 0, len(is.Algorithms))
	for _, a := range is.Algorithms {
		if alg, err := jose.ParseAlg(a); err == nil {
			out = append(out, alg)
		}
	}
	return out
}
