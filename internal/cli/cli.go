// Package cli is the keygate command line: it parses each subcommand's
// flags with the standard flag package and hands the work to the packages
// that do it (jose, keyfile, mint, server, bench, loadgen).
//
// Exit codes: 0 on success, 1 when the command fails (a rejected token, a
// missing file, a key that does not fit), 2 for a usage error.
//
// A failed command prints its error in one line: in full, as a diagnostic,
// except that an error written for the operator (operr) shows its message
// in place of a cause it keeps for the logs.
package cli

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/keygate/keygate/internal/operr"
)

// Exit codes.
const (
	ExitOK    = 0
	ExitFail  = 1
	ExitUsage = 2
)

// Main runs the keygate command line with args (without the program name)
// and returns the exit code. Commands that block, such as serve, stop when
// ctx is done.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := &app{stdin: os.Stdin, stdout: stdout, stderr: stderr, now: time.Now, random: rand.Reader, env: os.Environ()}
	return a.main(ctx, args)
}

// app holds a run's inputs and outputs, so tests can substitute them.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	now            func() time.Time
	random         io.Reader
	env            []string          // the environment, for KEYGATE_* overrides
	ready          func(addr string) // test hook: serve is listening on addr
}

func (a *app) main(ctx context.Context, args []string) int {
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version") {
		args = append([]string{"version"}, args[1:]...) // as every CLI takes it
	}
	err := a.dispatch(ctx, "keygate", commands(), args)
	var ue *usageError
	var se silentError
	switch {
	case err == nil, errors.Is(err, errHelpShown):
		return ExitOK
	case errors.As(err, &ue):
		fmt.Fprintf(a.stderr, "%s: %s\nRun '%s -h' for usage.\n", ue.cmd, operatorMessage(ue.err), ue.cmd)
		return ExitUsage
	case errors.As(err, &se):
		return ExitFail
	}
	fmt.Fprintf(a.stderr, "keygate: %s\n", operatorMessage(err))
	return ExitFail
}

// operatorMessage is err as the operator reads it: its whole text, but for
// the cause an operr.Error in its chain keeps for the logs, which gives way
// to that error's message. What the wrappers around it say stays: it is
// context, and keygate's own.
func operatorMessage(err error) string {
	text := err.Error()
	e, ok := operr.As(err)
	if !ok || e.Error() == e.Message() {
		return text
	}
	if i := strings.LastIndex(text, e.Error()); i >= 0 {
		return text[:i] + e.Message() + text[i+len(e.Error()):]
	}
	return e.Message() // a wrapper that does not quote it: nothing else to go by
}

// command is a subcommand: either it runs, or it groups further commands.
type command struct {
	name    string
	summary string
	run     func(a *app, ctx context.Context, args []string) error
	subs    []*command
	group   string // the heading a top-level command is listed under in keygate --help
}

// The headings of keygate --help, in the order commands() lists them.
const (
	groupRun     = "Run a node"
	groupTokens  = "Tokens and keys"
	groupManage  = "Manage a running node's tenants, clients and users"
	groupSeal    = "Root key, sealing and the audit log"
	groupMeasure = "Measure keygate (load tests, reference servers, reports)"
)

