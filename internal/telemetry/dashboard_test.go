package telemetry_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/telemetry"
)

// dashboardFile is the Grafana dashboard kept beside the code.
const dashboardFile = "../../dashboards/keygate.json"

type dashboard struct {
	Title      string  `json:"title"`
	UID        string  `json:"uid"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name string `json:"name"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ H, W, X, Y int } `json:"gridPos"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
}

// allFamilies is every metric a node can export: a Metrics with every
// optional part registered (cache, fleet, key schedule, sealing, rekey, audit,
// transit and its workers), and the Go runtime and process collectors.
func allFamilies(t *testing.T) map[string][]string {
	t.Helper()
	m := telemetry.New()
	m.Cache(func() (int, uint64, uint64) { return 0, 0, 0 })
	m.Fleet(func() telemetry.FleetStats { return telemetry.FleetStats{} })
	m.KeySchedule(func() (int, time.Time) { return 0, time.Time{} })
	m.Sealed(func() bool { return false })
	m.Rekey(func() (telemetry.RekeyStats, bool) { return telemetry.RekeyStats{}, true })
	m.Audit(func() []telemetry.AuditSink { return nil })
	m.AuditDisk(func() (uint64, uint64, bool) { return 1, 1, true })
	m.Transit([]string{"transit.encrypt"})
	m.Secrets([]string{"secret.read"})
	m.SecretCache(func() telemetry.SecretCacheStats { return telemetry.SecretCacheStats{} })
	m.Credentials([]string{"totp.code.validate"})
	m.TransitPool(func() telemetry.TransitPoolStats { return telemetry.TransitPoolStats{} })
	f := m.Families()
	if len(f) < 30 {
		t.Fatalf("only %d metric families registered: %v", len(f), f)
	}
	return f
}

var (
	metricName = regexp.MustCompile(`\b(?:keygate|go|process)_[a-z0-9_]+\b`)
	byClause   = regexp.MustCompile(`\bby \(([^)]*)\)`)
)

// base is the family a series name belongs to: a histogram's or summary's
// _bucket, _count and _sum series are its own.
func base(name string, fams map[string][]string) (string, bool) {
	if _, ok := fams[name]; ok {
		return name, true
	}
	for _, suffix := range []string{"_bucket", "_count", "_sum"} {
		if b, ok := strings.CutSuffix(name, suffix); ok {
			if _, ok := fams[b]; ok {
				return b, true
			}
		}
	}
	return "", false
}

// The dashboard names only metrics keygate exports, groups only by labels
// they have, and shows every keygate metric; each panel is well formed.
func TestDashboard(t *testing.T) {
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.Title == "" || d.UID == "" {
		t.Errorf("title %q, uid %q", d.Title, d.UID)
	}
	var vars []string
	for _, v := range d.Templating.List {
		vars = append(vars, v.Name)
	}
	if !slices.Contains(vars, "datasource") || !slices.Contains(vars, "instance") {
		t.Errorf("template variables %v, want datasource and instance", vars)
	}
	fams := allFamilies(t)
	shown := map[string]bool{}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.W <= 0 || p.GridPos.X+p.GridPos.W > 24 || p.GridPos.H <= 0 {
			t.Errorf("panel %q: grid position %+v outside the 24 columns", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if p.Title == "" || p.Datasource == nil || p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("panel %d %q: wants a title, the ${datasource} variable and targets", p.ID, p.Title)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("panel %q: refId %q missing or repeated", p.Title, tg.RefID)
			}
			refs[tg.RefID] = true
			checkExpr(t, p.Title, tg.Expr, fams, shown)
		}
	}
	for name := range fams {
		if strings.HasPrefix(name, "keygate_") && !shown[name] {
			t.Errorf("keygate exports %s, which no panel shows", name)
		}
	}
}

// checkExpr checks one query: balanced brackets, known metrics (marked
// shown), the instance variable applied, and by-clause labels the query's
// metrics have.
func checkExpr(t *testing.T, title, expr string, fams map[string][]string, shown map[string]bool) {
	t.Helper()
	if !balanced(expr) {
		t.Errorf("panel %q: unbalanced brackets in %s", title, expr)
	}
	labels := map[string]bool{"le": true, "instance": true, "job": true}
	names := metricName.FindAllString(expr, -1)
	if len(names) == 0 {
		t.Errorf("panel %q: %s names no metric", title, expr)
	}
	for _, n := range names {
		b, ok := base(n, fams)
		if !ok {
			t.Errorf("panel %q: %s is not a metric keygate exports", title, n)
			continue
		}
		shown[b] = true
		for _, l := range fams[b] {
			labels[l] = true
		}
	}
	if !strings.Contains(expr, `instance=~"$instance"`) {
		t.Errorf("panel %q: %s ignores the instance variable", title, expr)
	}
	for _, by := range byClause.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(by[1], ",") {
			if l = strings.TrimSpace(l); !labels[l] {
				t.Errorf("panel %q: groups by %q, a label none of its metrics has: %s", title, l, expr)
			}
		}
	}
}

func balanced(s string) bool {
	var stack []rune
	pairs := map[rune]rune{')': '(', ']': '[', '}': '{'}
	inStr := false
	for _, c := range s {
		switch {
		case c == '"':
			inStr = !inStr
		case inStr:
		case c == '(' || c == '[' || c == '{':
			stack = append(stack, c)
		case pairs[c] != 0:
			if len(stack) == 0 || stack[len(stack)-1] != pairs[c] {
				return false
			}
			stack = stack[:len(stack)-1]
		}
	}
	return len(stack) == 0 && !inStr
}
