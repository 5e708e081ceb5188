package runner

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/keygate/keygate/internal/bench"
	"github.com/keygate/keygate/internal/bench/loadgen"
	"github.com/keygate/keygate/internal/keyfile"
	"github.com/keygate/keygate/jose"
)

// Reproduction is one of the users' before/after tables that 'keygate
// bench reproduce' redraws.
type Reproduction struct {
	Name  string
	Title string
	// Original says what the user reported, in words a reader who never
	// saw the report can follow, and what this run rebuilds of it.
	Original    string
	Connections []int
	build       func(env *Env, o ReproduceOptions) (*Plan, error)
}

// ReproduceOptions tune a reproduction.
type ReproduceOptions struct {
	Connections []int         // nil: the reproduction's own
	Warmup      time.Duration // per step
	Duration    time.Duration // per step
	Tokens      int           // distinct tokens sent in turn (token reproductions); 0: 10,000
	// Timeout bounds each request; 0: loadgen.DefaultTimeout (2 s, as
	// wrk's). A request still unanswered then is a timeout error, so a
	// server that falls behind its connections shows errors, not only a
	// lower rate; that needs a step longer than the timeout.
	Timeout time.Duration
}

// DefaultTokens is ReproduceOptions.Tokens when 0.
const DefaultTokens = 10000

// compareNote is what every reproduction's reader should know first.
const compareNote = " This run rebuilds both designs on this machine, one beside the other: compare the ratio between " +
	"them, not the absolute figures, which depend on the machine."

// Reproductions lists the tables 'keygate bench reproduce' redraws.
var Reproductions = []Reproduction{
	{
		Name:  "gateway-es256",
		Title: "API gateway, ES256 check on every request: naive (golang-jwt-style parsing, PEM key re-parsed per request, no cache) vs keygate forward-auth",
		Original: "A user's API gateway, written in Go with the Gin web framework and the Gorm database library, checked an " +
			"ES256-signed token on every request. Under load it served 42,800 requests a second, falling to 26,300 beyond " +
			"15,000 open connections; 1 request in 100 took longer than 1.24 s, and the CPU was 99% busy. A profile showed " +
			"73% of the CPU in ECDSA signature checks, and the public key was parsed from PEM again for every request (about " +
			"38,000 times a second). Once keys were parsed once and checked tokens cached, it served 43,100 requests a " +
			"second, 1 in 100 took longer than 310 ms, and it allocated 89% less memory." + compareNote,
		Connections: []int{100, 1000, 5000, 10000, 15000},
		build:       gatewayES256,
	},
	{
		Name:  "hs256-middleware",
		Title: "HS256 middleware: naive (golang-jwt-style parsing into a map per request) vs keygate's Go middleware, same net/http server",
		Original: "A user's Go service (the Gin web framework) checked an HS256-signed token in a middleware on every request, " +
			"on an 8-core machine: 12,400 requests a second, 1 request in 100 taking longer than 48 ms. The report gave no " +
			"figures after a fix. Here the naive middleware parses each token into a generic map, as the golang-jwt library's " +
			"usual example does, and keygate's middleware runs on the same HTTP server." + compareNote,
		Connections: []int{100, 1000, 5000, 10000, 15000},
		build:       hs256Middleware,
	},
	{
		Name:  "aes-gcm-decrypt",
		Title: "AES-256-GCM decrypt API: naive (scrypt key derivation and a fresh cipher per request) vs keygate transit decrypt",
		Original: "A user's password manager decrypted secrets through an API that derived the key from a passphrase with " +
			"scrypt and built a new AES-256-GCM cipher for every request: 3,152 requests a second on 32 cores. Once keys " +
			"were derived once and cached (with pooled buffers and the CPU's AES instructions) it served 12,847 requests a " +
			"second, 1 request in 100 taking longer than 6.2 ms. Here keygate's transit decrypt, the Vault-compatible " +
			"API, stands for the fixed design." + compareNote,
		Connections: []int{10, 100, 1000},
		build:       aesGCMDecrypt,
	},
}

// FindReproduction returns the named reproduction.
func FindReproduction(name string) (Reproduction, bool) {
	i := slices.IndexFunc(Reproductions, func(r Reproduction) bool { return r.Name == name })
	if i < 0 {
		return Reproduction{}, false
	}
	return Reproductions[i], true
}

// Plan builds the reproduction's plan in env (keys and configuration are
// written to env.Dir).
func (r Reproduction) Plan(env *Env, o ReproduceOptions) (*Plan, error) {
	p, err := r.build(env, o)
	if err != nil {
		return nil, err
	}
	p.Name, p.Title = r.Name, r.Title
	p.Connections = o.Connections
	if p.Connections == nil {
		p.Connections = r.Connections
	}
	p.Warmup, p.Duration, p.Timeout = o.Warmup, o.Duration, o.Timeout
	p.Notes = append([]string{"What this reproduces: " + r.Original}, p.Notes...)
	return p, nil
}

