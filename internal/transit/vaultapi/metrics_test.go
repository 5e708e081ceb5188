package vaultapi_test

import (
	"net/http"
	"testing"

	"github.com/keygate/keygate/internal/server"
	"github.com/keygate/keygate/internal/telemetry"
)

// Transit requests are counted by operation, result and reason, with their
// batch items and latency, on the node's /metrics.
func TestMetrics(t *testing.T) {
	m := telemetry.New()
	e := startConfig(t, server.Config{Metrics: m})
	tok := e.token("default", allScopes...)
	narrow := e.token("default", "transit:encrypt:other")
	for _, c := range []struct {
		tok, method, path, body string
		want                    int
	}{
		{tok, http.MethodPost, "/v1/transit/keys/k", ``, 200}, // Vault 1.x answers the key
		{tok, http.MethodPost, "/v1/transit/encrypt/k", `{"plaintext":"aGk="}`, 200},
		{tok, http.MethodPost, "/v1/transit/encrypt/k", `{"plaintext":"aGk="}`, 200},
		{tok, http.MethodPost, "/v1/transit/encrypt/k", `{"batch_input":[{"plaintext":"aGk="},{"plaintext":"not base64!"},{"plaintext":"aGk="}]}`, 400},
		{narrow, http.MethodPost, "/v1/transit/encrypt/k", `{"plaintext":"aGk="}`, 403},
		{tok, http.MethodPost, "/v1/transit/no/such/path", `{}`, 404},
	} {
		if code, body := e.call(c.tok, c.method, c.path, c.body); code != c.want {
			t.Fatalf("%s %s: %d %s, want %d", c.method, c.path, code, body, c.want)
		}
	}
	got := gatherAll(t, m)
	for k, v := range map[string]float64{
		`keygate_transit_requests_total{op="transit.keys.create",reason="",result="ok"}`:                    1,
		`keygate_transit_requests_total{op="transit.encrypt",reason="",result="ok"}`:                        2,
		`keygate_transit_requests_total{op="transit.encrypt",reason="batch_errors",result="refused"}`:       1,
		`keygate_transit_requests_total{op="transit.encrypt",reason="insufficient_scope",result="refused"}`: 1,
		`keygate_transit_requests_total{op="transit",reason="unsupported_path",result="refused"}`:           1,
		`keygate_transit_batch_items_total{op="transit.encrypt",result="ok"}`:                               2,
		`keygate_transit_batch_items_total{op="transit.encrypt",result="error"}`:                            1,
		`keygate_transit_request_seconds_count{op="transit.encrypt"}`:                                       4,
	} {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
}

func gatherAll(t *testing.T, m *telemetry.Metrics) map[string]float64 {
	t.Helper()
	out, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return out
}
