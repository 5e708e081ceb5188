package runner

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/keygate/keygate/internal/bench"
	"github.com/keygate/keygate/internal/bench/loadgen"
	"github.com/keygate/keygate/internal/keyfile"
	"github.com/keygate/keygate/jose"
)

// Scenario is a workload 'keygate bench scenario' sends to keygate.
type Scenario struct {
	Name    string
	Summary string
	series  func(env *Env, o ScenarioOptions) (Series, []string, error)
}

// ScenarioOptions tune a scenario.
type ScenarioOptions struct {
	SeriesName string // the series' name in the report (default the scenario's)
	// Target is a running keygate's traffic URL (http://host:port); ""
	// starts one. Admin and AdminToken are its admin listener and token,
	// for the scenarios that create a client, for /metrics and profiles.
	Target, Admin, AdminToken string
	// ExtraConfig is YAML appended to the configuration of a keygate the
	// scenario starts (the auth and proxy scenarios write one).
	ExtraConfig string
	// Token scenarios (auth, proxy).
	Alg      jose.Alg // default ES256
	KeyFile  string   // the running target's trusted signing key (private PEM/JWK, or an HMAC secret)
	Claims   string   // small, 1kb or 4kb
	Tokens   int      // distinct tokens (default DefaultTokens)
	HitRatio float64  // share of requests with a few hot tokens
	Invalid  float64  // share of requests with a token signed by an untrusted key
	// Batch is the batch size of transit-batch (default 100).
	Batch int
	// Secret scenarios (secrets.go).
	Reference   bool   // also measure the reference (bench server kv-read, kv-write) as the first series
	DatabaseURL string // a PostgreSQL server (postgres://...) for the started keygate and the reference; "": SQLite
	NoCache     bool   // the started keygate runs with its secret read cache off (every read misses)
}

// Scenarios lists the scenarios.
var Scenarios = []Scenario{
	{"auth", "forward-auth GET /auth with a bearer token (--alg, --claims, --tokens, --hit-ratio, --invalid)", authSeries},
	{"proxy", "reverse proxy: GET /api/orders with a bearer token, proxied to a no-op upstream", proxySeries},
	{"token", "client_credentials: POST /oauth2/token with HTTP Basic client authentication", tokenSeries},
	{"introspect", "POST /oauth2/introspect of an access token (RFC 7662), the client authenticated", introspectSeries},
	{"transit-encrypt", "POST /v1/transit/encrypt/bench of 64 bytes (Vault API, X-Vault-Token)", transitSeries("encrypt")},
	{"transit-decrypt", "POST /v1/transit/decrypt/bench of a 64-byte plaintext's ciphertext", transitSeries("decrypt")},
	{"transit-batch", "POST /v1/transit/encrypt/bench with a batch_input of --batch 64-byte items", transitSeries("batch")},
	{"secret-read", "GET /v1/secret/data/bench/N of a 1 KiB secret (Vault's KV v2 API), 100 distinct paths in turn", secretSeries(false)},
	{"secret-write", "POST /v1/secret/data/bench/N of a 1 KiB secret, a new version of one of 100 paths each time", secretSeries(true)},
}

// FindScenario returns the named scenario.
func FindScenario(name string) (Scenario, bool) {
	i := slices.IndexFunc(Scenarios, func(s Scenario) bool { return s.Name == name })
	if i < 0 {
		return Scenario{}, false
	}
	return Scenarios[i], true
}

// Series returns the scenario's series and notes for the report.
func (s Scenario) Series(env *Env, o ScenarioOptions) (Series, []string, error) {
	ser, notes, err := s.series(env, o)
	if err != nil {
		return Series{}, nil, err
	}
	ser.Name = cmpOrString(o.SeriesName, s.Name)
	if o.Target != "" {
		start := running(o)
		ser.Start = func(context.Context, *Env) (*Target, error) { return start, nil }
	}
	return ser, notes, nil
}

// running is the Target of a keygate the scenario did not start.
func running(o ScenarioOptions) *Target {
	t := &Target{Name: "target", Base: strings.TrimRight(o.Target, "/"), Admin: strings.TrimRight(o.Admin, "/"), AdminToken: o.AdminToken}
	if t.Admin != "" {
		t.Probe = MetricsProbe{URL: t.Admin + "/metrics"}
		t.pprofBase, t.pprofToken = t.Admin+"/debug/pprof/", o.AdminToken
	}
	return t
}

