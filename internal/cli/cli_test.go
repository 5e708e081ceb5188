package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/operr"
	"github.com/keygate/keygate/internal/testnet"
)

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer = testnet.SyncBuffer

type result struct {
	code           int
	stdout, stderr string
}

// harness runs the command line in a temporary directory with a clock the
// test sets.
type harness struct {
	t     *testing.T
	dir   string
	now   time.Time
	stdin string
	env   []string // the environment the commands see (KEYGATE_*)
}

func newHarness(t *testing.T) *harness {
	return &harness{t: t, dir: t.TempDir(), now: time.Now()}
}

func (h *harness) path(name string) string { return filepath.Join(h.dir, name) }

func (h *harness) app(stdout, stderr *syncBuffer) *app {
	now := h.now
	return &app{
		stdin:  strings.NewReader(h.stdin),
		stdout: stdout,
		stderr: stderr,
		now:    func() time.Time { return now },
		random: rand.Reader,
		env:    h.env,
	}
}

func (h *harness) run(args ...string) result {
	h.t.Helper()
	var stdout, stderr syncBuffer
	code := h.app(&stdout, &stderr).main(context.Background(), args)
	return result{code, stdout.String(), stderr.String()}
}

// must runs args and fails the test unless they exit 0.
func (h *harness) must(args ...string) string {
	h.t.Helper()
	r := h.run(args...)
	if r.code != ExitOK {
		h.t.Fatalf("keygate %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

func (h *harness) write(name string, data []byte) string {
	h.t.Helper()
	p := h.path(name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		h.t.Fatal(err)
	}
	return p
}

// expect checks an exit code and that stdout and stderr contain the given
// strings.
func expect(t *testing.T, r result, code int, stdout, stderr string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, stdout) {
		t.Errorf("stdout lacks %q:\n%s", stdout, r.stdout)
	}
	if !strings.Contains(r.stderr, stderr) {
		t.Errorf("stderr lacks %q:\n%s", stderr, r.stderr)
	}
}

func TestMainUsesWriters(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := Main(context.Background(), []string{"version"}, &stdout, &stderr); code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.HasPrefix(stdout.String(), "keygate ") {
		t.Errorf("stdout %q", stdout.String())
	}
}

func TestDispatch(t *testing.T) {
	tests := []struct {
		args           []string
		code           int
		stdout, stderr string
	}{
		{nil, ExitUsage, "", "no command given"},
		{[]string{"help"}, ExitOK, "token verify", ""},
		{[]string{"-h"}, ExitOK, "bench sign", ""},
		{[]string{"--help"}, ExitOK, "Run a node:\n  serve ", ""},
		{[]string{"frobnicate"}, ExitUsage, "", `unknown command "frobnicate"`},
		{[]string{"token"}, ExitUsage, "", "no command given"},
		{[]string{"token", "frobnicate"}, ExitUsage, "", `unknown command "frobnicate"`},
		{[]string{"help", "token"}, ExitOK, "Usage: keygate token --client ID", ""},
		{[]string{"help", "token"}, ExitOK, "keygate token <command>", ""},
		{[]string{"token", "-h"}, ExitOK, "Usage: keygate token --client ID", ""},
		{[]string{"token", "--help"}, ExitOK, "  sign ", ""},
		{[]string{"help"}, ExitOK, "  token               get an access token", ""}, // names padded to the longest, "tenants rotate-key"
		{[]string{"help", "token", "verify"}, ExitOK, "Usage: keygate token verify", ""},
		{[]string{"help", "nope"}, ExitUsage, "", `unknown command "nope"`},
		{[]string{"token", "sign", "--nope"}, ExitUsage, "", "flag provided but not defined: -nope"},
		{[]string{"version", "extra"}, ExitUsage, "", `unexpected argument "extra"`},
		{[]string{"keys", "thumbprint"}, ExitUsage, "", "too few arguments"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			expect(t, newHarness(t).run(tt.args...), tt.code, tt.stdout, tt.stderr)
		})
	}
}

// TestEveryCommandHasHelp runs "-h" on every leaf command.
func TestEveryCommandHasHelp(t *testing.T) {
	var walk func(path string, cmds []*command)
	walk = func(path string, cmds []*command) {
		for _, c := range cmds {
			p := strings.TrimSpace(path + " " + c.name)
			if c.subs != nil {
				walk(p, c.subs)
				continue
			}
			t.Run(p, func(t *testing.T) {
				args := append(strings.Fields(p), "-h")
				r := newHarness(t).run(args...)
				expect(t, r, ExitOK, "Usage: keygate "+p, "")
				if r.stderr != "" {
					t.Errorf("help wrote to stderr: %s", r.stderr)
				}
			})
		}
	}
	walk("", commands())
}

// TestHelpGroups: keygate --help lists every top-level command under a
// heading, each heading once, and the load-testing commands together
// under their own, apart from the product's.
func TestHelpGroups(t *testing.T) {
	seen := map[string]bool{}
	last := ""
	for _, c := range commands() {
		if c.group == "" {
			t.Errorf("command %q has no group", c.name)
		}
		if c.group != last && seen[c.group] {
			t.Errorf("group %q is split: %q is listed apart from the rest", c.group, c.name)
		}
		seen[c.group], last = true, c.group
	}
	out := newHarness(t).must("help")
	i := strings.Index(out, groupMeasure+":\n")
	if i < 0 {
		t.Fatalf("no %q heading in:\n%s", groupMeasure, out)
	}
	if strings.Contains(out[:i], "  bench ") || !strings.Contains(out[i:], "  bench load ") {
		t.Errorf("bench commands are not all under %q:\n%s", groupMeasure, out)
	}
}

func TestVersion(t *testing.T) {
	h := newHarness(t)
	out := h.must("version")
	if !strings.HasPrefix(out, "keygate ") || !strings.Contains(out, runtime.Version()) {
		t.Errorf("version output %q", out)
	}
	old := Version
	t.Cleanup(func() { Version = old })
	Version = "v1.2.3-test"
	if out := h.must("version"); !strings.HasPrefix(out, "keygate v1.2.3-test\n") {
		t.Errorf("ldflags version not used: %q", out)
	}
	for _, flag := range []string{"--version", "-version"} {
		if out := h.must(flag); !strings.HasPrefix(out, "keygate v1.2.3-test\n") {
			t.Errorf("keygate %s: %q", flag, out)
		}
	}
	if got := vcsVersion([]debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}); got != "devel-0123456789ab-dirty" {
		t.Errorf("vcsVersion: %q", got)
	}
}

