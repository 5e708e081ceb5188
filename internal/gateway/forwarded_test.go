package gateway

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/keygate/keygate/internal/verify"
)

func TestForwardingTarget(t *testing.T) {
	type want struct{ method, host, path, problem string }
	cases := []struct {
		name    string
		proxy   string // preset; "custom" uses X-Real-Method / X-Real-Uri and the own host
		target  string // the /auth request's own path
		headers [][2]string
		want    want
	}{
		{"auto: nothing forwarded is the request itself", ProxyAuto, "/auth", nil, want{"GET", "keygate", "/auth", ""}},
		{"auto: traefik headers", ProxyAuto, "/auth", [][2]string{{"X-Forwarded-Method", "POST"}, {"X-Forwarded-Uri", "/a?q=1"}, {"X-Forwarded-Host", "h"}},
			want{"POST", "h", "/a", ""}},
		{"auto: nginx headers", ProxyAuto, "/auth", [][2]string{{"X-Original-Method", "PUT"}, {"X-Original-Uri", "/b?q=1"}}, want{"PUT", "keygate", "/b", ""}},
		// A raw '#' stays, for the path to refuse (Router.Match).
		{"auto: a raw # in the path", ProxyAuto, "/auth", [][2]string{{"X-Original-Uri", "/b#/../a?q"}}, want{"GET", "keygate", "/b#/../a", ""}},
		{"auto: both families agreeing", ProxyAuto, "/auth", [][2]string{{"X-Original-Uri", "/b"}, {"X-Forwarded-Uri", "/b"}}, want{"GET", "keygate", "/b", ""}},
		{"auto: uri families disagree", ProxyAuto, "/auth", [][2]string{{"X-Original-Uri", "/admin"}, {"X-Forwarded-Uri", "/public"}}, want{problem: ReasonForwardedConflict}},
		{"auto: method families disagree", ProxyAuto, "/auth", [][2]string{{"X-Original-Method", "DELETE"}, {"X-Forwarded-Method", "GET"}}, want{problem: ReasonForwardedConflict}},
		{"auto: uri repeated", ProxyAuto, "/auth", [][2]string{{"X-Forwarded-Uri", "/a"}, {"X-Forwarded-Uri", "/a"}}, want{problem: ReasonForwardedRepeated}},
		{"auto: host repeated", ProxyAuto, "/auth", [][2]string{{"X-Forwarded-Host", "a"}, {"X-Forwarded-Host", "b"}}, want{problem: ReasonForwardedRepeated}},
		{"nginx: X-Forwarded-* ignored", ProxyNginx, "/auth", [][2]string{{"X-Original-Method", "DELETE"}, {"X-Original-Uri", "/admin"},
			{"X-Forwarded-Host", "h"}, {"X-Forwarded-Uri", "/public"}, {"X-Forwarded-Method", "GET"}}, want{"DELETE", "h", "/admin", ""}},
		{"nginx: X-Original-Uri missing", ProxyNginx, "/auth", [][2]string{{"X-Original-Method", "GET"}, {"X-Forwarded-Host", "h"}, {"X-Forwarded-Uri", "/public"}},
			want{problem: ReasonForwardedMissing}},
		{"nginx: X-Forwarded-Host missing", ProxyNginx, "/auth", [][2]string{{"X-Original-Method", "GET"}, {"X-Original-Uri", "/a"}},
			want{problem: ReasonForwardedMissing}},
		{"traefik: X-Original-* ignored", ProxyTraefik, "/auth", [][2]string{{"X-Forwarded-Method", "DELETE"}, {"X-Forwarded-Uri", "/admin"},
			{"X-Forwarded-Host", "h"}, {"X-Original-Uri", "/public"}, {"X-Original-Method", "GET"}}, want{"DELETE", "h", "/admin", ""}},
		{"caddy: method repeated", ProxyCaddy, "/auth", [][2]string{{"X-Forwarded-Method", "GET"}, {"X-Forwarded-Method", "GET"},
			{"X-Forwarded-Uri", "/a"}, {"X-Forwarded-Host", "h"}}, want{problem: ReasonForwardedRepeated}},
		{"envoy: forwarding headers ignored, path after /auth", ProxyEnvoy, "/auth/admin/x?q", [][2]string{{"X-Forwarded-Uri", "/public"},
			{"X-Original-Uri", "/public"}, {"X-Forwarded-Host", "public"}, {"X-Forwarded-Method", "PUT"}}, want{"GET", "keygate", "/admin/x", ""}},
		{"envoy: the root", ProxyEnvoy, "/auth", nil, want{"GET", "keygate", "/", ""}},
		{"envoy: a sibling of /auth is not under it", ProxyEnvoy, "/authz/x", nil, want{"GET", "keygate", "/authz/x", ""}},
		{"custom: own host, named headers", ProxyCustom, "/auth", [][2]string{{"X-Real-Method", "PATCH"}, {"X-Real-Uri", "/c"}, {"X-Forwarded-Host", "evil"}},
			want{"PATCH", "keygate", "/c", ""}},
		{"custom: named header missing", ProxyCustom, "/auth", [][2]string{{"X-Real-Method", "PATCH"}, {"X-Forwarded-Uri", "/c"}},
			want{problem: ReasonForwardedMissing}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var fw Forwarding
			if tc.proxy == ProxyCustom {
				fw = CustomForwarding(ProxyCustom, "x-real-method", "X-REAL-URI", "")
			} else {
				var err error
				if fw, err = Preset(tc.proxy); err != nil {
					t.Fatal(err)
				}
			}
			r := httptest.NewRequest(http.MethodGet, "http://keygate"+tc.target, nil)
			for _, h := range tc.headers {
				r.Header.Add(h[0], h[1])
			}
			var got want
			got.method, got.host, got.path, _, got.problem = fw.target(r)
			if got != tc.want {
				t.Errorf("target = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestPresetUnknown(t *testing.T) {
	if _, err := Preset("haproxy"); err == nil {
		t.Fatal("an unknown proxy name was accepted")
	}
}

// TestForwardAuthForwardedRefusals checks that a refused forwarding header
// is answered 401 invalid_request (nginx shows a 400 as a 500) and counted
// under its reason.
func TestForwardAuthForwardedRefusals(t *testing.T) {
	f := newFixtureWith(t, []Route{{PathPrefix: "/public", Anonymous: true}, {PathPrefix: "/"}}, "", Forwarding{})
	w := f.do(request{headers: map[string]string{"X-Forwarded-Uri": "/public/x", "X-Original-Uri": "/admin"}})
	if w.Code != http.StatusUnauthorized {
		t.Fatalf("status %d, want 401 (body %s)", w.Code, w.Body)
	}
	if want := `Bearer realm="keygate", error="invalid_request", error_description="forwarding headers disagree on the request: X-Forwarded-Uri, X-Original-Uri"`; w.Header().Get("WWW-Authenticate") != want {
		t.Errorf("WWW-Authenticate %q, want %q", w.Header().Get("WWW-Authenticate"), want)
	}
	if want := `{"error":"invalid_request","error_description":"forwarding headers disagree on the request: X-Forwarded-Uri, X-Original-Uri"}`; w.Body.String() != want {
		t.Errorf("body %s, want %s", w.Body, want)
	}
	mfs, err := f.metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "keygate_decisions_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == ReasonForwardedConflict && m.GetCounter().GetValue() == 1 {
					return
				}
			}
		}
	}
	t.Errorf("no keygate_decisions_total{reason=%q} of 1", ReasonForwardedConflict)
}