func cmpOrString(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// tokenSetup is the key and configuration of a token scenario.
type tokenSetup struct {
	tokens func(context.Context) ([]string, error)
	config string // the issuers section of a keygate the scenario starts
	notes  []string
}

func newTokenSetup(env *Env, o ScenarioOptions) (*tokenSetup, error) {
	alg := o.Alg
	if alg == 0 {
		alg = jose.ES256
	}
	var signer *jose.Signer
	var keyPath string
	var err error
	switch {
	case o.Target != "" && o.KeyFile == "":
		return nil, fmt.Errorf("a running target needs the signing key it trusts (--key)")
	case o.KeyFile != "" && keyfile.IsHMAC(alg):
		signer, err = keyfile.LoadSecretSigner(o.KeyFile, alg, "")
	case o.KeyFile != "":
		signer, err = keyfile.LoadSigner(o.KeyFile, alg, "")
	default:
		signer, keyPath, err = newTrustedKey(env, alg)
	}
	if err != nil {
		return nil, err
	}
	other, otherPath, err := newTrustedKey(env, alg) // its key file is written and never configured
	os.Remove(otherPath)
	if err != nil {
		return nil, err
	}
	ts := TokenSet{Signer: signer, Other: other, Distinct: cmpOr(o.Tokens, DefaultTokens), HitRatio: o.HitRatio,
		Invalid: o.Invalid, ClaimsSize: o.Claims}
	s := &tokenSetup{tokens: sharedTokens(ts)}
	s.config = fmt.Sprintf("issuers:\n  - issuer: %s\n    key_files: [%s]\n    algorithms: [%s]\n    audiences: [%s]\n",
		quote(bench.DefaultIssuer), quote(keyPath), alg, quote(bench.DefaultAudience))
	s.notes = append(s.notes, fmt.Sprintf("%s tokens, claims %s; %d distinct tokens sent in turn, %.0f%% of requests "+
		"from %d hot tokens, %.0f%% signed by an untrusted key (401 expected).", alg, cmpOrString(o.Claims, "small"),
		ts.Distinct, 100*ts.HitRatio, HotTokens, 100*ts.Invalid))
	return s, nil
}

// newTrustedKey makes a signing key and writes what keygate's key_files
// read: the public key as PEM, or an HMAC secret as an oct JWKS.
func newTrustedKey(env *Env, alg jose.Alg) (*jose.Signer, string, error) {
	if keyfile.IsHMAC(alg) {
		secret, err := keyfile.GenerateSecret(alg)
		if err != nil {
			return nil, "", err
		}
		key, err := jose.NewHMACKey(alg, "", secret)
		if err != nil {
			return nil, "", err
		}
		kid := key.Thumbprint()
		s, err := jose.NewSigner(alg, kid, secret)
		if err != nil {
			return nil, "", err
		}
		doc, _ := json.Marshal(map[string]any{"keys": []map[string]string{{"kty": "oct", "kid": kid, "alg": alg.String(),
			"use": "sig", "k": base64.RawURLEncoding.EncodeToString(secret)}}})
		path, err := writeKey(env, alg, doc, 0o600)
		return s, path, err
	}
	priv, err := keyfile.Generate(alg, 0)
	if err != nil {
		return nil, "", err
	}
	k, err := jose.NewKey(alg, "", priv.Public())
	if err != nil {
		return nil, "", err
	}
	s, err := jose.NewSigner(alg, k.Thumbprint(), priv)
	if err != nil {
		return nil, "", err
	}
	pub, err := jose.MarshalPublicPEM(priv.Public())
	if err != nil {
		return nil, "", err
	}
	path, err := writeKey(env, alg, pub, 0o644)
	return s, path, err
}

func writeKey(env *Env, alg jose.Alg, b []byte, mode os.FileMode) (string, error) {
	f, err := os.CreateTemp(env.Dir, "issuer-"+strings.ToLower(alg.String())+"-*.key")
	if err != nil {
		return "", err
	}
	err = errors.Join(f.Chmod(mode), writeAll(f, b), f.Close())
	return f.Name(), err
}

func writeAll(f *os.File, b []byte) error {
	_, err := f.Write(b)
	return err
}

func authSeries(env *Env, o ScenarioOptions) (Series, []string, error) {
	ts, err := newTokenSetup(env, o)
	if err != nil {
		return Series{}, nil, err
	}
	return Series{
		Start: func(ctx context.Context, env *Env) (*Target, error) {
			return StartKeygate(ctx, env, KeygateSpec{Name: cmpOrString(o.SeriesName, "keygate"), Config: ts.config + o.ExtraConfig})
		},
		Pool: func(ctx context.Context, t *Target) ([]loadgen.Request, error) {
			return bearerPool(ctx, ts.tokens, t.Base, "/auth")
		},
	}, ts.notes, nil
}

func proxySeries(env *Env, o ScenarioOptions) (Series, []string, error) {
	ts, err := newTokenSetup(env, o)
	if err != nil {
		return Series{}, nil, err
	}
	var upstream *Target
	return Series{
		Start: func(ctx context.Context, env *Env) (*Target, error) {
			// The upstream shares the target's CPUs: it is part of what a proxied request costs here.
			up, err := StartBenchServer(ctx, env, "upstream", bench.ModeNoop, "")
			if err != nil {
				return nil, err
			}
			upstream = up
			cfg := ts.config + "routes:\n  - {path_prefix: /api, upstream: " + quote(up.Base) + "}\n" + o.ExtraConfig
			t, err := StartKeygate(ctx, env, KeygateSpec{Name: cmpOrString(o.SeriesName, "keygate"), Config: cfg})
			if err != nil {
				up.Stop()
				return nil, err
			}
			t.startBeside(upstream)
			return t, nil
		},
		Pool: func(ctx context.Context, t *Target) ([]loadgen.Request, error) {
			return bearerPool(ctx, ts.tokens, t.Base, "/api/orders")
		},
	}, append(ts.notes, "The upstream is 'keygate bench server --mode noop' on the target's CPUs."), nil
}

// tokenSeries creates a client on the target and asks for its tokens.
func tokenSeries(_ *Env, o ScenarioOptions) (Series, []string, error) {
	return Series{
		Start: devStart(o),
		Pool: func(ctx context.Context, t *Target) ([]loadgen.Request, error) {
			c, err := CreateClient(ctx, t, "bench-token")
			if err != nil {
				return nil, err
			}
			return []loadgen.Request{{Method: http.MethodPost, URL: t.Base + "/oauth2/token", Body: []byte("grant_type=client_credentials"),
				Header: []loadgen.Header{{Name: "Authorization", Value: c.BasicAuth()},
					{Name: "Content-Type", Value: "application/x-www-form-urlencoded"}}}}, nil
		},
	}, []string{"A started keygate runs 'serve --dev' with KEYGATE_TOKEN_SERVICE_TOKEN_RATE_LIMIT=0; against a running one the client's rate limit applies."}, nil
}

func introspectSeries(_ *Env, o ScenarioOptions) (Series, []string, error) {
	return Series{
		Start: devStart(o),
		Pool: func(ctx context.Context, t *Target) ([]loadgen.Request, error) {
			c, err := CreateClient(ctx, t, "bench-introspect")
			if err != nil {
				return nil, err
			}
			n := min(cmpOr(o.Tokens, 100), 100)
			var reqs []loadgen.Request
			for range n {
				tok, err := AccessToken(ctx, t, c)
				if err != nil {
					return nil, err
				}
				reqs = append(reqs, loadgen.Request{Method: http.MethodPost, URL: t.Base + "/oauth2/introspect",
					Body: []byte("token=" + url.QueryEscape(tok)),
					Header: []loadgen.Header{{Name: "Authorization", Value: c.BasicAuth()},
						{Name: "Content-Type", Value: "application/x-www-form-urlencoded"}}})
			}
			return reqs, nil
		},
	}, []string{"Up to 100 distinct access tokens of one client, introspected in turn by that client."}, nil
}

func transitSeries(op string) func(*Env, ScenarioOptions) (Series, []string, error) {
	return func(_ *Env, o ScenarioOptions) (Series, []string, error) {
		batch := cmpOr(o.Batch, 100)
		note := "Transit key \"bench\" (aes256-gcm96), 100 distinct 64-byte plaintexts in turn, audit log as the target has it " +
			"(on in a started dev-mode keygate)."
		if op == "batch" {
			note = fmt.Sprintf("Transit key \"bench\", one batch_input of %d distinct 64-byte items per request.", batch)
		}
		return Series{
			Start: devStart(o),
			Pool: func(ctx context.Context, t *Target) ([]loadgen.Request, error) {
				n := 100
				if op == "batch" {
					n = batch
				}
				pts := make([][]byte, n)
				for i := range pts {
					pts[i] = make([]byte, 64)
					rand.Read(pts[i]) //nolint:errcheck // crypto/rand.Read does not fail
				}
				if op != "batch" {
					return transitPool(ctx, t, op, pts)
				}
				reqs, err := transitPool(ctx, t, "encrypt", pts[:1])
				if err != nil {
					return nil, err
				}
				items := make([]map[string]string, n)
				for i, pt := range pts {
					items[i] = map[string]string{"plaintext": b64(pt)}
				}
				body, _ := json.Marshal(map[string]any{"batch_input": items})
				reqs[0].Body = body
				return reqs, nil
			},
		}, []string{note}, nil
	}
}

// devStart starts keygate in dev mode (a token service on SQLite).
func devStart(o ScenarioOptions) func(ctx context.Context, env *Env) (*Target, error) {
	return func(ctx context.Context, env *Env) (*Target, error) {
		return StartKeygate(ctx, env, KeygateSpec{Name: cmpOrString(o.SeriesName, "keygate"),
			Env: []string{"KEYGATE_TOKEN_SERVICE_TOKEN_RATE_LIMIT=0", "KEYGATE_TOKEN_SERVICE_ACCESS_TOKEN_TTL=1h"}})
	}
}
