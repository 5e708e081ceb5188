package cli

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/keyfile"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/rootkey"
)

// operatorInit is keygate operator init: the one explicit step that gives
// a fleet on a shared store its root key, as vault operator init does.
// The credentials are generated here, never taken from anyone, and shown
// or written once.
func (a *app) operatorInit(ctx context.Context, args []string) error {
	fs := a.flags("keygate operator init", "--database-url URL (--out DIR | --print) [--signing-alg ALG]",
		"Initializes an empty shared store for a fleet whose nodes start sealed (no keyring.json):\n"+
			"generates a root key and an admin token, and seals the first signing key under the root key\n"+
			"in the store. Nodes then unseal with that root key and no other (keygate unseal --key-file),\n"+
			"or start with it (token_service.root_key_file). A store that already holds signing keys is left alone.\n"+
			"With --out the root key and admin token are written to DIR/root.key and DIR/admin.token\n"+
			"(0600, never overwritten); with --print they are printed once as JSON, for a secret store.")
	dbURL := fs.String("database-url", "", "PostgreSQL `URL` of the fleet's store (or KEYGATE_DATABASE_URL)")
	out := fs.String("out", "", "write root.key and admin.token into this `directory` (created 0700 if missing)")
	printOut := fs.Bool("print", false, "print the root key and admin token as JSON instead of writing them")
	alg := fs.String("signing-alg", "ES256", "`algorithm` of the first signing key: ES256, ES384, ES512, RS256, PS256 or EdDSA")
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	if *dbURL == "" {
		*dbURL = a.lookupEnv("KEYGATE_DATABASE_URL")
	}
	switch {
	case *dbURL == "":
		return usageErrorf(fs.Name(), "--database-url (or KEYGATE_DATABASE_URL) is required: init is for a fleet's shared store")
	case (*out == "") == !*printOut:
		return usageErrorf(fs.Name(), "give exactly one of --out DIR and --print")
	case !slices.Contains(config.SigningAlgs, *alg):
		return usageErrorf(fs.Name(), "--signing-alg %q: want one of ES256, ES384, ES512, RS256, PS256, EdDSA", *alg)
	}

	keyText, root, err := newRootKeyText(a.random)
	if err != nil {
		return err
	}
	defer clear(keyText)
	defer root.Destroy()
	token, err := node.NewAdminToken(a.random)
	if err != nil {
		return err
	}
	// Files first, so that a store is never initialized under a key that
	// was not kept; they are removed again if the store refuses.
	var written []string
	if *out != "" {
		if err := os.MkdirAll(*out, 0o700); err != nil {
			return err
		}
		for _, f := range []struct {
			name string
			data []byte
		}{{node.RootKeyFile, append(keyText, '\n')}, {node.AdminTokenFile, []byte(token + "\n")}} {
			path := filepath.Join(*out, f.name)
			if err := keyfile.WriteNew(path, f.data); err != nil {
				removeAll(written)
				return err
			}
			written = append(written, path)
		}
	}
	kid, err := node.Init(ctx, node.Config{TokenService: config.TokenService{DatabaseURL: *dbURL, SigningAlg: *alg},
		Rand: a.random, Now: a.now}, root)
	if err != nil {
		removeAll(written)
		return err
	}
	if *printOut {
		return printJSON(a.stdout, map[string]string{
			"root_key": string(keyText), "root_key_id": root.ID().String(),
			"admin_token": token, "signing_kid": kid,
		})
	}
	// The command must be one serve accepts: a node on a shared database
	// needs the fleet's issuer (checkTokenService). The URL is shown with
	// its password redacted, which the operator puts back.
	shownURL := redactURL(*dbURL)
	note := ""
	if shownURL != *dbURL {
		note = " (its password redacted: put it back, or use token_service.database_url_file)"
	}
	fmt.Fprintf(a.stdout, "Initialized the store: signing key %s sealed under root key %s.\n"+
		"Wrote %s and %s (keep them in a secret store).\n"+
		"Start every node with the fleet's issuer, the URL clients reach it at, the same on every node%s:\n"+
		"  KEYGATE_DATABASE_URL=%s KEYGATE_TOKEN_SERVICE_ISSUER=%s KEYGATE_TOKEN_SERVICE_ADMIN_TOKEN_FILE=%s keygate serve\n"+
		"(or token_service.database_url, issuer and admin_token_file in its configuration file)\n"+
		"and unseal each one with: keygate unseal --key-file %s\n",
		kid, root.ID(), written[0], written[1], note, shellQuote(shownURL), exampleIssuer, shellQuote(written[1]), shellQuote(written[0]))
	return nil
}

// exampleIssuer stands in printed commands for the fleet's issuer URL.
const exampleIssuer = "https://keygate.example.com"

// shellQuote quotes s for a POSIX shell when it holds anything but
// characters that need no quoting.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:@,+=%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// newRootKeyText draws a root key and returns it in base64, as a key file
// holds it, along with the parsed key.
func newRootKeyText(rand io.Reader) ([]byte, rootkey.Key, error) {
	raw := make([]byte, rootkey.KeySize)
	defer clear(raw)
	if _, err := io.ReadFull(rand, raw); err != nil {
		return nil, rootkey.Key{}, fmt.Errorf("random source: %w", err)
	}
	text := base64.StdEncoding.AppendEncode(nil, raw)
	root, err := rootkey.ParseKey(text)
	if err != nil {
		clear(text)
		return nil, rootkey.Key{}, err
	}
	return text, root, nil
}

func removeAll(paths []string) {
	for _, p := range paths {
		os.Remove(p)
	}
}

func printJSON(w io.Writer, v any) error {
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", out)
	return err
}