// TestForwardedRefusalNamesHeader: a refusal for a forwarding header names
// it, so that whoever sets up the proxy knows which header to add or fix.
func TestForwardedRefusalNamesHeader(t *testing.T) {
	nginx, _ := Preset(ProxyNginx)
	f := newFixtureWith(t, []Route{{PathPrefix: "/", Anonymous: true}}, "", nginx)
	for _, c := range []struct {
		name    string
		headers map[string]string
		want    string
	}{
		{"nothing forwarded", nil, "a forwarding header the proxy should set is missing: X-Original-Method"},
		{"no URI", map[string]string{"X-Original-Method": "GET", "X-Forwarded-Host": "h"}, "is missing: X-Original-Uri"},
		{"no host", map[string]string{"X-Original-Method": "GET", "X-Original-URI": "/"}, "is missing: X-Forwarded-Host"},
	} {
		w := f.do(request{headers: c.headers})
		if w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), c.want+`"`) || !strings.Contains(w.Header().Get("WWW-Authenticate"), c.want) {
			t.Errorf("%s: %d %s %q, want 401 ending %q", c.name, w.Code, w.Body, w.Header().Get("WWW-Authenticate"), c.want)
		}
	}
	w := f.do(request{headers: map[string]string{"X-Original-Method": "GET", "X-Original-URI": "/", "X-Forwarded-Host": "h"}})
	if w.Code != http.StatusOK {
		t.Errorf("every header set: %d %s", w.Code, w.Body)
	}
}