func TestInterspersedArgs(t *testing.T) {
	fs := newHarness(t).app(&syncBuffer{}, &syncBuffer{}).flags("x", "", "")
	a := fs.String("a", "", "")
	b := fs.Bool("b", false, "")
	pos, err := fs.parse([]string{"one", "-a", "v", "two", "-b", "--", "-three"}, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	if *a != "v" || !*b || strings.Join(pos, " ") != "one two -three" {
		t.Errorf("a=%q b=%v pos=%q", *a, *b, pos)
	}
}

func TestOperatorMessage(t *testing.T) {
	cause := errors.New("dial tcp 10.0.0.7:5432: connect: connection refused")
	hidden := operr.Wrap(cause, "the store does not answer")
	for _, tt := range []struct {
		name string
		err  error
		want string
	}{
		{"a diagnostic, in full", fmt.Errorf("sample token: %w", cause), "sample token: " + cause.Error()},
		{"an operr's message, not its cause", hidden, "the store does not answer"},
		{"an operr deeper in the chain", fmt.Errorf("start: %w", hidden), "start: the store does not answer"},
		{"an operr behind a wrapper that does not quote it", opaque{hidden}, "the store does not answer"},
		{"an operr that shows its cause", operr.Errorf("opening the store: %w", cause), "opening the store: " + cause.Error()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := operatorMessage(tt.err); got != tt.want {
				t.Errorf("operatorMessage(%q) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}

// opaque wraps an error without quoting its text.
type opaque struct{ error }

func (opaque) Error() string   { return "something failed" }
func (o opaque) Unwrap() error { return o.error }

// TestOperatorMessageHidesItsCause runs a command whose error for the
// operator differs from its cause: the message is printed, the cause (which
// here could hold the database password) is not.
func TestOperatorMessageHidesItsCause(t *testing.T) {
	h := newHarness(t)
	h.env = []string{"KEYGATE_DATABASE_URL=postgres://keygate:hunter2@db.example:notaport/x"}
	r := h.run("serve", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--data-dir", h.path("data"),
		"--issuer", "https://kg.example")
	expect(t, r, ExitFail, "", "\nkeygate: opening the store: the database URL is not a PostgreSQL connection string")
	for _, cause := range []string{"hunter2", "cannot parse", "notaport"} {
		if strings.Contains(r.stderr, cause) {
			t.Errorf("stderr shows %q of the cause:\n%s", cause, r.stderr)
		}
	}
}

// TestHelpNamesRealFlags: no command's -h names a flag that no keygate
// command has (serve -h once told of a --tls-cert-file that never
// existed).
func TestHelpNamesRealFlags(t *testing.T) {
	h := newHarness(t)
	defined := regexp.MustCompile(`(?m)^  -([a-z][a-z0-9-]*)`)
	mentioned := regexp.MustCompile(`(?:^|[\s(\[|"'])--([a-z][a-z0-9-]*)`)
	helps := map[string]string{}
	known := map[string]bool{"help": true}
	var walk func(path []string, cmds []*command)
	walk = func(path []string, cmds []*command) {
		for _, c := range cmds {
			p := append(slices.Clone(path), c.name)
			if c.run != nil {
				r := h.run(append(slices.Clone(p), "-h")...)
				helps[strings.Join(p, " ")] = r.stdout
				for _, m := range defined.FindAllStringSubmatch(r.stdout, -1) {
					known[m[1]] = true
				}
			}
			walk(p, c.subs)
		}
	}
	walk(nil, commands())
	if len(helps) < 10 || !known["proxy"] {
		t.Fatalf("read %d helps, flags %v", len(helps), known)
	}
	for cmd, text := range helps {
		for _, m := range mentioned.FindAllStringSubmatch(text, -1) {
			if !known[m[1]] {
				t.Errorf("keygate %s -h names --%s, which no command has", cmd, m[1])
			}
		}
	}
}