// sharedTokens mints a token pool once for the series that share it.
func sharedTokens(ts TokenSet) func(ctx context.Context) ([]string, error) {
	var once sync.Once
	var pool []string
	var err error
	return func(ctx context.Context) ([]string, error) {
		once.Do(func() { pool, err = ts.Pool(ctx) })
		return pool, err
	}
}

// bearerPool sends each token of tokens in turn to base+path.
func bearerPool(ctx context.Context, tokens func(context.Context) ([]string, error), base, path string) ([]loadgen.Request, error) {
	toks, err := tokens(ctx)
	if err != nil {
		return nil, err
	}
	reqs := make([]loadgen.Request, len(toks))
	for i, tok := range toks {
		reqs[i] = loadgen.Request{URL: base + path, Header: []loadgen.Header{{Name: "Authorization", Value: "Bearer " + tok}}}
	}
	return reqs, nil
}

func tokensNote(n int) string {
	return fmt.Sprintf("Both sides get the same %d distinct tokens (realistic claims, about 300 bytes), each sent in turn, "+
		"as clients reuse their token over many requests: keygate's verified-token cache holds them all after the first pass, "+
		"the naive side verifies every request. Set --tokens to change how many.", n)
}

func gatewayES256(env *Env, o ReproduceOptions) (*Plan, error) {
	priv, err := keyfile.Generate(jose.ES256, 0)
	if err != nil {
		return nil, err
	}
	// keygate names a PEM key by its thumbprint (RFC 7638): tokens carry it as their kid.
	k, err := jose.NewKey(jose.ES256, "", priv.Public())
	if err != nil {
		return nil, err
	}
	signer, err := jose.NewSigner(jose.ES256, k.Thumbprint(), priv)
	if err != nil {
		return nil, err
	}
	pub, err := jose.MarshalPublicPEM(priv.Public())
	if err != nil {
		return nil, err
	}
	keyPath := filepath.Join(env.Dir, "issuer-es256.pem")
	if err := os.WriteFile(keyPath, pub, 0o644); err != nil {
		return nil, err
	}
	n := cmpOr(o.Tokens, DefaultTokens)
	tokens := sharedTokens(TokenSet{Signer: signer, Distinct: n})
	config := fmt.Sprintf("issuers:\n  - issuer: %s\n    key_files: [%s]\n    algorithms: [ES256]\n    audiences: [%s]\n",
		quote(bench.DefaultIssuer), quote(keyPath), quote(bench.DefaultAudience))
	return &Plan{
		Series: []Series{
			{Name: "naive", Start: func(ctx context.Context, env *Env) (*Target, error) {
				return StartBenchServer(ctx, env, "naive", bench.ModeNaiveES256, keyPath)
			}, Pool: func(ctx context.Context, t *Target) ([]loadgen.Request, error) {
				return bearerPool(ctx, tokens, t.Base, "/api/orders")
			}},
			{Name: "keygate", Start: func(ctx context.Context, env *Env) (*Target, error) {
				return StartKeygate(ctx, env, KeygateSpec{Name: "keygate", Config: config})
			}, Pool: func(ctx context.Context, t *Target) ([]loadgen.Request, error) {
				return bearerPool(ctx, tokens, t.Base, "/auth")
			}},
		},
		Notes: []string{tokensNote(n), "naive: 'keygate bench server --mode naive-es256'; keygate: 'keygate serve' with one " +
			"issuer (key_files, ES256), answering GET /auth as nginx's auth_request would call it."},
	}, nil
}

func hs256Middleware(env *Env, o ReproduceOptions) (*Plan, error) {
	secret, err := keyfile.GenerateSecret(jose.HS256)
	if err != nil {
		return nil, err
	}
	signer, err := jose.NewSigner(jose.HS256, "", secret)
	if err != nil {
		return nil, err
	}
	keyPath := filepath.Join(env.Dir, "hs256.secret")
	if err := os.WriteFile(keyPath, secret, 0o600); err != nil {
		return nil, err
	}
	n := cmpOr(o.Tokens, DefaultTokens)
	tokens := sharedTokens(TokenSet{Signer: signer, Distinct: n})
	series := func(name, mode string) Series {
		return Series{Name: name, Start: func(ctx context.Context, env *Env) (*Target, error) {
			return StartBenchServer(ctx, env, name, mode, keyPath)
		}, Pool: func(ctx context.Context, t *Target) ([]loadgen.Request, error) {
			return bearerPool(ctx, tokens, t.Base, "/api/orders")
		}}
	}
	return &Plan{
		Series: []Series{series("naive", bench.ModeNaiveHS256), series("keygate", bench.ModeMiddlewareHS256)},
		Notes: []string{tokensNote(n), "Both are 'keygate bench server' on the same net/http settings: " +
			"--mode naive-hs256 (the steps of golang-jwt v5 ParseWithClaims into MapClaims) and --mode middleware-hs256 " +
			"(package middleware's Require)."},
	}, nil
}

