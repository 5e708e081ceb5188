package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/audit"
	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/server"
	"github.com/keygate/keygate/internal/telemetry"
)

// pathSink is an audit sink that, once fail is set, fails as a file sink
// on a broken directory does: its name and error name the directory.
type pathSink struct {
	dir  string
	fail atomic.Bool
}

func (s *pathSink) Name() string { return "file:" + s.dir }
func (s *pathSink) Close() error { return nil }
func (s *pathSink) Write(context.Context, []audit.Line) error {
	if s.fail.Load() {
		return errors.New("open " + s.dir + "/audit-00000000000000000002.jsonl: permission denied")
	}
	return nil
}

// readyzBody is a /readyz answer.
type readyzBody struct {
	Status  string                    `json:"status"`
	Reasons []string                  `json:"reasons"`
	Details map[string]map[string]any `json:"details"`
}

func readyz(t *testing.T, url string) (int, string, readyzBody) {
	t.Helper()
	resp, body := do(t, http.MethodGet, url+"/readyz", "", nil)
	var rb readyzBody
	if err := json.Unmarshal(body, &rb); err != nil {
		t.Fatalf("%s/readyz: %s: %v", url, body, err)
	}
	return resp.StatusCode, string(body), rb
}

// TestReadyzProbeTellsCodesOnly: the probe listener, the one opened to
// load balancers and kubelets, says why a node is not ready in stable
// codes alone; the admin listener adds what each is about. With Redis
// unreachable, the audit directory failing and its disk nearly full, the
// probe's answer holds no path, address or error text, and the admin's
// holds each.
func TestReadyzProbeTellsCodesOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: nodes with Redis unreachable, failing audit sinks and a full disk; run without -short")
	}
	secretDir := filepath.Join(t.TempDir(), "secret-audit-dir")
	failing := &pathSink{dir: secretDir}
	tests := []struct {
		name   string
		cfg    func(dir string) *node.Config
		code   string
		leaks  func(dir string) []string // what the probe must not tell, and the admin listener does
		before func(l *live)
	}{
		{
			name: "redis unreachable",
			cfg: func(dir string) *node.Config {
				return &node.Config{DataDir: dir, Issuer: testIssuer, Audience: testAudience, Dev: true,
					TokenService: config.TokenService{RedisURL: "redis://127.0.0.1:1/0", RevocationMaxStaleness: 3 * time.Second}}
			},
			code:  server.ReasonRedisUnreachable,
			leaks: func(string) []string { return []string{"127.0.0.1:1", "connection refused"} },
		},
		{
			name: "audit directory failing",
			cfg: func(dir string) *node.Config {
				return auditNode(dir, config.Audit{File: config.AuditFile{Disabled: true}}, failing)
			},
			code:  server.ReasonAuditSinkFailing,
			leaks: func(string) []string { return []string{secretDir, "permission denied"} },
			before: func(l *live) {
				failing.fail.Store(true)
				do(t, http.MethodGet, l.admin+"/v1/admin/clients", "", bearer(auditAdminToken)) // a record, which fails
			},
		},
		{
			name: "audit disk nearly full",
			cfg: func(dir string) *node.Config {
				c := auditNode(dir, config.Audit{})
				c.AuditStatfs = func(string) (uint64, uint64, error) { return 300 << 20, 10 << 30, nil }
				return c
			},
			code:  server.ReasonAuditDiskLow,
			leaks: func(dir string) []string { return []string{filepath.Join(dir, config.DefaultAuditDir), "314572800"} },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			l := startLive(t, server.Config{AdminToken: auditAdminToken, Node: tt.cfg(dir)})
			if tt.before != nil {
				tt.before(l)
			}
			var probe, admin readyzBody
			var probeText, adminText string
			deadline := time.Now().Add(10 * time.Second)
			for {
				var pc, ac int
				pc, probeText, probe = readyz(t, l.probe)
				ac, adminText, admin = readyz(t, l.admin)
				if pc == 503 && ac == 503 && slices.Contains(probe.Reasons, tt.code) && slices.Contains(admin.Reasons, tt.code) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("not reported %s: probe %d %s, admin %d %s", tt.code, pc, probeText, ac, adminText)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if probe.Details != nil || strings.Contains(probeText, "reason\"") {
				t.Errorf("the probe's /readyz has details: %s", probeText)
			}
			for _, leak := range tt.leaks(dir) {
				if strings.Contains(probeText, leak) {
					t.Errorf("the probe's /readyz tells %q: %s", leak, probeText)
				}
				if !strings.Contains(adminText, leak) {
					t.Errorf("the admin listener's /readyz does not tell %q: %s", leak, adminText)
				}
			}
			if admin.Details[tt.code] == nil {
				t.Errorf("the admin listener's /readyz has no details of %s: %s", tt.code, adminText)
			}
			for _, c := range probe.Reasons {
				if !slices.Contains([]string{server.ReasonSealed, server.ReasonIssuerKeys, server.ReasonAuditSinkFailing, server.ReasonAuditDiskLow, server.ReasonRedisUnreachable}, c) {
					t.Errorf("the probe's /readyz gives %q, not one of the documented codes", c)
				}
			}
			if resp, body := do(t, http.MethodGet, l.probe+"/healthz", "", nil); resp.StatusCode != 200 || string(body) != `{"status":"ok"}`+"\n" {
				t.Errorf("the probe's /healthz: %d %s", resp.StatusCode, body)
			}
		})
	}
}