func commands() []*command {
	return []*command{
		{name: "serve", group: groupRun, summary: "run keygate: the token service, JWKS, /auth forward-auth and the reverse proxy", run: (*app).serve},
		{name: "status", group: groupRun, summary: "show a running node at a glance: health, readiness, seal state, keys, audit log", run: (*app).status},
		{name: "backup", group: groupRun, summary: "write a consistent snapshot of a store, its sealed values still sealed", run: (*app).backup},
		{name: "restore", group: groupRun, summary: "restore a snapshot into an empty store (SQLite or PostgreSQL)", run: (*app).restore},
		{name: "config", group: groupRun, summary: "check a configuration; print a proxy's configuration for keygate's forward-auth", subs: []*command{
			{name: "check", summary: "validate a configuration file and print it in effect, secrets redacted", run: (*app).configCheck},
			{name: "nginx", summary: "nginx auth_request locations (keygate serve --proxy nginx)", run: proxyConfig("nginx")},
			{name: "caddy", summary: "Caddyfile forward_auth directives (keygate serve --proxy caddy)", run: proxyConfig("caddy")},
			{name: "traefik", summary: "Traefik ForwardAuth dynamic configuration (keygate serve --proxy traefik)", run: proxyConfig("traefik")},
		}},
		{name: "version", group: groupRun, summary: "print the version of keygate and Go", run: (*app).version},
		{name: "keys", group: groupTokens, summary: "generate keys and publish them as a JWKS", subs: []*command{
			{name: "generate", summary: "write a new private key (PKCS#8 PEM) or HMAC secret", run: (*app).keysGenerate},
			{name: "jwks", summary: "print the public JWKS of PEM or JWK key files", run: (*app).keysJWKS},
			{name: "thumbprint", summary: "print a key's RFC 7638 thumbprint", run: (*app).keysThumbprint},
			{name: "list", summary: "list a running node's signing keys", run: (*app).keysList},
			{name: "rotate", summary: "rotate a running node's signing key", run: (*app).keysRotate},
		}},
		{name: "revoke", group: groupTokens, summary: "revoke a token by jti, or a subject's tokens issued before a time", run: (*app).revoke},
		{name: "token", group: groupTokens, summary: "get an access token from a running node (--client ID --secret S)", run: (*app).tokenRequest, subs: []*command{
			{name: "sign", summary: "mint a signed JWT", run: (*app).tokenSign},
			{name: "verify", summary: "verify a JWT and print its claims", run: (*app).tokenVerify},
			{name: "inspect", summary: "print a JWT's header and claims WITHOUT verifying", run: (*app).tokenInspect},
		}},
		{name: "tenants", group: groupManage, summary: "manage tenants (namespaces of clients, users and keys) on a running node", subs: []*command{
			{name: "create", summary: "create a tenant", run: (*app).tenantsCreate},
			{name: "list", summary: "list tenants", run: (*app).tenantsList},
			{name: "delete", summary: "delete an empty tenant", run: (*app).tenantsDelete},
			{name: "rotate-key", summary: "rotate a tenant's data key and rewrap its records in the background", run: (*app).tenantsRotateKey},
		}},
		{name: "clients", group: groupManage, summary: "manage OAuth clients on a running node", subs: []*command{
			{name: "create", summary: "create a client and print its secret once", run: (*app).clientsCreate},
			{name: "list", summary: "list clients", run: (*app).clientsList},
			{name: "rotate", summary: "replace a client's secret", run: (*app).clientsRotate},
			{name: "update", summary: "rename a client or replace its scopes", run: (*app).clientsUpdate},
			{name: "delete", summary: "delete a client", run: (*app).clientsDelete},
		}},
		{name: "users", group: groupManage, summary: "manage users (password login) on a running node", subs: []*command{
			{name: "create", summary: "create a user; the password is read without echo", run: (*app).usersCreate},
			{name: "list", summary: "list users", run: (*app).usersList},
			{name: "update", summary: "change a user's password, scopes, or disable them", run: (*app).usersUpdate},
			{name: "delete", summary: "delete a user", run: (*app).usersDelete},
		}},
		{name: "keyring", group: groupSeal, summary: "set up passphrase unsealing", subs: []*command{
			{name: "init", summary: "derive the root key from a passphrase; write keyring.json", run: (*app).keyringInit},
		}},
		{name: "operator", group: groupSeal, summary: "set up a fleet's shared store; rotate its root key", subs: []*command{
			{name: "init", summary: "generate the root key and admin token; seal the first signing key in the store", run: (*app).operatorInit},
			{name: "rekey", summary: "rotate the root key (or passphrase) of a running fleet without downtime", run: (*app).operatorRekey},
		}},
		{name: "unseal", group: groupSeal, summary: "unseal a running node with its passphrase or root key", run: (*app).unseal},
		{name: "seal", group: groupSeal, summary: "seal a running node: it stops issuing tokens at once", run: (*app).seal},
		{name: "audit", group: groupSeal, summary: "verify audit logs, print a node's audit key", subs: auditCommands()},
		{name: "bench", group: groupMeasure, summary: "measure signing and verification throughput; load-test helpers", subs: []*command{
			{name: "verify", summary: "verifications per second by algorithm", run: (*app).benchVerify},
			{name: "sign", summary: "signatures per second by algorithm", run: (*app).benchSign},
			{name: "server", summary: "reference server (no-op, raw ES256 verify or sign) to load-test keygate against", run: (*app).benchServer},
			{name: "tokens", summary: "mint N distinct tokens, one per line, for load tests", run: (*app).benchTokens},
			{name: "load", summary: "HTTP load generator: requests/s and latency percentiles of a URL (like wrk/wrk2)", run: (*app).benchLoad},
			{name: "scenario", summary: "load keygate with one of its workloads (auth, proxy, token, transit, ...), or compare two", run: (*app).benchScenario},
			{name: "reproduce", summary: "redraw a user's before/after load-test table: naive set-up vs keygate", run: (*app).benchReproduce},
			{name: "report", summary: "draw a bench JSON document as a self-contained offline HTML report with charts", run: (*app).benchReport},
			{name: "extauthz", summary: "gRPC load generator for Envoy's ext_authz Check (like ghz)", run: (*app).benchExtauthz},
		}},
	}
}

