package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keygate/keygate/internal/bench/loadgen"
	"github.com/keygate/keygate/internal/bench/runner"
	"github.com/keygate/keygate/internal/keyfile"
	"github.com/keygate/keygate/jose"
)

func readDocument(t *testing.T, dir string) *loadgen.Document {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc loadgen.Document
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return &doc
}

// Every scenario runs briefly against a keygate this test binary starts
// (TestMain), and every answer is what the scenario expects: 2xx, and 401
// for the invalid share.
func TestBenchScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("starts keygate and loads it")
	}
	t.Setenv("KEYGATE_TEST_AS_CLI", "1")
	for _, c := range []struct {
		name    string
		args    []string
		invalid float64 // share of 4xx answers expected
	}{
		{"auth", []string{"--alg", "EdDSA", "--claims", "1kb", "--hit-ratio", "0.5", "--invalid", "0.25"}, 0.25},
		{"auth", []string{"--alg", "HS256", "--claims", "4kb"}, 0},
		{"proxy", nil, 0},
		{"token", nil, 0},
		{"introspect", []string{"--tokens", "3"}, 0},
		{"transit-decrypt", nil, 0},
		{"transit-batch", []string{"--batch", "10"}, 0},
		{"secret-read", nil, 0},
		{"secret-write", nil, 0},
	} {
		t.Run(c.name+strings.Join(c.args, ""), func(t *testing.T) {
			h := newHarness(t)
			dir := h.path("out")
			args := append([]string{"bench", "scenario", c.name, "--connections", "3", "--duration", "1s", "--warmup", "200ms",
				"--tokens", "50", "--out", dir, "--no-pin"}, c.args...)
			h.must(args...)
			doc := readDocument(t, dir)
			if len(doc.Series) != 1 || len(doc.Series[0].Steps) != 1 {
				t.Fatalf("%d series", len(doc.Series))
			}
			st := doc.Series[0].Steps[0]
			total := float64(st.Status.Total())
			if st.Errors.Total() != 0 || total == 0 || st.Status.S5xx != 0 || st.Status.S3xx != 0 {
				t.Fatalf("%+v, errors %+v", st.Status, st.Errors)
			}
			if got := float64(st.Status.S4xx) / total; got < c.invalid-0.03 || got > c.invalid+0.03 {
				t.Errorf("4xx share %.3f, want %.2f (%+v)", got, c.invalid, st.Status)
			}
			if st.Server == nil || st.Server.Source != "proc" || st.Server.AllocsPerRequest <= 0 {
				t.Errorf("no target usage (CPU from /proc, allocations from /metrics): %+v", st.Server)
			}
		})
	}
}

// Compare mode: a second keygate with the cache off beside the first.
func TestBenchScenarioCompare(t *testing.T) {
	if testing.Short() {
		t.Skip("starts keygate and loads it")
	}
	t.Setenv("KEYGATE_TEST_AS_CLI", "1")
	h := newHarness(t)
	extra := h.write("nocache.yaml", []byte("cache:\n  disabled: true\n"))
	dir := h.path("out")
	out := h.must("bench", "scenario", "auth", "--compare-config", extra, "--connections", "2,3", "--duration", "1s",
		"--warmup", "200ms", "--tokens", "20", "--out", dir, "--no-pin")
	if !strings.Contains(out, "nocache÷auth req/s") {
		t.Errorf("no ratio column:\n%s", out)
	}
	doc := readDocument(t, dir)
	if len(doc.Series) != 2 || doc.Series[1].Name != "nocache" {
		t.Fatalf("series %d", len(doc.Series))
	}
	for _, s := range doc.Series {
		for _, st := range s.Steps {
			if st.Status.S2xx == 0 || st.Status.Non2xx() != 0 {
				t.Errorf("%s: %+v", s.Name, st.Status)
			}
		}
	}
	// The compared keygate's configuration has the added YAML; the first's does not.
	cfg, err := os.ReadFile(filepath.Join(dir, "nocache.yaml"))
	if err != nil || !strings.Contains(string(cfg), "disabled: true") {
		t.Errorf("nocache.yaml: %v\n%s", err, cfg)
	}
	if cfg, _ := os.ReadFile(filepath.Join(dir, "keygate.yaml")); strings.Contains(string(cfg), "disabled") {
		t.Errorf("the first keygate's configuration has the compared YAML:\n%s", cfg)
	}
}

// A running keygate (--target, --admin, --key): the scenario signs with
// the key it trusts and reads its /metrics with the admin token.
func TestBenchScenarioRunningTarget(t *testing.T) {
	if testing.Short() {
		t.Skip("starts keygate and loads it")
	}
	t.Setenv("KEYGATE_TEST_AS_CLI", "1")
	h := newHarness(t)
	priv, err := keyfile.Generate(jose.ES256, 0)
	if err != nil {
		t.Fatal(err)
	}
	pem, _ := jose.MarshalPrivatePEM(priv)
	keyPath := h.write("issuer.pem", pem)
	exe, _ := os.Executable()
	env := &runner.Env{Exe: exe, Dir: t.TempDir()}
	target, err := runner.StartKeygate(context.Background(), env, runner.KeygateSpec{Name: "running",
		Config: fmt.Sprintf("issuers:\n  - {issuer: %q, key_files: [%q], algorithms: [ES256], audiences: [%q]}\n",
			"https://auth.example.com/", keyPath, "https://api.example.com")})
	if err != nil {
		t.Fatal(err)
	}
	defer target.Stop()
	h.env = append(h.env, "KEYGATE_ADMIN_TOKEN="+target.AdminToken)
	dir := h.path("out")
	h.must("bench", "scenario", "auth", "--target", target.Base, "--admin", target.Admin, "--key", keyPath,
		"--connections", "2", "--duration", "1s", "--warmup", "200ms", "--tokens", "20", "--out", dir, "--no-pin")
	st := readDocument(t, dir).Series[0].Steps[0]
	if st.Status.S2xx == 0 || st.Status.Non2xx() != 0 || st.Server == nil || st.Server.AllocsPerRequest <= 0 {
		t.Errorf("%+v, usage %+v", st.Status, st.Server)
	}
	r := h.run("bench", "scenario", "auth", "--target", target.Base, "--no-pin", "--out", h.path("o2"))
	if r.code != ExitFail || !strings.Contains(r.stderr, "--key") {
		t.Errorf("a running target without --key: exit %d, %s", r.code, r.stderr)
	}
}

func TestBenchScenarioUsage(t *testing.T) {
	h := newHarness(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"nonesuch"}, `no scenario "nonesuch"`},
		{[]string{"auth", "--compare-target", "http://127.0.0.1:1"}, "--compare-target needs --target"},
		{[]string{"auth", "--key", "x"}, "need --target"},
		{[]string{"auth", "--target", "http://127.0.0.1:1", "--compare-config", "x"}, "excludes --target"},
		{[]string{"auth", "--tokens", "0"}, "must be positive"},
	} {
		r := h.run(append([]string{"bench", "scenario"}, c.args...)...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %q", c.args, r.code, r.stderr, c.want)
		}
	}
}
