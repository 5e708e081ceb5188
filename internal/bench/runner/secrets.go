package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keygate/keygate/internal/bench"
	"github.com/keygate/keygate/internal/bench/loadgen"
	"github.com/keygate/keygate/internal/secrets"
)

// secretPaths is how many distinct paths the secret scenarios use.
const secretPaths = 100

// secretSeries reads (or writes) 1 KiB secrets at secretPaths paths of a
// dev-mode keygate, the audit log on as it has it, on SQLite or on the
// PostgreSQL of o.DatabaseURL (a schema of its own, dropped at the end).
func secretSeries(write bool) func(*Env, ScenarioOptions) (Series, []string, error) {
	return func(_ *Env, o ScenarioOptions) (Series, []string, error) {
		notes := []string{fmt.Sprintf("%d paths under bench/, each a 1 KiB secret ({\"value\": 1,000 random characters}), read in turn "+
			"with a client_credentials token in X-Vault-Token; the audit log as the target has it (on in a started dev-mode keygate).", secretPaths)}
		if write {
			notes[0] = fmt.Sprintf("A new version of one of %d paths under bench/ per request, each a 1 KiB secret; max_versions "+
				"keeps the newest 10 of each path.", secretPaths)
		}
		notes = append(notes, storeNote(o))
		switch {
		case o.NoCache:
			notes = append(notes, "The started keygate runs with its secret read cache off (secrets.cache_bytes -1): every read queries the store.")
		case o.DatabaseURL != "":
			notes = append(notes, "The started keygate runs with its secret read cache on (secrets.cache_bytes 32 MiB), which a node on a shared store leaves off unless sized.")
		}
		name := cmpOrString(o.SeriesName, "keygate")
		return Series{
			Start: func(ctx context.Context, env *Env) (*Target, error) {
				vars := []string{"KEYGATE_TOKEN_SERVICE_TOKEN_RATE_LIMIT=0", "KEYGATE_TOKEN_SERVICE_ACCESS_TOKEN_TTL=1h"}
				switch {
				case o.NoCache:
					vars = append(vars, "KEYGATE_SECRETS_CACHE_BYTES=-1")
				case o.DatabaseURL != "":
					// On a shared store the cache is off unless sized.
					vars = append(vars, fmt.Sprintf("KEYGATE_SECRETS_CACHE_BYTES=%d", secrets.DefaultCacheBytes))
				}
				var drop func()
				if o.DatabaseURL != "" {
					u, d, err := freshSchema(ctx, o.DatabaseURL)
					if err != nil {
						return nil, err
					}
					drop = d
					// A node on a shared database names its issuer.
					vars = append(vars, "KEYGATE_TOKEN_SERVICE_DATABASE_URL="+u, "KEYGATE_TOKEN_SERVICE_ISSUER=https://keygate.bench.invalid")
				}
				t, err := StartKeygate(ctx, env, KeygateSpec{Name: name, Env: vars})
				return dropOnStop(t, err, drop)
			},
			Pool: func(ctx context.Context, t *Target) ([]loadgen.Request, error) {
				return secretPool(ctx, t, write)
			},
		}, notes, nil
	}
}

func storeNote(o ScenarioOptions) string {
	if o.DatabaseURL != "" {
		return "Store: PostgreSQL at " + redactURL(o.DatabaseURL) + ", a fresh schema per started process, dropped at the end."
	}
	return "Store: SQLite in the started process's data directory (WAL, synchronous=FULL)."
}

// redactURL is a database URL without its password.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(a URL that does not parse)"
	}
	return u.Redacted()
}

func secretPool(ctx context.Context, t *Target, write bool) ([]loadgen.Request, error) {
	c, err := CreateClient(ctx, t, "bench-secrets", "secrets:read:bench/*", "secrets:write:bench/*")
	if err != nil {
		return nil, err
	}
	tok, err := AccessToken(ctx, t, c)
	if err != nil {
		return nil, err
	}
	return secretRequests(t.Base, tok, write, func(path string, body any) error {
		return VaultCall(ctx, t, tok, http.MethodPost, path, body, nil)
	})
}

