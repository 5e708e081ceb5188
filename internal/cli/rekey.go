package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/keygate/keygate/internal/operr"
	"github.com/keygate/keygate/internal/rootkey"
)

// rekeyStatus is the answer of GET and POST /v1/sys/rekey.
type rekeyStatus struct {
	State      string   `json:"state"`
	ID         string   `json:"id"`
	OldKeyID   string   `json:"old_key_id"`
	NewKeyID   string   `json:"new_key_id"`
	Done       int64    `json:"done"`
	Total      int64    `json:"total"`
	Rate       int      `json:"rate"`
	Worker     string   `json:"worker"`
	Failed     string   `json:"failed"`
	StartedAt  string   `json:"started_at"`
	FinishedAt string   `json:"finished_at"`
	Holds      []string `json:"holds"`
}

func (a *app) operatorRekey(ctx context.Context, args []string) error {
	fs := a.flags("keygate operator rekey",
		"(--generate FILE | --new-key-file FILE | --new-passphrase [--new-passphrase-file FILE]) (--current-key-file FILE | --current-passphrase) [--rate N] [--wait] [flags]\n       keygate operator rekey --status [--wait] [flags]",
		"Rotates the root key of a running node and of every node sharing its store, without\n"+
			"downtime: the new key becomes current on every node within seconds, then the signing keys\n"+
			"and the tenants' data keys are rewrapped under it in the background (resumed by any node\n"+
			"after a crash). Until the rotation is done either key unseals the nodes; afterwards only\n"+
			"the new one. Give the new root key in a file (--new-key-file), or have one generated\n"+
			"into a new file (--generate; mode 0600), for nodes whose root key is a file or variable;\n"+
			"give a new passphrase for nodes unsealed by passphrase (each node's keyring.json is\n"+
			"replaced). The current key is required too (--current-key-file or --current-passphrase):\n"+
			"the admin token alone cannot choose a root key; only a dev node reads its own. Replace\n"+
			"every node's key file or variable with the new key before that node's next start.\n"+
			"--status prints the rotation's progress; --wait follows it until it is done.")
	var af adminFlags
	af.register(fs)
	generate := fs.String("generate", "", "generate the new root key into this new `file`")
	newKeyFile := fs.String("new-key-file", "", "the new root key's `file`")
	newPass := fs.Bool("new-passphrase", false, "rotate to a new passphrase (read from the terminal twice, or standard input)")
	newPassFile := fs.String("new-passphrase-file", "", "read the new passphrase from this `file` (implies --new-passphrase)")
	curKeyFile := fs.String("current-key-file", "", "the current root key's `file`")
	curPass := fs.Bool("current-passphrase", false, "give the current passphrase (asked after the new one)")
	rate := fs.Int("rate", 0, "rewrap at most `N` records a second (0: no bound)")
	status := fs.Bool("status", false, "print the rotation's progress and exit")
	wait := fs.Bool("wait", false, "follow the rotation until it is done")
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	if *status {
		return a.rekeyFollow(ctx, &af, *wait)
	}
	body, err := a.rekeyBody(*generate, *newKeyFile, *newPass || *newPassFile != "", *newPassFile, *curKeyFile, *curPass)
	if err != nil {
		return err
	}
	body["rate"] = *rate
	var st rekeyStatus
	err = af.call(ctx, a, http.MethodPost, "/v1/sys/rekey", body, &st)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "root key rotation %s started: %s -> %s\n", st.ID, st.OldKeyID, st.NewKeyID)
	if *generate != "" {
		fmt.Fprintf(a.stdout, "the new root key is in %s: put it in place of every node's root key before its next start\n", *generate)
	}
	return a.rekeyFollow(ctx, &af, *wait)
}

// rekeyBody is the request's body: the new key or passphrase, and the
// current one if given.
func (a *app) rekeyBody(generate, newKeyFile string, newPass bool, newPassFile, curKeyFile string, curPass bool) (map[string]any, error) {
	given := 0
	for _, set := range []bool{generate != "", newKeyFile != "", newPass} {
		if set {
			given++
		}
	}
	if given != 1 {
		return nil, usageErrorf("keygate operator rekey", "give one of --generate, --new-key-file and --new-passphrase (or --status)")
	}
	body := map[string]any{}
	switch {
	case generate != "":
		if err := rootkey.GenerateKeyFile(generate, a.random); errors.Is(err, fs.ErrExist) {
			return nil, operr.Errorf("--generate %s: the file exists; name a new file", generate)
		} else if err != nil {
			return nil, operr.Errorf("--generate: %w", err)
		}
		newKeyFile = generate
		fallthrough
	case newKeyFile != "":
		text, err := readKeyFileText(newKeyFile)
		if err != nil {
			return nil, err
		}
		body["key"] = text
	default:
		pass, err := a.readSecret("New unseal passphrase: ", newPassFile, newPassFile == "")
		if err != nil {
			return nil, err
		}
		body["passphrase"] = string(pass)
		clear(pass)
	}
	if curKeyFile != "" {
		text, err := readKeyFileText(curKeyFile)
		if err != nil {
			return nil, err
		}
		body["current_key"] = text
	}
	if curPass {
		pass, err := a.readSecret("Current unseal passphrase: ", "", false)
		if err != nil {
			return nil, err
		}
		body["current_passphrase"] = string(pass)
		clear(pass)
	}
	return body, nil
}

// readKeyFileText checks a root key file (mode and content) and returns
// its text as the node takes it.
func readKeyFileText(path string) (string, error) {
	root, err := rootkey.LoadKeyFile(path)
	if err != nil {
		return "", operr.Errorf("%w", err) // names the file, never its content
	}
	root.Destroy()
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// rekeyFollow prints the rotation's status, and with wait, again every
// second until it is done.
func (a *app) rekeyFollow(ctx context.Context, af *adminFlags, wait bool) error {
	return a.follow(ctx, wait, func() (string, bool, error) {
		var st rekeyStatus
		if err := af.call(ctx, a, http.MethodGet, "/v1/sys/rekey", nil, &st); err != nil {
			return "", false, err
		}
		line := fmt.Sprintf("state=%s", st.State)
		if st.State != "none" {
			line += fmt.Sprintf(" id=%s old=%s new=%s rewrapped=%d/%d", st.ID, st.OldKeyID, st.NewKeyID, st.Done, st.Total)
			line += progressTail(st.Failed, st.FinishedAt)
		}
		return line, st.State == "rewrapping", nil
	})
}

// follow prints the line status returns, and while wait and running,
// again every second, each line once.
func (a *app) follow(ctx context.Context, wait bool, status func() (line string, running bool, err error)) error {
	last := ""
	for {
		line, running, err := status()
		if err != nil {
			return err
		}
		if line != last {
			fmt.Fprintln(a.stdout, line)
			last = line
		}
		if !wait || !running {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// progressTail is the end of a rotation's status line: why its last pass
// failed, and when it finished, if either.
func progressTail(failed, finished string) string {
	var s string
	if failed != "" {
		s += " failed=" + failed
	}
	if finished != "" {
		s += " finished=" + finished
	}
	return s
}