// decryptItems is how many distinct ciphertexts the decrypt reproduction
// sends in turn.
const decryptItems = 100

func aesGCMDecrypt(env *Env, _ ReproduceOptions) (*Plan, error) {
	pass := make([]byte, 24)
	rand.Read(pass) //nolint:errcheck // crypto/rand.Read does not fail
	passPath := filepath.Join(env.Dir, "naive.passphrase")
	if err := os.WriteFile(passPath, []byte(fmt.Sprintf("%x", pass)), 0o600); err != nil {
		return nil, err
	}
	plaintexts := make([][]byte, decryptItems)
	for i := range plaintexts {
		plaintexts[i] = make([]byte, 64)
		rand.Read(plaintexts[i]) //nolint:errcheck // crypto/rand.Read does not fail
	}
	return &Plan{
		Series: []Series{
			{Name: "naive", Start: func(ctx context.Context, env *Env) (*Target, error) {
				return StartBenchServer(ctx, env, "naive", bench.ModeNaiveDecrypt, passPath)
			}, Pool: func(ctx context.Context, t *Target) ([]loadgen.Request, error) {
				p, err := os.ReadFile(passPath)
				if err != nil {
					return nil, err
				}
				var reqs []loadgen.Request
				for _, pt := range plaintexts {
					body, err := bench.NaiveSeal(p, pt)
					if err != nil {
						return nil, err
					}
					reqs = append(reqs, jsonPost(t.Base+"/decrypt", nil, body))
				}
				return reqs, nil
			}},
			{Name: "keygate", Start: func(ctx context.Context, env *Env) (*Target, error) {
				return StartKeygate(ctx, env, KeygateSpec{Name: "keygate", Env: []string{"KEYGATE_TOKEN_SERVICE_ACCESS_TOKEN_TTL=1h"}})
			}, Pool: func(ctx context.Context, t *Target) ([]loadgen.Request, error) {
				return transitPool(ctx, t, "decrypt", plaintexts)
			}},
		},
		Notes: []string{
			fmt.Sprintf("Both sides decrypt the same %d distinct 64-byte plaintexts' ciphertexts in turn.", decryptItems),
			fmt.Sprintf("naive: 'keygate bench server --mode naive-aes-gcm-decrypt': scrypt (N=%d, r=%d, p=%d) and a new "+
				"AES-GCM per request, no key cache. The report does not give its KDF cost; N is chosen so that one core's "+
				"naive rate is about the report's per core (3,152 QPS on 32 cores, about 99/s per core).", bench.NaiveScrypt.N, bench.NaiveScrypt.R, bench.NaiveScrypt.P),
			"keygate: 'keygate serve --dev' (audit log on, as the default), POST /v1/transit/decrypt/bench with a " +
				"client_credentials token in X-Vault-Token, as Vault's clients send it.",
		},
	}, nil
}

// transitPool prepares a transit key "bench" on a dev-mode keygate and
// returns requests for op ("encrypt" or "decrypt") of each plaintext.
func transitPool(ctx context.Context, t *Target, op string, plaintexts [][]byte) ([]loadgen.Request, error) {
	c, err := CreateClient(ctx, t, "bench", "transit:admin", "transit:encrypt:bench", "transit:decrypt:bench")
	if err != nil {
		return nil, err
	}
	tok, err := AccessToken(ctx, t, c)
	if err != nil {
		return nil, err
	}
	if err := VaultCall(ctx, t, tok, http.MethodPost, "/v1/transit/keys/bench", nil, nil); err != nil {
		return nil, err
	}
	hdr := []loadgen.Header{{Name: "X-Vault-Token", Value: tok}}
	var reqs []loadgen.Request
	for _, pt := range plaintexts {
		in := map[string]string{"plaintext": b64(pt)}
		if op == "decrypt" {
			var out struct {
				Data struct {
					Ciphertext string `json:"ciphertext"`
				} `json:"data"`
			}
			if err := VaultCall(ctx, t, tok, http.MethodPost, "/v1/transit/encrypt/bench", in, &out); err != nil {
				return nil, err
			}
			if !strings.HasPrefix(out.Data.Ciphertext, "vault:v") {
				return nil, fmt.Errorf("set-up: encrypt answered no ciphertext")
			}
			in = map[string]string{"ciphertext": out.Data.Ciphertext}
		}
		body, _ := json.Marshal(in)
		reqs = append(reqs, jsonPost(t.Base+"/v1/transit/"+op+"/bench", hdr, body))
	}
	return reqs, nil
}

func jsonPost(url string, hdr []loadgen.Header, body []byte) loadgen.Request {
	return loadgen.Request{Method: http.MethodPost, URL: url, Body: body,
		Header: append(slices.Clone(hdr), loadgen.Header{Name: "Content-Type", Value: "application/json"})}
}

func cmpOr(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// quote makes s a YAML double-quoted scalar.
func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
