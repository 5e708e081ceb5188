package e2e

import (
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/server"
	"github.com/keygate/keygate/internal/telemetry"
)

// metricValue returns the value of a metric in a /metrics body, named with
// its labels as the exposition format writes them.
func metricValue(t *testing.T, body, name string) (float64, bool) {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v, true
}

// TestFleetMetrics: with Redis, /metrics on the admin listener shows the
// revocation set's staleness, not failing closed, and the decisions of the
// login and token limiters, each under its own label.
func TestFleetMetrics(t *testing.T) {
	redisURL, prefix := redisPrefix(t)
	l := startLive(t, server.Config{Metrics: telemetry.New(),
		Node: &node.Config{DataDir: filepath.Join(t.TempDir(), "data"), Issuer: testIssuer, Audience: testAudience, Dev: true,
			TokenService: config.TokenService{RedisURL: redisURL, RedisPrefix: prefix, RevocationMaxStaleness: 30 * time.Second, TokenRateLimit: new(100.0)}}})
	b := l.Bootstrap()
	h := form()
	req, _ := http.NewRequest(http.MethodPost, "/", nil)
	req.SetBasicAuth(b.DemoClientID, b.DemoClientSecret)
	h.Set("Authorization", req.Header.Get("Authorization"))
	login(t, l.base, h, "nobody")
	for range 3 {
		clientToken(t, l.base, b.DemoClientID, b.DemoClientSecret)
	}

	resp, body := do(t, http.MethodGet, l.admin+"/metrics", "", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	text := string(body)
	if v, ok := metricValue(t, text, "keygate_revocations_staleness_seconds"); !ok || v < 0 || v > 30 {
		t.Errorf("keygate_revocations_staleness_seconds = %v (present %v), want a few seconds at most", v, ok)
	}
	if v, ok := metricValue(t, text, "keygate_revocations_fail_closed"); !ok || v != 0 {
		t.Errorf("keygate_revocations_fail_closed = %v (present %v), want 0", v, ok)
	}
	for name, want := range map[string]float64{
		// A login attempt is limited per account and per address.
		`keygate_rate_limit_decisions_total{decided_by="redis",limiter="login"}`:    2,
		`keygate_rate_limit_decisions_total{decided_by="fallback",limiter="login"}`: 0,
		`keygate_rate_limit_degraded{limiter="login"}`:                              0,
		`keygate_rate_limit_decisions_total{decided_by="redis",limiter="token"}`:    3,
		`keygate_rate_limit_decisions_total{decided_by="fallback",limiter="token"}`: 0,
		`keygate_rate_limit_degraded{limiter="token"}`:                              0,
	} {
		if v, ok := metricValue(t, text, name); !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v\n%s", name, v, ok, want, grepLines(text, "keygate_rate_limit"))
		}
	}
}

// TestFleetMetricsFailClosed: with Redis unreachable and MaxStaleness set,
// /metrics shows the node failing closed.
func TestFleetMetricsFailClosed(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: a node with Redis unreachable; run without -short")
	}
	l := startLive(t, server.Config{Metrics: telemetry.New(),
		Node: &node.Config{DataDir: filepath.Join(t.TempDir(), "data"), Issuer: testIssuer, Audience: testAudience, Dev: true,
			TokenService: config.TokenService{RedisURL: "redis://127.0.0.1:1/0", RevocationMaxStaleness: 3 * time.Second}}})
	_, body := do(t, http.MethodGet, l.admin+"/metrics", "", nil)
	text := string(body)
	if v, ok := metricValue(t, text, "keygate_revocations_fail_closed"); !ok || v != 1 {
		t.Errorf("keygate_revocations_fail_closed = %v (present %v), want 1", v, ok)
	}
	if !strings.Contains(text, "keygate_revocations_staleness_seconds +Inf") {
		t.Errorf("staleness before any sync is not +Inf:\n%s", grepLines(text, "keygate_revocations"))
	}
}

// TestFleetMetricsAbsentWithoutRedis: a node without Redis has no
// shared-state metrics.
func TestFleetMetricsAbsentWithoutRedis(t *testing.T) {
	l := startLive(t, server.Config{Metrics: telemetry.New(),
		Node: &node.Config{DataDir: filepath.Join(t.TempDir(), "data"), Issuer: testIssuer, Audience: testAudience, Dev: true}})
	_, body := do(t, http.MethodGet, l.admin+"/metrics", "", nil)
	if strings.Contains(string(body), "keygate_revocations_") {
		t.Errorf("shared-state metrics without Redis:\n%s", grepLines(string(body), "keygate_revocations"))
	}
}

// TestTokenRequestMetrics: token service requests show on /metrics by
// endpoint, grant and result.
func TestTokenRequestMetrics(t *testing.T) {
	l := startLive(t, server.Config{Metrics: telemetry.New(),
		Node: &node.Config{DataDir: filepath.Join(t.TempDir(), "data"), Issuer: testIssuer, Audience: testAudience, Dev: true}})
	b := l.Bootstrap()
	for range 2 {
		clientToken(t, l.base, b.DemoClientID, b.DemoClientSecret)
	}
	if resp, _ := do(t, http.MethodPost, l.base+"/oauth2/token", "grant_type=client_credentials&client_id="+b.DemoClientID+"&client_secret=wrong", form()); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong secret: %d", resp.StatusCode)
	}
	_, body := do(t, http.MethodGet, l.admin+"/metrics", "", nil)
	text := string(body)
	for name, want := range map[string]float64{
		`keygate_token_requests_total{endpoint="token",grant="client_credentials",result="ok"}`: 2,
		`keygate_token_requests_total{endpoint="token",grant="",result="invalid_client"}`:       1,
		`keygate_token_request_seconds_count{endpoint="token"}`:                                 3,
		`keygate_signing_keys_published`:                                                        1,
		`keygate_signing_key_schedule_errors_total`:                                             0,
	} {
		if v, ok := metricValue(t, text, name); !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v\n%s", name, v, ok, want, grepLines(text, "keygate_"))
		}
	}
	// The dev key became active when the node made it, moments ago.
	if v, ok := metricValue(t, text, "keygate_signing_key_active_since_timestamp_seconds"); !ok || time.Since(time.Unix(int64(v), 0)) > time.Minute {
		t.Errorf("keygate_signing_key_active_since_timestamp_seconds = %v (present %v), want about now", v, ok)
	}
}

func grepLines(text, sub string) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
