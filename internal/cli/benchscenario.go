package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/keygate/keygate/internal/bench/loadgen"
	"github.com/keygate/keygate/internal/bench/runner"
	"github.com/keygate/keygate/jose"
)

// benchScenario is 'keygate bench scenario NAME'.
func (a *app) benchScenario(ctx context.Context, args []string) error {
	var lines []string
	for _, s := range runner.Scenarios {
		lines = append(lines, fmt.Sprintf("%-16s %s", s.Name, s.Summary))
	}
	fs := a.flags("keygate bench scenario", "NAME [--target URL [--admin URL] [--key FILE]] [--compare-config FILE | --compare-target URL | --reference]\n"+
		"    [scenario flags] [--connections N,...] [--rounds N] [--rate R] [--duration D] [--warmup D] [--out DIR] [--profile] [--json]",
		"Loads keygate with one of its workloads, against a keygate it starts (pinned to its own CPU,\n"+
			"configured for the scenario) or a running one (--target). With --compare-config it starts a\n"+
			"second keygate whose configuration also has that file's YAML, and measures both, step by step,\n"+
			"side by side with ratios; --compare-target does the same for a second running keygate.\n"+
			"With --reference (secret-read, secret-write) the first series is the scenario's reference server.\n"+
			"Writes report.json (keygate.bench.report/v1) to --out. NAME is one of:\n  "+strings.Join(lines, "\n  ")+
			"\nSee docs/bench-load.md.")
	var o runner.ScenarioOptions
	var alg algFlag
	fs.Var(&alg, "alg", "token scenarios: signing `ALG` (HS256, RS256, PS256, ES256, EdDSA, ...; default ES256)")
	fs.StringVar(&o.Claims, "claims", "small", "token scenarios: claims `size`: small (about 300 B), 1kb or 4kb")
	fs.IntVar(&o.Tokens, "tokens", runner.DefaultTokens, "token scenarios: `N` distinct tokens sent in turn (introspect: up to 100)")
	fs.Float64Var(&o.HitRatio, "hit-ratio", 0, "token scenarios: share of requests carrying one of a few hot tokens (cache hits)")
	fs.Float64Var(&o.Invalid, "invalid", 0, "token scenarios: share of requests with a token signed by an untrusted key (401)")
	fs.IntVar(&o.Batch, "batch", 100, "transit-batch: items per request")
	fs.StringVar(&o.Target, "target", "", "a running keygate's traffic `URL` instead of starting one")
	fs.StringVar(&o.Admin, "admin", "", "the running keygate's admin `URL`: clients are created there, /metrics and (with\n"+
		"--profile) /debug/pprof/ read there with $KEYGATE_ADMIN_TOKEN or --admin-token-file")
	tokenFile := fs.String("admin-token-file", "", "`file` holding the running keygate's admin token")
	fs.StringVar(&o.KeyFile, "key", "", "token scenarios with --target: the signing key `FILE` the target trusts")
	extra := fs.String("extra-config", "", "YAML `FILE` added to the configuration of the keygate the scenario starts")
	compareConfig := fs.String("compare-config", "", "YAML `FILE`: also start a keygate with this added, and compare")
	compareTarget := fs.String("compare-target", "", "a second running keygate's traffic `URL` to compare with --target (same admin token)")
	compareAdmin := fs.String("compare-admin", "", "the second running keygate's admin `URL`")
	fs.BoolVar(&o.Reference, "reference", false, "secret-read, secret-write: also measure the reference server (bench server --mode kv-read,\n"+
		"kv-write) as the first series, step by step with keygate")
	fs.StringVar(&o.DatabaseURL, "database-url", "", "secret scenarios: run keygate (and the kv-write reference) on this PostgreSQL `URL`,\n"+
		"each in a fresh schema dropped at the end (default: SQLite)")
	fs.BoolVar(&o.NoCache, "no-cache", false, "secret scenarios: the started keygate's secret read cache off (every read misses)")
	rounds := fs.Int("rounds", 1, "measure each --connections step `N` times, the series back to back in alternating\n"+
		"order, and report the median of the rounds' ratios (requests/s and CPU per request)")
	conns := intsFlag{50}
	fs.Var(&conns, "connections", "`N[,N...]` keep-alive connections, one step each")
	rate := fs.Float64("rate", 0, "open loop at `R` requests/s (0: closed loop)")
	timeout := fs.Duration("timeout", loadgen.DefaultTimeout, "per request and per connect")
	pf := a.planFlags(fs, 10*time.Second)
	rest, err := fs.parse(args, 1, 1)
	if err != nil {
		return err
	}
	sc, ok := runner.FindScenario(rest[0])
	o.Alg = jose.Alg(alg)
	switch {
	case !ok:
		return usageErrorf(fs.Name(), "no scenario %q (one of %s)", rest[0], strings.Join(scenarioNames(), ", "))
	case *pf.duration < time.Second || *pf.warmup < 0 || *timeout <= 0 || *rate < 0:
		return usageErrorf(fs.Name(), "--duration must be at least 1s; --warmup, --rate not negative; --timeout positive")
	case o.Tokens <= 0 || o.Batch <= 0 || *rounds <= 0:
		return usageErrorf(fs.Name(), "--tokens, --batch and --rounds must be positive")
	case o.Reference && !sc.HasReference():
		return usageErrorf(fs.Name(), "scenario %s has no --reference", sc.Name)
	case o.Reference && (o.Target != "" || *compareConfig != ""):
		return usageErrorf(fs.Name(), "--reference goes with the keygate this command starts: not with --target or --compare-config")
	case (o.DatabaseURL != "" || o.NoCache) && (!strings.HasPrefix(sc.Name, "secret-") || o.Target != ""):
		return usageErrorf(fs.Name(), "--database-url and --no-cache are for the secret scenarios on a keygate this command starts")
	case *compareConfig != "" && (o.Target != "" || *compareTarget != ""):
		return usageErrorf(fs.Name(), "--compare-config compares keygates this command starts; it excludes --target")
	case *compareTarget != "" && o.Target == "":
		return usageErrorf(fs.Name(), "--compare-target needs --target")
	case o.Target == "" && (o.Admin != "" || o.KeyFile != ""):
		return usageErrorf(fs.Name(), "--admin and --key describe a running keygate: they need --target")
	}
	if o.Admin != "" {
		af := adminFlags{url: o.Admin, tokenFile: *tokenFile}
		if o.AdminToken, err = af.token(a); err != nil {
			return err
		}
	}
	if o.ExtraConfig, err = readOptional(*extra); err != nil {
		return err
	}
	return a.runPlan(ctx, fs, pf, sc.Name, "keygate bench scenario "+strings.Join(args, " "),
		func(env *runner.Env) (*runner.Plan, error) {
			plan := &runner.Plan{Name: sc.Name, Title: "keygate bench scenario " + sc.Name + ": " + sc.Summary,
				Connections: conns, Rounds: *rounds, Rate: *rate, Warmup: *pf.warmup, Duration: *pf.duration, Timeout: *timeout}
			if o.Reference {
				ref, notes, err := sc.Reference(env, o)
				if err != nil {
					return nil, err
				}
				plan.Series = append(plan.Series, ref)
				plan.Notes = append(plan.Notes, notes...)
			}
			if err := addSeries(plan, env, sc, o); err != nil {
				return nil, err
			}
			if *compareConfig == "" && *compareTarget == "" {
				return plan, nil
			}
			o2 := o
			o2.SeriesName = "compare"
			if *compareTarget != "" {
				o2.Target, o2.Admin = *compareTarget, *compareAdmin
			} else {
				more, err := readOptional(*compareConfig)
				if err != nil {
					return nil, err
				}
				o2.ExtraConfig += more
				o2.SeriesName = strings.TrimSuffix(filepath.Base(*compareConfig), filepath.Ext(*compareConfig))
			}
			if o2.SeriesName == plan.Series[0].Name {
				o2.SeriesName += "-2"
			}
			return plan, addSeries(plan, env, sc, o2)
		})
}

func addSeries(plan *runner.Plan, env *runner.Env, sc runner.Scenario, o runner.ScenarioOptions) error {
	s, notes, err := sc.Series(env, o)
	if err != nil {
		return err
	}
	plan.Series = append(plan.Series, s)
	for _, n := range notes {
		if !slices.Contains(plan.Notes, n) {
			plan.Notes = append(plan.Notes, n)
		}
	}
	return nil
}

func scenarioNames() []string {
	var names []string
	for _, s := range runner.Scenarios {
		names = append(names, s.Name)
	}
	return names
}

// readOptional reads a file, or returns "" for no file name.
func readOptional(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := string(b)
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	return s, nil
}
