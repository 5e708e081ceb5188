package e2e

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/server"
	"github.com/keygate/keygate/internal/testnet"
)

// TestAccessLog: with access_log enabled, every forward-auth decision is
// one JSON line with its front end, request, status, reason, issuer,
// subject, kid, latency and a traceparent's trace id; the token, the
// Authorization header and other claims never appear; sample_allowed 0
// writes refusals only.
func TestAccessLog(t *testing.T) {
	for _, c := range []struct {
		name        string
		sample      *float64
		wantAllowed bool
	}{{"every decision", nil, true}, {"refusals only", new(0.0), false}} {
		t.Run(c.name, func(t *testing.T) {
			var buf testnet.SyncBuffer
			gw := &config.Config{AccessLog: config.AccessLog{Enabled: true, SampleAllowed: c.sample}}
			gw.SetDefaults()
			l := startLive(t, server.Config{Gateway: gw, AccessLogWriter: &buf,
				Node: &node.Config{DataDir: filepath.Join(t.TempDir(), "data"), Issuer: testIssuer, Audience: testAudience, Dev: true}})
			b := l.Bootstrap()
			tok := clientToken(t, l.base, b.DemoClientID, b.DemoClientSecret)
			const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
			h := bearer(tok)
			h.Set("Traceparent", tp)
			h.Set("X-Forwarded-Uri", "/orders/7?secret=query")
			h.Set("X-Forwarded-Method", "POST")
			if resp, _ := do(t, http.MethodGet, l.base+"/auth", "", h); resp.StatusCode != http.StatusOK {
				t.Fatalf("/auth: %d", resp.StatusCode)
			}
			if resp, _ := do(t, http.MethodGet, l.base+"/auth", "", bearer(tok+"x")); resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("/auth with a bad token: %d", resp.StatusCode)
			}
			logs := buf.String()
			if strings.Contains(logs, tok) || strings.Contains(logs, tok[:40]) || strings.Contains(logs, "Bearer") ||
				strings.Contains(logs, "secret=query") || strings.Contains(logs, b.DemoClientSecret) {
				t.Fatalf("the access log holds a token, a header or the query:\n%s", logs)
			}
			var lines []map[string]any
			for _, ln := range strings.Split(strings.TrimSpace(logs), "\n") {
				var m map[string]any
				if err := json.Unmarshal([]byte(ln), &m); err != nil {
					t.Fatalf("not a JSON line: %q", ln)
				}
				lines = append(lines, m)
			}
			var allowed, refused map[string]any
			for _, m := range lines {
				switch m["status"] {
				case 200.0:
					allowed = m
				case 401.0:
					refused = m
				}
			}
			if refused == nil || refused["reason"] != "malformed" || refused["frontend"] != "forward_auth" || refused["msg"] != "decision" {
				t.Errorf("refusal line: %v", refused)
			}
			if !c.wantAllowed {
				if allowed != nil {
					t.Errorf("sample_allowed 0 wrote an allowed decision: %v", allowed)
				}
				return
			}
			if allowed == nil {
				t.Fatalf("no allowed line in:\n%s", logs)
			}
			for k, want := range map[string]any{"frontend": "forward_auth", "method": "POST", "path": "/orders/7", "issuer": testIssuer,
				"subject": b.DemoClientID, "kid": l.Thumbprint(), "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"} {
				if allowed[k] != want {
					t.Errorf("allowed line %s = %v, want %v", k, allowed[k], want)
				}
			}
			if _, ok := allowed["latency_us"].(float64); !ok {
				t.Errorf("allowed line has no latency: %v", allowed)
			}
			for _, k := range []string{"scope", "jti", "aud", "client_id", "tenant"} {
				if _, ok := allowed[k]; ok {
					t.Errorf("allowed line carries %s", k)
				}
			}
		})
	}
}
