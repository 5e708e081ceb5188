package gateway

import (
	"fmt"
	"net/textproto"
	"strings"
)

// Snippet is what a proxy configuration in front of forward-auth needs to
// know: where keygate listens, where the protected application is, and
// every claim header keygate sets on a 200. `keygate config nginx|caddy|
// traefik` prints the blocks, and the real-proxy tests run exactly these,
// so the docs, the tests and a user's set-up cannot drift apart.
//
// Each block overwrites or removes every claim header on the request it
// passes to the application, whether keygate sent a value or not, in any
// case and in every spelling with '_' for some '-' (CGI-style applications,
// PHP among them, read X_Auth_Scopes as X-Auth-Scopes): a client's forged
// X-Auth-Scopes never arrives.
type Snippet struct {
	Keygate string   // host:port where the proxy reaches keygate's traffic listener
	App     string   // host:port of the protected application
	Headers []string // claim headers
}

func (s Snippet) check() error {
	for _, h := range s.Headers {
		for _, c := range h {
			if !(c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
				return fmt.Errorf("claim header %q: a proxy configuration can only copy headers of letters, digits and '-'", h)
			}
		}
	}
	return nil
}

// Underscored returns h's other spellings, with '_' for one or more of its
// '-', in canonical case: names CGI-style applications (PHP, anything that
// reads a CGI, FastCGI or WSGI environment) read as h, which a front end
// must remove from the request it passes on.
func Underscored(h string) []string { return underscored(h) }

// underscored returns h's other spellings, with '_' for one or more of its
// '-', in canonical case.
func underscored(h string) []string {
	h = textproto.CanonicalMIMEHeaderKey(h)
	var dashes []int
	for i := 0; i < len(h); i++ {
		if h[i] == '-' {
			dashes = append(dashes, i)
		}
	}
	out := make([]string, 0, 1<<len(dashes)-1)
	for mask := 1; mask < 1<<len(dashes); mask++ {
		b := []byte(h)
		for j, i := range dashes {
			if mask&(1<<j) != 0 {
				b[i] = '_'
			}
		}
		out = append(out, string(b))
	}
	return out
}

// nginxVar is the variable name nginx gives a response header: lower case,
// '-' as '_'.
func nginxVar(h string) string { return strings.ReplaceAll(strings.ToLower(h), "-", "_") }

// Nginx returns the two locations of an nginx server block: the internal
// auth_request target and the protected location. Run keygate with
// --proxy nginx: it then trusts only the headers set here.
func (s Snippet) Nginx() (string, error) {
	if err := s.check(); err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, `# keygate forward-auth for nginx (keygate config nginx); run keygate with --proxy nginx.
# Tokens over 8 KiB need larger header buffers in the http or server block:
#   large_client_header_buffers 4 64k;
location = /_keygate {
  internal;
  proxy_pass http://%s%s;
  proxy_pass_request_body off;
  proxy_set_header Content-Length "";
  proxy_set_header X-Original-URI $request_uri;
  proxy_set_header X-Original-Method $request_method;
  proxy_set_header X-Forwarded-Host $host;
}
location / {
  auth_request /_keygate;
`, s.Keygate, AuthPath)
	for _, h := range s.Headers {
		fmt.Fprintf(&b, "  auth_request_set $keygate_%s $upstream_http_%s;\n", nginxVar(h), nginxVar(h))
	}
	b.WriteString("  # Set on every request, empty or not: a client's own copy never reaches the app.\n")
	for _, h := range s.Headers {
		fmt.Fprintf(&b, "  proxy_set_header %s $keygate_%s;\n", textproto.CanonicalMIMEHeaderKey(h), nginxVar(h))
	}
	b.WriteString("  # Spellings with _ for -, which CGI-style apps read as the same header, are removed\n")
	b.WriteString("  # (nginx drops them itself unless underscores_in_headers is on).\n")
	for _, h := range s.Headers {
		for _, u := range underscored(h) {
			fmt.Fprintf(&b, "  proxy_set_header %s \"\";\n", u)
		}
	}
	fmt.Fprintf(&b, "  proxy_pass http://%s;\n}\n", s.App)
	return b.String(), nil
}

// Caddy returns a route for a Caddyfile site block. Run keygate with
// --proxy caddy. A route keeps the directives in the order written: outside
// one, Caddy runs forward_auth before request_header, which would delete
// the headers keygate just answered with.
func (s Snippet) Caddy() (string, error) {
	if err := s.check(); err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("# keygate forward-auth for Caddy (keygate config caddy); run keygate with --proxy caddy.\n")
	b.WriteString("route {\n")
	b.WriteString("\t# Claim headers are removed first: a client's own copy never reaches the app,\n")
	b.WriteString("\t# whatever keygate answers; so are their spellings with _ for -, which\n")
	b.WriteString("\t# CGI-style apps read as the same header.\n")
	for _, h := range s.Headers {
		fmt.Fprintf(&b, "\trequest_header -%s\n", textproto.CanonicalMIMEHeaderKey(h))
		for _, u := range underscored(h) {
			fmt.Fprintf(&b, "\trequest_header -%s\n", u)
		}
	}
	fmt.Fprintf(&b, "\tforward_auth %s {\n\t\turi %s\n\t\tcopy_headers", s.Keygate, AuthPath)
	for _, h := range s.Headers {
		b.WriteString(" " + textproto.CanonicalMIMEHeaderKey(h))
	}
	fmt.Fprintf(&b, "\n\t}\n\treverse_proxy %s\n}\n", s.App)
	return b.String(), nil
}

// Traefik returns a dynamic-configuration file (file provider) defining a
// keygate ForwardAuth middleware and a router using it. Run keygate with
// --proxy traefik. Traefik deletes every authResponseHeaders header from
// the request before copying keygate's, and every header whose name
// authResponseHeadersRegex matches (in Go's canonical form): each claim
// header in any case and with '_' for any '-'.
func (s Snippet) Traefik() (string, error) {
	if err := s.check(); err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, `# keygate forward-auth for Traefik (keygate config traefik); run keygate with --proxy traefik.
http:
  middlewares:
    keygate:
      forwardAuth:
        address: http://%s%s
        trustForwardHeader: false
        authResponseHeaders:
`, s.Keygate, AuthPath)
	alts := make([]string, len(s.Headers))
	for i, h := range s.Headers {
		fmt.Fprintf(&b, "          - %s\n", textproto.CanonicalMIMEHeaderKey(h))
		alts[i] = strings.ReplaceAll(textproto.CanonicalMIMEHeaderKey(h), "-", "[-_]")
	}
	if len(alts) > 0 {
		b.WriteString("        # Also removes their spellings with _ for -, which CGI-style apps read as the same header.\n")
		fmt.Fprintf(&b, "        authResponseHeadersRegex: '(?i)^(%s)$'\n", strings.Join(alts, "|"))
	}
	fmt.Fprintf(&b, `  routers:
    app:
      rule: PathPrefix(%s)
      middlewares: [keygate]
      service: app
  services:
    app:
      loadBalancer:
        servers:
          - url: http://%s
`, "`/`", s.App)
	return b.String(), nil
}
