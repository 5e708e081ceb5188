package gateway

import (
	"maps"
	"net/http"
	"net/textproto"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestUnderscored(t *testing.T) {
	for h, want := range map[string][]string{
		"X-Auth-Scopes": {"X_Auth-Scopes", "X-Auth_Scopes", "X_Auth_Scopes"},
		"x-tenant":      {"X_Tenant"},
		"Subject":       {},
	} {
		if got := underscored(h); !slices.Equal(got, want) {
			t.Errorf("underscored(%q) = %q, want %q", h, got, want)
		}
	}
}

// TestTraefikSnippetRemovesClaimSpellings runs what Traefik's ForwardAuth
// does with authResponseHeaders and authResponseHeadersRegex after a 200
// (pkg/middlewares/auth/forward.go: delete each listed header, copy
// keygate's; delete every request header whose canonical name the regex
// matches, copy every matching response header) over the block `keygate
// config traefik` prints. Traefik itself is not installed here.
func TestTraefikSnippetRemovesClaimSpellings(t *testing.T) {
	out, err := Snippet{Keygate: "kg:8080", App: "app:80", Headers: []string{"X-Auth-Subject", "x-tenant"}}.Traefik()
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	var re *regexp.Regexp
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if h, ok := strings.CutPrefix(line, "- "); ok && !strings.HasPrefix(h, "url:") {
			listed = append(listed, h)
		}
		if r, ok := strings.CutPrefix(line, "authResponseHeadersRegex: "); ok {
			re = regexp.MustCompile(strings.Trim(r, "'"))
		}
	}
	if !slices.Equal(listed, []string{"X-Auth-Subject", "X-Tenant"}) || re == nil {
		t.Fatalf("authResponseHeaders %q, regex %v:\n%s", listed, re, out)
	}
	req := http.Header{}
	for _, forged := range []string{"X-Auth-Subject", "x-auth-subject", "x_auth_subject", "X_AUTH-SUBJECT", "X-Auth_Subject",
		"X-Tenant", "X_Tenant", "x_TENANT", "X-Other", "X_Other", "X-Auth-Subjects"} {
		k := textproto.CanonicalMIMEHeaderKey(forged)
		req[k] = append(req[k], "forged")
	}
	resp := http.Header{"X-Auth-Subject": {"alice"}, "X-Tenant": {""}, "Content-Type": {"application/json"}}
	for _, h := range listed {
		k := http.CanonicalHeaderKey(h)
		req.Del(k)
		if len(resp[k]) > 0 {
			req[k] = slices.Clone(resp[k])
		}
	}
	for k := range req {
		if re.MatchString(k) {
			req.Del(k)
		}
	}
	for k, v := range resp {
		if re.MatchString(k) {
			req[k] = slices.Clone(v)
		}
	}
	want := http.Header{"X-Auth-Subject": {"alice"}, "X-Tenant": {""}, "X-Other": {"forged"}, "X_other": {"forged"},
		"X-Auth-Subjects": {"forged"}}
	if !maps.EqualFunc(req, want, slices.Equal) {
		t.Errorf("the app gets %v, want %v", req, want)
	}
}
