package cli

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/keygate/keygate/internal/config"
)

// helpFlags returns the flags `keygate <cmd> -h` lists.
func (h *harness) helpFlags(cmd ...string) map[string]bool {
	h.t.Helper()
	r := h.run(append(cmd, "-h")...)
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+-([a-z0-9-]+)`).FindAllStringSubmatch(r.stdout+r.stderr, -1) {
		flags[m[1]] = true
	}
	if len(flags) == 0 {
		h.t.Fatalf("keygate %s -h listed no flags:\n%s%s", strings.Join(cmd, " "), r.stdout, r.stderr)
	}
	return flags
}

// checkArgs checks a command line given to keygate: a command serve knows,
// and flags its help lists.
func checkArgs(t *testing.T, where string, args []string, serveFlags map[string]bool) {
	t.Helper()
	if len(args) == 0 || args[0] != "serve" {
		t.Errorf("%s: runs %q, want keygate serve", where, args)
		return
	}
	for _, a := range args[1:] {
		if name, ok := strings.CutPrefix(a, "--"); ok {
			name, _, _ = strings.Cut(name, "=")
			if !serveFlags[name] {
				t.Errorf("%s: keygate serve has no flag --%s", where, name)
			}
		}
	}
}

// TestDockerfile checks the Dockerfile without a container builder (this
// machine has no daemon and no registry): a static build, a distroless or
// scratch base, a non-root user, and a default command the binary takes,
// exposing the ports it listens on.
func TestDockerfile(t *testing.T) {
	h := newHarness(t)
	serveFlags := h.helpFlags("serve")
	f, err := os.Open("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var stages []map[string][]string // per stage: instruction -> arguments, in order
	sc := bufio.NewScanner(f)
	line := ""
	for sc.Scan() {
		text := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(text, "#") || text == "" {
			continue
		}
		if cont, ok := strings.CutSuffix(text, "\\"); ok {
			line += cont + " "
			continue
		}
		line += text
		instr, rest, _ := strings.Cut(line, " ")
		instr = strings.ToUpper(instr)
		if instr == "FROM" {
			stages = append(stages, map[string][]string{})
		}
		if len(stages) == 0 {
			t.Fatalf("%s before FROM", instr)
		}
		stages[len(stages)-1][instr] = append(stages[len(stages)-1][instr], strings.TrimSpace(rest))
		line = ""
	}
	if len(stages) < 2 {
		t.Fatalf("%d stages, want a build stage and a runtime stage", len(stages))
	}
	build, final := stages[0], stages[len(stages)-1]
	if run := strings.Join(build["RUN"], "\n"); !strings.Contains(run, "CGO_ENABLED=0") || !strings.Contains(run, "./cmd/keygate") {
		t.Errorf("the build stage does not build ./cmd/keygate statically: %s", run)
	}
	if base := final["FROM"][0]; !strings.HasPrefix(base, "gcr.io/distroless/static") && base != "scratch" {
		t.Errorf("runtime base %q, want distroless static or scratch", base)
	}
	users := final["USER"]
	if len(users) == 0 {
		t.Fatal("the runtime stage has no USER: it would run as root")
	}
	if u, _, _ := strings.Cut(users[len(users)-1], ":"); u == "0" || u == "root" {
		t.Errorf("USER %s is root", users[len(users)-1])
	}
	var entry, cmd []string
	if err := json.Unmarshal([]byte(final["ENTRYPOINT"][0]), &entry); err != nil || len(entry) != 1 {
		t.Fatalf("ENTRYPOINT %s: want the binary alone, in exec form (%v)", final["ENTRYPOINT"], err)
	}
	if copies := strings.Join(final["COPY"], "\n"); !strings.Contains(copies, entry[0]) {
		t.Errorf("ENTRYPOINT %s is not a file the runtime stage copies in", entry[0])
	}
	if err := json.Unmarshal([]byte(final["CMD"][0]), &cmd); err != nil {
		t.Fatalf("CMD %s: want exec form (%v)", final["CMD"], err)
	}
	checkArgs(t, "Dockerfile CMD", cmd, serveFlags)
	exposed := strings.Fields(strings.Join(final["EXPOSE"], " "))
	for i, a := range cmd {
		if (a == "--listen" || a == "--probe-listen") && i+1 < len(cmd) {
			_, port, _ := strings.Cut(cmd[i+1], ":")
			found := false
			for _, e := range exposed {
				found = found || strings.TrimSuffix(e, "/tcp") == port
			}
			if !found {
				t.Errorf("%s %s: port %s not in EXPOSE %v", a, cmd[i+1], port, exposed)
			}
		}
	}
}

// TestSystemdUnit checks deploy/keygate.service: its command line is one
// keygate takes, the variables of the override its comments show are
// settings keygate reads, it is hardened, and systemd-analyze verify,
// where installed, finds nothing.
func TestSystemdUnit(t *testing.T) {
	h := newHarness(t)
	serveFlags := h.helpFlags("serve")
	raw, err := os.ReadFile("../../deploy/keygate.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := string(raw)
	execs := regexp.MustCompile(`(?m)^#?\s*ExecStart=(/\S+/keygate (?:.*\\\n)*.*)$`).FindAllStringSubmatch(unit, -1)
	if len(execs) == 0 {
		t.Fatal("found no keygate ExecStart line")
	}
	for _, e := range execs {
		cmdline := regexp.MustCompile(`\\\n#?\s*`).ReplaceAllString(e[1], " ")
		checkArgs(t, "ExecStart", strings.Fields(cmdline)[1:], serveFlags)
	}
	known := map[string]bool{}
	for _, v := range config.EnvVars() {
		known[v.Name] = true
	}
	vars := regexp.MustCompile(`(?m)^#\s*Environment=(KEYGATE_\w+)=`).FindAllStringSubmatch(unit, -1)
	if len(vars) < 3 {
		t.Errorf("found %d KEYGATE_ variables in the credentials override, want the root key, admin token and database URL files", len(vars))
	}
	for _, v := range vars {
		if !known[v[1]] {
			t.Errorf("the credentials override sets %s, which names no setting", v[1])
		}
	}
	directives := map[string]bool{}
	for _, l := range strings.Split(unit, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(l, "#") {
			directives[k+"="+v] = true
		}
	}
	for _, want := range []string{"NoNewPrivileges=yes", "CapabilityBoundingSet=", "ProtectSystem=strict", "ProtectHome=yes",
		"PrivateTmp=yes", "PrivateDevices=yes", "DynamicUser=yes", "StateDirectory=keygate", "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX",
		"MemoryDenyWriteExecute=yes", "SystemCallFilter=@system-service", "LockPersonality=yes", "RestrictNamespaces=yes",
		"ProtectKernelTunables=yes", "ProtectKernelModules=yes", "ProtectControlGroups=yes", "UMask=0077",
		"ExecReload=/bin/kill -HUP $MAINPID"} {
		if !directives[want] {
			t.Errorf("the unit lacks %s", want)
		}
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze not installed: the unit's syntax was not verified")
		return
	}
	// verify wants ExecStart's program to exist; this test's own binary does.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(t.TempDir(), "keygate.service")
	if err := os.WriteFile(tmp, []byte(strings.ReplaceAll(unit, "/usr/local/bin/keygate", self)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", tmp).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