// TestEnvoyOwnPathAsSent: under envoy the path decided on is the check
// request's own target as sent, read like every other path: a raw
// backslash is refused, not re-encoded into an encoded slash a rule may
// allow.
func TestEnvoyOwnPathAsSent(t *testing.T) {
	envoy, _ := Preset(ProxyEnvoy)
	f := newFixtureWith(t, []Route{{PathPrefix: "/files", Anonymous: true, AllowEncodedSlashes: true}, {PathPrefix: "/"}}, "", envoy)
	for target, want := range map[string]int{"/auth/files/a%2Fb": 200, "/auth/files/a\\b": 403} {
		w := f.do(request{target: target})
		if w.Code != want {
			t.Errorf("%s: status %d, want %d (body %s)", target, w.Code, want, w.Body)
		}
	}
}

// metricValue returns the value of the counter name with exactly labels
// (name=value pairs), or 0 when there is none.
func metricValue(t *testing.T, f *fixture, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := f.metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel())*2 != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if !slices.Contains(pairs(labels), l.GetName()+"="+l.GetValue()) {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

func pairs(kv []string) []string {
	var out []string
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, kv[i]+"="+kv[i+1])
	}
	return out
}

// TestForwardAuthForwardingSignals: under a named preset, forwarding
// headers from the client that the preset does not trust are ignored and
// counted, once a request, without a refusal; a trusted header repeated or
// missing is refused and counted under its reason, under a preset and under
// auto alike.
func TestForwardAuthForwardingSignals(t *testing.T) {
	nginx, _ := Preset(ProxyNginx)
	f := newFixtureWith(t, []Route{{PathPrefix: "/public", Anonymous: true}, {PathPrefix: "/"}}, "", nginx)
	send := func(f *fixture, headers [][2]string) int {
		r := httptest.NewRequest(http.MethodGet, "/auth", nil)
		for _, h := range headers {
			r.Header[h[0]] = append(r.Header[h[0]], h[1])
		}
		w := httptest.NewRecorder()
		f.handler.ServeHTTP(w, r)
		return w.Code
	}
	own := [][2]string{{"X-Original-Method", "GET"}, {"X-Original-Uri", "/public/x"}, {"X-Forwarded-Host", "h"}}
	untrusted := func() float64 {
		return metricValue(t, f, "keygate_request_signals_total", "frontend", "forward_auth", "reason", ReasonUntrustedForwarding)
	}
	for _, tc := range []struct {
		extra  [][2]string
		status int
		counts float64 // untrusted_forwarding_header after the request
	}{
		{nil, 200, 0},
		{[][2]string{{"X-Forwarded-Uri", "/admin"}}, 200, 1},
		{[][2]string{{"X-Forwarded-Method", "DELETE"}, {"X-Forwarded-Uri", "/admin"}}, 200, 2}, // once a request
		{[][2]string{{"X_forwarded_uri", "/admin"}, {"X-Forwarded-For", "10.0.0.1"}}, 200, 2},  // not headers keygate reads
	} {
		if code := send(f, append(slices.Clone(own), tc.extra...)); code != tc.status {
			t.Errorf("%v: status %d, want %d", tc.extra, code, tc.status)
		}
		if got := untrusted(); got != tc.counts {
			t.Errorf("%v: %s counted %v, want %v", tc.extra, ReasonUntrustedForwarding, got, tc.counts)
		}
	}
	deny := func(f *fixture, reason string) float64 {
		return metricValue(t, f, "keygate_decisions_total", "frontend", "forward_auth", "result", "deny", "reason", reason)
	}
	if code := send(f, append(slices.Clone(own), [2]string{"X-Original-Uri", "/public/y"})); code != 401 || deny(f, ReasonForwardedRepeated) != 1 {
		t.Errorf("X-Original-Uri repeated: status %d, %s counted %v; want 401, 1", code, ReasonForwardedRepeated, deny(f, ReasonForwardedRepeated))
	}
	if code := send(f, own[1:]); code != 401 || deny(f, ReasonForwardedMissing) != 1 {
		t.Errorf("X-Original-Method missing: status %d, %s counted %v; want 401, 1", code, ReasonForwardedMissing, deny(f, ReasonForwardedMissing))
	}
	auto := newFixtureWith(t, []Route{{PathPrefix: "/"}}, "", Forwarding{})
	if code := send(auto, [][2]string{{"X-Forwarded-Host", "a"}, {"X-Forwarded-Host", "a"}}); code != 401 || deny(auto, ReasonForwardedRepeated) != 1 {
		t.Errorf("auto, X-Forwarded-Host repeated: status %d, counted %v; want 401, 1", code, deny(auto, ReasonForwardedRepeated))
	}
	send(auto, [][2]string{{"X-Forwarded-Uri", "/a"}, {"X-Original-Uri", "/a"}})
	if got := metricValue(t, auto, "keygate_request_signals_total", "frontend", "forward_auth", "reason", ReasonUntrustedForwarding); got != 0 {
		t.Errorf("auto trusts both families, yet %v counted", got)
	}
}