// TestAuditDiskLow: a nearly full audit disk (simulated) is reported well
// before writes fail: a warning in the log, keygate_audit_disk_free_bytes
// under keygate_audit_disk_min_free_bytes, /readyz audit_disk_low and the
// admin API's audit status; requests are still served and recorded. Once
// space is freed, readiness comes back.
func TestAuditDiskLow(t *testing.T) {
	var free atomic.Uint64
	free.Store(5 << 30)
	logs := &syncBuffer{}
	dir := filepath.Join(t.TempDir(), "data")
	nc := auditNode(dir, config.Audit{File: config.AuditFile{MinFree: 1 << 30}})
	nc.AuditStatfs = func(string) (uint64, uint64, error) { return free.Load(), 100 << 30, nil }
	l := startLive(t, server.Config{AdminToken: auditAdminToken, Metrics: telemetry.New(), Logger: slog.New(slog.NewTextHandler(logs, nil)), Node: nc})
	if code, body, _ := readyz(t, l.probe); code != 200 {
		t.Fatalf("readyz with room: %d %s", code, body)
	}
	free.Store(512 << 20)
	l.Tick(t.Context()) // the schedule looks, as writes do
	if !strings.Contains(logs.String(), "nearly full") || !strings.Contains(logs.String(), "free_bytes=536870912") {
		t.Errorf("no warning logged: %s", logs)
	}
	code, body, rb := readyz(t, l.probe)
	if code != 503 || !slices.Equal(rb.Reasons, []string{server.ReasonAuditDiskLow}) {
		t.Errorf("probe readyz with the disk nearly full: %d %s", code, body)
	}
	_, metrics := do(t, http.MethodGet, l.admin+"/metrics", "", nil)
	for _, m := range []string{"keygate_audit_disk_free_bytes 5.36870912e+08", "keygate_audit_disk_min_free_bytes 1.073741824e+09"} {
		if !strings.Contains(string(metrics), m) {
			t.Errorf("metrics lack %s", m)
		}
	}
	resp, status := do(t, http.MethodGet, l.admin+"/v1/admin/audit", "", bearer(auditAdminToken))
	if resp.StatusCode != 200 || !strings.Contains(string(status), `"low":true`) {
		t.Errorf("audit status: %d %s", resp.StatusCode, status)
	}
	if resp, body := do(t, http.MethodPost, l.admin+"/v1/admin/clients", `{"name":"still","scopes":["x"]}`, adminJSON(auditAdminToken)); resp.StatusCode != 201 {
		t.Errorf("an admin write with the disk nearly full: %d %s", resp.StatusCode, body)
	}
	free.Store(2 << 30)
	if code, body, _ := readyz(t, l.probe); code != 200 {
		t.Errorf("readyz after space was freed: %d %s", code, body)
	}
	if !strings.Contains(logs.String(), "has room again") {
		t.Errorf("the recovery was not logged: %s", logs)
	}
}