// dispatch finds the command args[0] names among cmds and runs it; path is
// the command line so far, for messages.
func (a *app) dispatch(ctx context.Context, path string, cmds []*command, args []string) error {
	if len(args) == 0 {
		a.printCommands(a.stderr, path, cmds)
		return usageErrorf(path, "no command given")
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		return a.help(path, cmds, args[1:])
	}
	c := find(cmds, name)
	if c == nil {
		return usageErrorf(path, "unknown command %q", name)
	}
	// A group that also runs on its own (token --client ...) takes flags
	// directly after its name.
	if c.subs != nil && c.run != nil && len(args) > 1 && strings.HasPrefix(args[1], "-") {
		if isHelp(args[1]) {
			return a.groupHelp(path+" "+name, c)
		}
		return c.run(a, ctx, args[1:])
	}
	if c.subs != nil {
		return a.dispatch(ctx, path+" "+name, c.subs, args[1:])
	}
	return c.run(a, ctx, args[1:])
}

// help prints the commands of path, or of the group args names.
func (a *app) help(path string, cmds []*command, args []string) error {
	for len(args) > 0 {
		c := find(cmds, args[0])
		if c == nil {
			return usageErrorf(path, "unknown command %q", args[0])
		}
		if c.subs == nil {
			return c.run(a, context.Background(), []string{"-h"})
		}
		if c.run != nil && len(args) == 1 {
			return a.groupHelp(path+" "+c.name, c)
		}
		path, cmds, args = path+" "+c.name, c.subs, args[1:]
	}
	a.printCommands(a.stdout, path, cmds)
	return errHelpShown
}

// groupHelp prints the flags of a group that also runs on its own, then its
// subcommands.
func (a *app) groupHelp(path string, c *command) error {
	if err := c.run(a, context.Background(), []string{"-h"}); !errors.Is(err, errHelpShown) {
		return err
	}
	fmt.Fprintln(a.stdout)
	a.printCommands(a.stdout, path, c.subs)
	return errHelpShown
}

func isHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help":
		return true
	}
	return false
}

func find(cmds []*command, name string) *command {
	for _, c := range cmds {
		if c.name == name {
			return c
		}
	}
	return nil
}

func (a *app) printCommands(w io.Writer, path string, cmds []*command) {
	if path == "keygate" {
		fmt.Fprintln(w, "keygate verifies and issues JWTs: a forward-auth gateway and key service.")
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "Usage:\n  %s <command> [flags] [arguments]\n", path)
	width := 18 // names line up, at least two spaces before their summary
	for _, c := range cmds {
		for _, line := range c.lines() {
			width = max(width, len(line[0])+1)
		}
	}
	heading := ""
	for i, c := range cmds {
		if i == 0 || c.group != heading {
			heading = c.group
			if heading == "" {
				heading = "Commands"
			}
			fmt.Fprintf(w, "\n%s:\n", heading)
		}
		for _, line := range c.lines() {
			fmt.Fprintf(w, "  %-*s %s\n", width, line[0], line[1])
		}
	}
	fmt.Fprintf(w, "\nRun '%s <command> -h' for a command's flags.\n", path)
}

// lines lists a command and its subcommands as (name, summary) rows; a
// group that also runs on its own has a row of its own first.
func (c *command) lines() [][2]string {
	if c.subs == nil {
		return [][2]string{{c.name, c.summary}}
	}
	var out [][2]string
	if c.run != nil {
		out = append(out, [2]string{c.name, c.summary})
	}
	for _, s := range c.subs {
		out = append(out, [2]string{c.name + " " + s.name, s.summary})
	}
	return out
}

// usageError is a mistake on the command line: exit code 2.
type usageError struct {
	cmd string
	err error
}

func (e *usageError) Error() string { return e.cmd + ": " + e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usageErrorf(cmd, format string, args ...any) error {
	return &usageError{cmd: cmd, err: operr.Errorf(format, args...)}
}

// silentError fails with exit code 1 after the command has already said why.
type silentError struct{ error }

// errHelpShown ends a run that printed help: exit code 0.
var errHelpShown = errors.New("help shown")