// TestForwardAuthAutoHostWarning: rules that match on host under auto
// are warned about once, when the handler is built (at start and on each
// reload), never per request; a named preset and the proxy, which reads
// the request's own Host, are not.
func TestForwardAuthAutoHostWarning(t *testing.T) {
	hostRules := []Route{{Host: "admin.example", Scopes: []string{"admin"}}, {PathPrefix: "/"}}
	for _, tc := range []struct {
		name   string
		build  func(*slog.Logger) (http.Handler, error)
		warned int
	}{
		{"auto with a host rule", func(l *slog.Logger) (http.Handler, error) {
			return NewForwardAuth(ForwardAuthConfig{Verifier: nopVerifier{}, Routes: hostRules, Logger: l})
		}, 1},
		{"auto without host rules", func(l *slog.Logger) (http.Handler, error) {
			return NewForwardAuth(ForwardAuthConfig{Verifier: nopVerifier{}, Routes: hostRules[1:], Logger: l})
		}, 0},
		{"nginx with a host rule", func(l *slog.Logger) (http.Handler, error) {
			nginx, _ := Preset(ProxyNginx)
			return NewForwardAuth(ForwardAuthConfig{Verifier: nopVerifier{}, Routes: hostRules, Forwarding: nginx, Logger: l})
		}, 0},
		{"the proxy with a host route", func(l *slog.Logger) (http.Handler, error) {
			return NewProxy(ProxyConfig{Verifier: nopVerifier{}, Logger: l, Routes: []Route{
				{Host: "admin.example", Upstream: "http://127.0.0.1:1"}, {Upstream: "http://127.0.0.1:1"}}})
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			h, err := tc.build(slog.New(slog.NewTextHandler(&buf, nil)))
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				r := httptest.NewRequest(http.MethodGet, "/auth", nil)
				r.Header.Set("X-Forwarded-Host", "admin.example")
				h.ServeHTTP(httptest.NewRecorder(), r)
			}
			if got := strings.Count(buf.String(), "X-Forwarded-Host"); got != tc.warned {
				t.Errorf("%d log lines name X-Forwarded-Host, want %d:\n%s", got, tc.warned, buf.String())
			}
		})
	}
}

// nopVerifier refuses every token.
type nopVerifier struct{}

func (nopVerifier) Verify(context.Context, string) (*verify.Result, error) {
	return nil, verify.ErrInsufficientScope
}
