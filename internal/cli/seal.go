package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/term"

	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/operr"
	"github.com/keygate/keygate/internal/rootkey"
)

// Sealing from the command line: set up a passphrase (keyring init), and
// unseal or seal a running node through its admin listener.

func (a *app) keyringInit(_ context.Context, args []string) error {
	fs := a.flags("keygate keyring init", "[--data-dir DIR | --keyring-file FILE] [--passphrase-file FILE]",
		"Sets up passphrase unsealing: derives the root key from a passphrase with Argon2id (64 MiB,\n"+
			"3 passes, 4 lanes) and writes the salt and parameters — no secret — to keyring.json in the\n"+
			"data directory. keygate serve then starts sealed until `keygate unseal` gives the passphrase.\n"+
			"Every node of a fleet needs the same file. The passphrase is read from the terminal (twice,\n"+
			"without echo) or from the first line of standard input or --passphrase-file.")
	dataDir := fs.String("data-dir", "./keygate-data", "the node's data `directory`")
	file := fs.String("keyring-file", "", "where to write the header (default keyring.json in --data-dir)")
	passFile := fs.String("passphrase-file", "", "read the passphrase from this `file` instead of standard input")
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	path := *file
	if path == "" {
		if err := os.MkdirAll(*dataDir, 0o700); err != nil {
			return err
		}
		path = filepath.Join(*dataDir, node.KeyringFile)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(path), node.RootKeyFile)); err == nil && *file == "" {
		return operr.Errorf("%s holds a dev root key (%s): its signing keys are sealed under that key, not a passphrase; use a new data directory", *dataDir, node.RootKeyFile)
	}
	pass, err := a.readSecret("New unseal passphrase: ", *passFile, true)
	if err != nil {
		return err
	}
	defer clear(pass)
	root, err := rootkey.InitPassphrase(path, pass, a.random)
	if err != nil {
		return err
	}
	defer root.Destroy()
	fmt.Fprintf(a.stdout, "Wrote %s (root key %s). Start keygate serve; unseal it with: keygate unseal\n", path, root.ID())
	return nil
}

func (a *app) unseal(ctx context.Context, args []string) error {
	fs := a.flags("keygate unseal", "[--admin URL] [--key-file FILE | --passphrase-file FILE]",
		"Unseals a running node: sends the passphrase (read from the terminal without echo, or the\n"+
			"first line of standard input) or, with --key-file, the root key itself to the admin\n"+
			"listener's POST /v1/sys/unseal, and prints the seal status.")
	adminURL := fs.String("admin", a.adminURL(), "the node's admin listener `URL` (or KEYGATE_ADMIN_URL)")
	var tf adminTLSFlags
	tf.register(fs)
	keyFile := fs.String("key-file", "", "unseal with this root key `file` instead of a passphrase")
	passFile := fs.String("passphrase-file", "", "read the passphrase from this `file` instead of standard input")
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	var body unsealBody
	if *keyFile != "" {
		root, err := rootkey.LoadKeyFile(*keyFile) // checks the file's mode and content
		if err != nil {
			return operr.Errorf("%w", err) // names the file, never its content
		}
		root.Destroy()
		b, err := os.ReadFile(*keyFile)
		if err != nil {
			return err
		}
		body.Key = strings.TrimSpace(string(b))
	} else {
		pass, err := a.readSecret("Unseal passphrase: ", *passFile, false)
		if err != nil {
			return err
		}
		body.Passphrase = string(pass)
		clear(pass)
	}
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(*adminURL, "/")+"/v1/sys/unseal", bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json") // and no Origin: the node refuses both otherwise
	var st map[string]any
	if err := tf.send(req, &st); err != nil { // no admin token: the passphrase is the credential
		return err
	}
	return a.printSealStatus(st)
}

type unsealBody struct {
	Passphrase string `json:"passphrase,omitempty"`
	Key        string `json:"key,omitempty"`
}

func (a *app) seal(ctx context.Context, args []string) error {
	fs := a.flags("keygate seal", "[--admin URL] [--admin-token-file FILE | --passphrase [--passphrase-file FILE]]",
		"Seals a running node at once: it forgets the root key and its private signing key, stops\n"+
			"issuing tokens (503) and keeps verifying them, until `keygate unseal`. It authenticates\n"+
			"with the admin token or, on a node set up with `keygate keyring init`, with --passphrase:\n"+
			"the unseal passphrase (read from the terminal without echo, the first line of standard\n"+
			"input, or --passphrase-file), for a node that has no admin token.")
	var af adminFlags
	af.register(fs)
	usePass := fs.Bool("passphrase", false, "authenticate with the unseal passphrase instead of the admin token")
	passFile := fs.String("passphrase-file", "", "read the passphrase from this `file` (implies --passphrase)")
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	var st map[string]any
	if !*usePass && *passFile == "" {
		// An empty JSON object: the node takes only application/json here.
		if err := af.call(ctx, a, http.MethodPost, "/v1/sys/seal", struct{}{}, &st); err != nil {
			return err
		}
		return a.printSealStatus(st)
	}
	pass, err := a.readSecret("Unseal passphrase: ", *passFile, false)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(unsealBody{Passphrase: string(pass)})
	clear(pass)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(af.url, "/")+"/v1/sys/seal", bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if err := af.tls.send(req, &st); err != nil {
		return err
	}
	return a.printSealStatus(st)
}

func (a *app) printSealStatus(st map[string]any) error {
	out, _ := json.MarshalIndent(st, "", "  ")
	fmt.Fprintf(a.stdout, "%s\n", out)
	return nil
}

// readSecret reads a passphrase: from file when given, from the terminal
// without echo (twice when confirm is set), or else the first line of
// standard input. It refuses an empty one.
func (a *app) readSecret(prompt, file string, confirm bool) ([]byte, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		return nonEmpty(firstLine(b))
	}
	if f, ok := a.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(a.stderr, prompt)
		p, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(a.stderr)
		if err != nil {
			return nil, err
		}
		if confirm {
			fmt.Fprint(a.stderr, "Again: ")
			q, err := term.ReadPassword(int(f.Fd()))
			fmt.Fprintln(a.stderr)
			if err != nil {
				return nil, err
			}
			same := bytes.Equal(p, q)
			clear(q)
			if !same {
				clear(p)
				return nil, operr.New("the passphrases differ")
			}
		}
		return nonEmpty(p)
	}
	line, err := bufio.NewReader(io.LimitReader(a.stdin, 4<<10)).ReadBytes('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return nonEmpty(firstLine(line))
}

func firstLine(b []byte) []byte {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[:i]
	}
	return bytes.TrimSuffix(b, []byte("\r"))
}

func nonEmpty(p []byte) ([]byte, error) {
	if len(p) == 0 {
		return nil, operr.New("empty passphrase")
	}
	return p, nil
}
