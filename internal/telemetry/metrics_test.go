package telemetry

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/keygate/keygate/jose"
)

func TestMetrics(t *testing.T) {
	m := New()
	d := m.Decisions(FrontForwardAuth, []string{"expired", "bad_signature"})
	d.Allow()
	d.Allow()
	d.Deny("expired")
	d.Deny("novel_reason")
	done := d.Begin()
	m.Cache(func() (int, uint64, uint64) { return 7, 5, 2 })
	m.VerifyObserver()(context.Background(), jose.ES256, 40*time.Microsecond, true)
	m.JWKSFetch("https://idp", "ok", 3, time.Unix(1700000000, 0))
	m.JWKSFetch("https://idp", "timeout", 0, time.Time{})
	m.VerifyObserver()(context.Background(), jose.ES256, 50*time.Microsecond, true)
	m.Reload(false)

	want := map[string]float64{
		`keygate_decisions_total{frontend="forward_auth",reason="",result="allow"}`:            2,
		`keygate_decisions_total{frontend="forward_auth",reason="expired",result="deny"}`:      1,
		`keygate_decisions_total{frontend="forward_auth",reason="novel_reason",result="deny"}`: 1,
		`keygate_in_flight_requests{frontend="forward_auth"}`:                                  1,
		`keygate_cache_hits_total`:                                          5,
		`keygate_cache_misses_total`:                                        2,
		`keygate_cache_entries`:                                             7,
		`keygate_jwks_keys{issuer="https://idp"}`:                           3,
		`keygate_jwks_fetches_total{issuer="https://idp",result="timeout"}`: 1,
		`keygate_jwks_last_success_timestamp_seconds{issuer="https://idp"}`: 1700000000,
		`keygate_config_reloads_total{result="error"}`:                      1,
	}
	got := gather(t, m)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	done()
	if gather(t, m)[`keygate_in_flight_requests{frontend="forward_auth"}`] != 0 {
		t.Error("in-flight not decremented")
	}
	if n := testutil.CollectAndCount(m.verifySeconds); n != len(jose.Algorithms()) {
		t.Errorf("verify histogram series = %d", n)
	}
}

func TestTokenRequests(t *testing.T) {
	m := New()
	before := gather(t, m)
	if v, ok := before[`keygate_token_requests_total{endpoint="token",grant="client_credentials",result="ok"}`]; !ok || v != 0 {
		t.Errorf("the ok series does not start at zero: %v %v", v, ok)
	}
	m.TokenRequest(context.Background(), "token", "client_credentials", "ok", 40*time.Microsecond)
	m.TokenRequest(context.Background(), "token", "client_credentials", "ok", 60*time.Microsecond)
	m.TokenRequest(context.Background(), "token", "", "invalid_client", 10*time.Microsecond)
	got := gather(t, m)
	for k, v := range map[string]float64{
		`keygate_token_requests_total{endpoint="token",grant="client_credentials",result="ok"}`: 2,
		`keygate_token_requests_total{endpoint="token",grant="",result="invalid_client"}`:       1,
		`keygate_token_requests_total{endpoint="login",grant="password",result="ok"}`:           0,
	} {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if n := testutil.CollectAndCount(m.tokenSeconds); n != 1 {
		t.Errorf("token latency series = %d, want 1", n)
	}
}

func TestKeySchedule(t *testing.T) {
	m := New()
	since := time.Unix(1_800_000_000, 500_000_000)
	n := 2
	m.KeySchedule(func() (int, time.Time) { return n, since })
	m.KeyScheduleFailed()
	got := gather(t, m)
	for k, v := range map[string]float64{
		"keygate_signing_keys_published":                     2,
		"keygate_signing_key_active_since_timestamp_seconds": 1_800_000_000.5,
		"keygate_signing_key_schedule_errors_total":          1,
	} {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	// Read at scrape time.
	n, since = 3, time.Time{}
	got = gather(t, m)
	if got["keygate_signing_keys_published"] != 3 || got["keygate_signing_key_active_since_timestamp_seconds"] != 0 {
		t.Errorf("after a change: %v", got)
	}
}

// gather flattens the registry (Snapshot), failing the test on an error.
func gather(t *testing.T, m *Metrics) map[string]float64 {
	t.Helper()
	out, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func BenchmarkDeny(b *testing.B) {
	d := New().Decisions(FrontForwardAuth, []string{"expired"})
	b.ReportAllocs()
	for b.Loop() {
		d.Deny("expired")
	}
}

func TestAuditMetrics(t *testing.T) {
	m := New()
	a := m.Audit(func() []AuditSink { return []AuditSink{{Name: "file", Up: true}, {Name: "store", Up: false}} })
	a.Record(true)
	a.Record(true)
	a.Record(false)
	a.SinkFailure("store")
	a.Batch(3, 40*time.Microsecond)
	var none *AuditMetrics
	none.Record(true) // a nil *AuditMetrics counts nothing
	none.SinkFailure("file")
	none.Batch(1, time.Millisecond)
	got := gather(t, m)
	for k, v := range map[string]float64{
		`keygate_audit_records_total{result="written"}`:   2,
		`keygate_audit_records_total{result="failed"}`:    1,
		`keygate_audit_sink_failures_total{sink="store"}`: 1,
		`keygate_audit_sink_up{sink="file"}`:              1,
		`keygate_audit_sink_up{sink="store"}`:             0,
		`keygate_audit_commit_seconds_count`:              1,
		`keygate_audit_batch_records_sum`:                 3,
	} {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (%v), want %v", k, g, ok, v)
		}
	}
}
