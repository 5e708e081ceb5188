package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/server"
	"github.com/keygate/keygate/internal/telemetry"
)

func adminReq(t *testing.T, method, url, host, token string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 40 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestAdminSurface: pprof is off unless enabled, then behind the admin
// token and never the command line; /metrics can require its own token;
// the admin listener answers only to IP addresses, localhost and the
// configured host names.
func TestAdminSurface(t *testing.T) {
	const admin, scrape = "admin-token-0123456789-0123456789-abcdef", "scrape-token-0123456789-0123456789-abcdef"
	t.Run("defaults", func(t *testing.T) {
		l := startLive(t, server.Config{AdminToken: admin, Metrics: telemetry.New(),
			Node: &node.Config{DataDir: filepath.Join(t.TempDir(), "d"), Issuer: testIssuer, Audience: testAudience, Dev: true}})
		for _, p := range []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/profile?seconds=1", "/debug/pprof/heap"} {
			if got := adminReq(t, "GET", l.admin+p, "", admin); got != 404 {
				t.Errorf("GET %s with the admin token: %d, want 404 (pprof is off)", p, got)
			}
		}
		if got := adminReq(t, "GET", l.admin+"/metrics", "", ""); got != 200 {
			t.Errorf("/metrics without a scrape token configured: %d, want 200", got)
		}
	})
	t.Run("enabled", func(t *testing.T) {
		gw := &config.Config{Pprof: true, AdminHosts: []string{"admin.internal"}}
		gw.SetDefaults()
		l := startLive(t, server.Config{AdminToken: admin, MetricsToken: scrape, Metrics: telemetry.New(), Gateway: gw,
			Node: &node.Config{DataDir: filepath.Join(t.TempDir(), "d"), Issuer: testIssuer, Audience: testAudience, Dev: true}})
		for _, tc := range []struct {
			path, host, token string
			want              int
		}{
			{"/debug/pprof/", "", "", 401},
			{"/debug/pprof/", "", scrape, 401},
			{"/debug/pprof/", "", admin, 200},
			{"/debug/pprof/heap", "", admin, 200},
			{"/debug/pprof/goroutine?debug=2", "", admin, 200},
			{"/debug/pprof/symbol", "", admin, 200},
			{"/debug/pprof/cmdline", "", admin, 404},
			{"/debug/pprof/profile?seconds=1", "", "", 401},
			{"/metrics", "", "", 401},
			{"/metrics", "", admin, 401},
			{"/metrics", "", scrape, 200},
			{"/healthz", "evil.example:9090", "", 421},
			{"/metrics", "rebind.attacker.test", scrape, 421},
			{"/healthz", "localhost:9090", "", 200},
			{"/healthz", "LOCALHOST", "", 200},
			{"/healthz", "127.0.0.1:9090", "", 200},
			{"/healthz", "[::1]:9090", "", 200},
			{"/healthz", "10.1.2.3", "", 200},
			{"/healthz", "admin.internal:9090", "", 200},
			{"/healthz", "admin.internal.", "", 200},
			{"/healthz", "xadmin.internal", "", 421},
		} {
			if got := adminReq(t, "GET", l.admin+tc.path, tc.host, tc.token); got != tc.want {
				t.Errorf("GET %s (Host %q, token %.6s): %d, want %d", tc.path, tc.host, tc.token, got, tc.want)
			}
		}
	})
	t.Run("pprof needs an admin token", func(t *testing.T) {
		gw := gatewayWithIssuer(t)
		gw.Pprof = true
		_, err := server.New(t.Context(), server.Config{Gateway: gw})
		if err == nil || !strings.Contains(err.Error(), "admin token") {
			t.Fatalf("New with pprof and no admin token: %v, want an error naming the admin token", err)
		}
	})
	t.Run("tokens under 32 characters", func(t *testing.T) {
		short := filepath.Join(t.TempDir(), "short.token")
		if err := os.WriteFile(short, []byte(strings.Repeat("x", 31)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		metricsFile := gatewayWithIssuer(t)
		metricsFile.MetricsTokenFile = short
		adminFile := gatewayWithIssuer(t)
		adminFile.TokenService.AdminTokenFile = short
		for name, c := range map[string]server.Config{
			"admin token file":   {Gateway: adminFile},
			"admin token":        {AdminToken: strings.Repeat("x", 31)},
			"metrics token":      {MetricsToken: strings.Repeat("x", 31)},
			"metrics token file": {Gateway: metricsFile},
		} {
			if c.Gateway == nil {
				c.Gateway = gatewayWithIssuer(t)
			}
			if _, err := server.New(t.Context(), c); err == nil || !strings.Contains(err.Error(), "at least 32 characters") {
				t.Errorf("%s: New: %v, want at least 32 characters", name, err)
			}
		}
	})
}

// gatewayWithIssuer is a configuration with one issuer, whose key file
// need not exist until the runtime is built.
func gatewayWithIssuer(t *testing.T) *config.Config {
	t.Helper()
	c := &config.Config{Issuers: []config.Issuer{{Issuer: "https://idp.test/", KeyFiles: []string{filepath.Join(t.TempDir(), "k.pem")},
		Algorithms: []string{"ES256"}}}}
	c.SetDefaults()
	return c
}