// secretRequests makes the pool of the secret scenarios: one request per
// path, with the token in X-Vault-Token; put stores each path's first
// version (nil: nothing to store first).
func secretRequests(base, tok string, write bool, put func(path string, body any) error) ([]loadgen.Request, error) {
	hdr := []loadgen.Header{{Name: "X-Vault-Token", Value: tok}}
	var reqs []loadgen.Request
	for i := range secretPaths {
		v := make([]byte, 750) // 1,000 base64 characters
		rand.Read(v)           //nolint:errcheck // crypto/rand.Read does not fail
		body := map[string]any{"data": map[string]string{"value": b64(v)}}
		path := fmt.Sprintf("/v1/secret/data/bench/%d", i)
		if put != nil {
			if err := put(path, body); err != nil {
				return nil, err
			}
		}
		if write {
			b, _ := json.Marshal(body)
			reqs = append(reqs, jsonPost(base+path, hdr, b))
		} else {
			reqs = append(reqs, loadgen.Request{URL: base + path, Header: hdr})
		}
	}
	return reqs, nil
}

// referenceTokenBytes is the length of the reference's X-Vault-Token: about
// a keygate access token's, so that requests are of the same size.
const referenceTokenBytes = 600

// References are the reference series some scenarios are compared with
// (--reference): the least a server on the same net/http settings does for
// the same request.
var references = map[string]func(env *Env, o ScenarioOptions) (Series, []string, error){
	"secret-read":  secretReference(false),
	"secret-write": secretReference(true),
}

// HasReference reports whether the scenario has a reference series.
func (s Scenario) HasReference() bool { return references[s.Name] != nil }

// Reference returns the scenario's reference series, named "reference".
func (s Scenario) Reference(env *Env, o ScenarioOptions) (Series, []string, error) {
	f := references[s.Name]
	if f == nil {
		return Series{}, nil, fmt.Errorf("scenario %s has no reference", s.Name)
	}
	ser, notes, err := f(env, o)
	ser.Name = "reference"
	return ser, notes, err
}

// secretReference is 'keygate bench server --mode kv-read' (one AES-256-GCM
// open of a 1 KiB value held in memory per request) or kv-write (each
// request's body inserted as a row of its own, with the durability of
// keygate's write, into the same kind of store).
func secretReference(write bool) func(*Env, ScenarioOptions) (Series, []string, error) {
	return func(_ *Env, o ScenarioOptions) (Series, []string, error) {
		if o.Target != "" {
			return Series{}, nil, errors.New("the reference is started here: it goes with a keygate this command starts, not --target")
		}
		note := "reference: 'keygate bench server --mode kv-read': one AES-256-GCM open (cached cipher) of a 1 KiB JSON value " +
			"held in memory per request, answered as it is; no token checked, no store, no audit."
		if write {
			note = "reference: 'keygate bench server --mode kv-write': each request's body inserted as a row of its own, " +
				"in a transaction of its own, into the same kind of store as keygate's (SQLite: the same pragmas, WAL, " +
				"synchronous=FULL; PostgreSQL: the same server); no token checked, no audit."
		}
		return Series{
			Start: func(ctx context.Context, env *Env) (*Target, error) {
				if !write {
					return startBenchServer(ctx, env, "reference", bench.ModeKVRead)
				}
				store := filepath.Join(env.Dir, "reference-data", "kv.db")
				var drop func()
				if o.DatabaseURL != "" {
					u, d, err := freshSchema(ctx, o.DatabaseURL)
					if err != nil {
						return nil, err
					}
					store, drop = u, d
				}
				t, err := startBenchServer(ctx, env, "reference", bench.ModeKVWrite, "--store", store)
				return dropOnStop(t, err, drop)
			},
			Pool: func(_ context.Context, t *Target) ([]loadgen.Request, error) {
				tok := make([]byte, referenceTokenBytes/2)
				rand.Read(tok) //nolint:errcheck // crypto/rand.Read does not fail
				return secretRequests(t.Base, hex.EncodeToString(tok), write, nil)
			},
		}, []string{note}, nil
	}
}

// freshSchema creates a schema of its own on the PostgreSQL server at base
// and returns base with search_path set to it, and a function that drops
// it.
func freshSchema(ctx context.Context, base string) (string, func(), error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", nil, errors.New("--database-url must be a postgres:// URL")
	}
	var b [6]byte
	rand.Read(b[:]) //nolint:errcheck // crypto/rand.Read does not fail
	schema := "kgbench_" + hex.EncodeToString(b[:])
	exec := func(ctx context.Context, sql string) error {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			return fmt.Errorf("PostgreSQL at %s: %w", u.Redacted(), err)
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return "", nil, err
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), func() {
		exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") //nolint:errcheck // best effort at the end of a run
	}, nil
}

// dropOnStop gives a started target the fresh schema's drop to run when it
// stops, or runs it at once when the target did not start (drop may be nil).
func dropOnStop(t *Target, err error, drop func()) (*Target, error) {
	if err != nil {
		if drop != nil {
			drop()
		}
		return nil, err
	}
	t.onStop = drop
	return t, nil
}
