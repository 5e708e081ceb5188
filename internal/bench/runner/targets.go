package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/keygate/keygate/internal/bench/loadgen"
)

// Env is what every run shares: the keygate binary that starts the
// targets, a work directory, and where the targets run.
type Env struct {
	Exe  string // the keygate binary
	Dir  string // configs, keys, logs and data directories go here
	CPUs []int  // the started targets' CPUs; empty: not pinned
	// Procs is the started targets' GOMAXPROCS (0: the Go default).
	Procs int
}

// Target is a started target.
type Target struct {
	Name       string
	Base       string // http://host:port of the traffic listener
	Admin      string // http://host:port of keygate's admin listener ("" for bench server)
	AdminToken string
	Proc       *Process
	Probe      Probe
	pprofBase  string // .../debug/pprof/ or ""
	pprofToken string
	also       *Target // a target started with this one and stopped with it (the proxy's upstream)
	onStop     func()  // runs after the target stopped (nil: nothing)
	cpus       []int   // the CPUs it is pinned to (nil: not pinned, or not started here)
}

// startTimeout bounds a target's start.
const startTimeout = 30 * time.Second

// ProfileURL returns the URL of a profile (kind "profile" for CPU with
// seconds, or "allocs"), or "" when the target serves none.
func (t *Target) ProfileURL(kind string, seconds int) string {
	if t.pprofBase == "" {
		return ""
	}
	if kind == "profile" {
		return fmt.Sprintf("%sprofile?seconds=%d", t.pprofBase, seconds)
	}
	return t.pprofBase + kind
}

// Stop stops the target.
func (t *Target) Stop() {
	if t == nil {
		return
	}
	if t.Proc != nil {
		t.Proc.Stop()
	}
	t.also.Stop()
	if t.onStop != nil {
		t.onStop()
	}
}

// StartBenchServer starts 'keygate bench server' in mode (with the key
// file the naive modes need) and its profiles under /debug/pprof/.
func StartBenchServer(ctx context.Context, env *Env, name, mode, keyFile string) (*Target, error) {
	var extra []string
	if keyFile != "" {
		extra = []string{"--key", keyFile}
	}
	return startBenchServer(ctx, env, name, mode, extra...)
}

// startBenchServer starts 'keygate bench server' in mode with further
// arguments.
func startBenchServer(ctx context.Context, env *Env, name, mode string, extra ...string) (*Target, error) {
	addr, err := FreePort()
	if err != nil {
		return nil, err
	}
	args := append([]string{"bench", "server", "--mode", mode, "--listen", addr, "--profiling"}, extra...)
	// The server answers only requests carrying this process's marker,
	// which the load generators here send.
	p, err := Start(Spec{Name: name, Exe: env.Exe, Args: args, CPUs: env.CPUs, GOMAXPROCS: env.Procs,
		Log: filepath.Join(env.Dir, name+".log"), Env: []string{loadgen.MarkerEnv + "=" + loadgen.Marker()}})
	if err != nil {
		return nil, err
	}
	t := &Target{Name: name, Base: "http://" + addr, Proc: p, cpus: env.CPUs,
		Probe:     ChildProbe{Pid: p.Pid(), Metrics: &MetricsProbe{URL: "http://" + addr + "/metrics"}},
		pprofBase: "http://" + addr + "/debug/pprof/"}
	if err := p.WaitHTTP(ctx, t.Base+"/healthz", startTimeout); err != nil {
		p.Stop()
		return nil, err
	}
	return t, nil
}

// KeygateSpec says how to start 'keygate serve'.
type KeygateSpec struct {
	Name string
	// Config is the YAML configuration without listen, admin_listen,
	// data_dir and pprof, which StartKeygate sets; "" starts in dev mode
	// (a token service on a fresh SQLite store, its admin token read back
	// from the data directory).
	Config string
	Env    []string // further settings, as KEYGATE_ variables
}

// StartKeygate starts keygate, with its profiles and /metrics on the
// admin listener behind a fresh admin token.
func StartKeygate(ctx context.Context, env *Env, spec KeygateSpec) (*Target, error) {
	listen, err := FreePort()
	if err != nil {
		return nil, err
	}
	admin, err := FreePort()
	if err != nil {
		return nil, err
	}
	data := filepath.Join(env.Dir, spec.Name+"-data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, err
	}
	args := []string{"serve", "--listen", listen, "--admin-listen", admin, "--data-dir", data}
	envv := append([]string{"KEYGATE_PPROF=true"}, spec.Env...)
	token := ""
	if spec.Config == "" {
		args = append(args, "--dev")
	} else {
		cfg := filepath.Join(env.Dir, spec.Name+".yaml")
		if err := os.WriteFile(cfg, []byte(spec.Config), 0o600); err != nil {
			return nil, err
		}
		args = append(args, "--config", cfg)
		b := make([]byte, 24)
		rand.Read(b) //nolint:errcheck // crypto/rand.Read does not fail
		token = hex.EncodeToString(b)
		envv = append(envv, "KEYGATE_ADMIN_TOKEN="+token)
	}
	p, err := Start(Spec{Name: spec.Name, Exe: env.Exe, Args: args, Env: envv, CPUs: env.CPUs, GOMAXPROCS: env.Procs,
		Log: filepath.Join(env.Dir, spec.Name+".log")})
	if err != nil {
		return nil, err
	}
	t := &Target{Name: spec.Name, Base: "http://" + listen, Admin: "http://" + admin, Proc: p, cpus: env.CPUs}
	if err := p.WaitHTTP(ctx, t.Admin+"/healthz", startTimeout); err != nil {
		p.Stop()
		return nil, err
	}
	if token == "" {
		b, err := os.ReadFile(filepath.Join(data, "admin.token"))
		if err != nil {
			p.Stop()
			return nil, fmt.Errorf("%s: dev mode wrote no admin token: %w", spec.Name, err)
		}
		token = strings.TrimSpace(string(b))
	}
	t.AdminToken, t.pprofBase, t.pprofToken = token, t.Admin+"/debug/pprof/", token
	t.Probe = ChildProbe{Pid: p.Pid(), Metrics: &MetricsProbe{URL: t.Admin + "/metrics"}}
	return t, nil
}

// startBeside records that also was started with t, on its CPUs: t's
// probe counts also's CPU as the workload's, not a neighbour's.
func (t *Target) startBeside(also *Target) {
	t.also = also
	if cp, ok := t.Probe.(ChildProbe); ok && also.Proc != nil {
		cp.Also = append(slices.Clone(cp.Also), also.Proc.Pid())
		t.Probe = cp
	}
}

// Describe says where the targets and the generator run.
func (e *Env) Describe() string {
	if len(e.CPUs) == 0 {
		return "targets and load generator not pinned (they share every CPU)"
	}
	return fmt.Sprintf("targets pinned to CPU %v with GOMAXPROCS=%d, the load generator on the other CPUs", e.CPUs, e.Procs)
}
