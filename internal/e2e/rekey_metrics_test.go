package e2e

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/server"
	"github.com/keygate/keygate/internal/telemetry"
)

// TestRekeyMetrics: /metrics shows the root-key rotation as GET
// /v1/sys/rekey reports it: none before, under way once started, and when
// it is done every record counted rewrapped.
func TestRekeyMetrics(t *testing.T) {
	const admin = "admin-token-0123456789abcdef0123456789"
	l := startLive(t, server.Config{AdminToken: admin, Metrics: telemetry.New(),
		Node: &node.Config{DataDir: filepath.Join(t.TempDir(), "data"), Issuer: testIssuer, Audience: testAudience, Dev: true}})
	type gauges struct{ rewrapping, records, done float64 }
	scrape := func(when string) gauges {
		t.Helper()
		resp, body := do(t, http.MethodGet, l.admin+"/metrics", "", nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: /metrics: %d", when, resp.StatusCode)
		}
		var g gauges
		for name, dst := range map[string]*float64{"keygate_rekey_rewrapping": &g.rewrapping,
			"keygate_rekey_records": &g.records, "keygate_rekey_records_done": &g.done} {
			v, ok := metricValue(t, string(body), name)
			if !ok {
				t.Fatalf("%s: /metrics lacks %s:\n%s", when, name, grepLines(string(body), "keygate_rekey"))
			}
			*dst = v
		}
		return g
	}
	status := func() (st struct {
		State       string
		Done, Total float64
	}) {
		t.Helper()
		resp, body := do(t, http.MethodGet, l.admin+"/v1/sys/rekey", "", bearer(admin))
		if err := json.Unmarshal(body, &st); resp.StatusCode != http.StatusOK || err != nil {
			t.Fatalf("GET /v1/sys/rekey: %d %s %v", resp.StatusCode, body, err)
		}
		return st
	}

	if g := scrape("before any rotation"); g != (gauges{}) {
		t.Errorf("before any rotation: %+v, want all 0", g)
	}
	// One record a second: the rotation is under way for a few seconds.
	if resp, body := do(t, http.MethodPost, l.admin+"/v1/sys/rekey", `{"key":"`+randomKey(t)+`","rate":1}`, adminJSON(admin)); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("start: %d %s", resp.StatusCode, body)
	}
	if g := scrape("under way"); g.rewrapping != 1 || g.done > g.records {
		t.Errorf("under way (status %+v): %+v, want rewrapping 1 and done at most records", status(), g)
	}
	deadline := time.Now().Add(30 * time.Second)
	for status().State != "done" {
		if time.Now().After(deadline) {
			t.Fatalf("the rotation did not finish: %+v", status())
		}
		time.Sleep(200 * time.Millisecond)
	}
	st, g := status(), scrape("done")
	if g.rewrapping != 0 || g.records != st.Total || g.done != st.Done || g.records == 0 || g.done != g.records {
		t.Errorf("done: %+v, want rewrapping 0 and the status's %v of %v records (not 0) rewrapped", g, st.Done, st.Total)
	}
}
