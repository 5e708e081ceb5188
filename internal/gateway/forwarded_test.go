package gateway

import (
	"net/http"
	"net/http/httptest"
	"testing"
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
		{"auto: nginx headers", ProxyAuto, "/auth", [][2]string{{"X-Original-Method", "PUT"}, {"X-Original-Uri", "/b#f"}}, want{"PUT", "keygate", "/b", ""}},
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
			got.method, got.host, got.path, got.problem = fw.target(r)
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
	if want := `Bearer realm="keygate", error="invalid_request", error_description="forwarding headers disagree on the request"`; w.Header().Get("WWW-Authenticate") != want {
		t.Errorf("WWW-Authenticate %q, want %q", w.Header().Get("WWW-Authenticate"), want)
	}
	if want := `{"error":"invalid_request","error_description":"forwarding headers disagree on the request"}`; w.Body.String() != want {
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
