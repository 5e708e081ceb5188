package e2e

import (
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

const forwardingRules = `
forward_auth:
  proxy: %s
  rules:
    - {path_prefix: /public, anonymous: true}
    - {path_prefix: /admin, scopes: [admin]}
    - {path_prefix: /}
`

func authStatus(t *testing.T, url string, headers map[string]string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestForwardingPresets checks which forwarding headers /auth trusts under
// each proxy preset, that a reload switches presets, and that under envoy
// forward-auth answers below /auth/ with the path after it.
func TestForwardingPresets(t *testing.T) {
	idp := newIDP(t)
	idp.publish(t, ecSigner(t, "k1"))
	c := startConfigured(t, configYAML(idp.srv.URL, strings.ReplaceAll(forwardingRules, "%s", "nginx")))
	nginxSays := map[string]string{"X-Original-Method": "GET", "X-Original-Uri": "/public/x", "X-Forwarded-Host": "h"}
	traefikSays := map[string]string{"X-Forwarded-Method": "GET", "X-Forwarded-Uri": "/admin/x", "X-Forwarded-Host": "h"}
	both := map[string]string{}
	for k, v := range nginxSays {
		both[k] = v
	}
	for k, v := range traefikSays {
		both[k] = v
	}
	if got := authStatus(t, c.url+"/auth", both); got != 200 {
		t.Fatalf("nginx preset: status %d, want 200 (X-Original-Uri names the anonymous path; X-Forwarded-* is ignored)", got)
	}
	if got := authStatus(t, c.url+"/auth", traefikSays); got != 401 {
		t.Fatalf("nginx preset without X-Original-*: status %d, want 401", got)
	}
	if got := authStatus(t, c.url+"/auth/public/x", nil); got != 404 {
		t.Fatalf("nginx preset: /auth/public/x answered %d, want 404 (only envoy serves below /auth/)", got)
	}

	reload := func(proxy string) {
		t.Helper()
		if err := os.WriteFile(c.path, []byte(configYAML(idp.srv.URL, strings.ReplaceAll(forwardingRules, "%s", proxy))), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := c.Reload(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	reload("traefik")
	if got := authStatus(t, c.url+"/auth", both); got != 401 {
		t.Fatalf("traefik preset: status %d, want 401 (X-Forwarded-Uri names /admin; X-Original-* is ignored)", got)
	}
	reload("auto")
	if got := authStatus(t, c.url+"/auth", both); got != 401 {
		t.Fatalf("auto: status %d, want 401 for disagreeing forwarding headers", got)
	}
	if got := authStatus(t, c.url+"/auth", nginxSays); got != 200 {
		t.Fatalf("auto with nginx's headers only: status %d, want 200", got)
	}
	reload("envoy")
	for _, tc := range []struct {
		path    string
		headers map[string]string
		want    int
	}{
		{"/auth/public/x", nil, 200},
		{"/auth/admin/x", nil, 401},
		{"/auth/admin/x", both, 401},
		{"/auth", nil, 401},
	} {
		if got := authStatus(t, c.url+tc.path, tc.headers); got != tc.want {
			t.Errorf("envoy: %s with %v: status %d, want %d", tc.path, tc.headers, got, tc.want)
		}
	}
	scrapeDeadline := time.Now().Add(2 * time.Second)
	for !strings.Contains(scrape(t, c), `keygate_decisions_total{frontend="forward_auth",reason="forwarded_header_conflict",result="deny"} 1`) {
		if time.Now().After(scrapeDeadline) {
			t.Fatalf("the conflict is not counted:\n%s", grepLines(scrape(t, c), "forwarded_header"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
