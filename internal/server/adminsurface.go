package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"strings"
)

// credential is a secret checked against a request's bearer token: only
// its SHA-256 is kept, and digests are compared in constant time.
type credential struct {
	digest [sha256.Size]byte
	set    bool
}

func newCredential(token string) credential {
	if token == "" {
		return credential{}
	}
	return credential{digest: sha256.Sum256([]byte(token)), set: true}
}

// allows reports whether r carries the token. A credential that is not set
// allows nothing.
func (b credential) allows(r *http.Request) bool {
	v := r.Header.Get("Authorization")
	if !b.set || len(v) < 7 || !strings.EqualFold(v[:7], "bearer ") {
		return false
	}
	got := sha256.Sum256([]byte(v[7:]))
	return subtle.ConstantTimeCompare(got[:], b.digest[:]) == 1
}

// require answers 401 unless the request carries b's token.
func (b credential) require(realm string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !b.allows(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="`+realm+`"`)
			w.Header().Set("Cache-Control", "no-store")
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "unauthorized", "error_description": "a bearer token is required"})
			return
		}
		h.ServeHTTP(w, r)
	})
}

// readToken reads a token from file (trimmed), else takes value; "" when
// neither is set.
func readToken(what, file, value string) (string, error) {
	if file == "" {
		return value, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("server: %s: %w", what, err)
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < 32 {
		return "", fmt.Errorf("server: %s in %s: at least 32 characters are required", what, file)
	}
	return tok, nil
}

// openAdminSurface reads the credentials of the admin listener's
// operations endpoints: the admin token (which also guards pprof, even on a
// gateway-only node) and the optional metrics scrape token.
func (s *Server) openAdminSurface() error {
	if !s.operator.set {
		tok, err := readToken("admin token", s.cfg.AdminTokenFile, s.cfg.AdminToken)
		if err != nil {
			return err
		}
		s.operator = newCredential(tok)
	}
	if s.cfg.Pprof && !s.operator.set {
		return fmt.Errorf("server: pprof is enabled, but there is no admin token to guard it (--admin-token-file or KEYGATE_ADMIN_TOKEN)")
	}
	tok, err := readToken("metrics token", s.cfg.MetricsTokenFile, s.cfg.MetricsToken)
	if err != nil {
		return err
	}
	s.scraper = newCredential(tok)
	return nil
}

// addPprof serves the runtime profiles behind the admin token: CPU, heap,
// goroutine, block, mutex, allocs, threadcreate, symbol and trace. The
// command line is never served (it can hold a database URL with its
// password), and the index answers an unknown name, "cmdline" included,
// with 404.
func (s *Server) addPprof(mux *http.ServeMux) {
	guard := func(h http.HandlerFunc) http.Handler { return s.operator.require("keygate-admin", h) }
	mux.Handle("/debug/pprof/", guard(func(w http.ResponseWriter, r *http.Request) {
		if strings.TrimPrefix(r.URL.Path, "/debug/pprof/") == "cmdline" {
			http.NotFound(w, r)
			return
		}
		pprof.Index(w, r)
	}))
	mux.Handle("/debug/pprof/profile", guard(pprof.Profile))
	mux.Handle("/debug/pprof/symbol", guard(pprof.Symbol))
	mux.Handle("/debug/pprof/trace", guard(pprof.Trace))
}

// checkHost refuses a request whose Host is neither an IP address,
// localhost, nor one of the configured admin host names. A web page the
// operator opens cannot then reach the admin listener through DNS
// rebinding: the browser would send the attacker's host name.
func (s *Server) checkHost(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !allowedAdminHost(r.Host, s.cfg.AdminHosts) {
			w.Header().Set("Cache-Control", "no-store")
			writeJSON(w, http.StatusMisdirectedRequest, map[string]string{"error": "forbidden_host",
				"error_description": "the admin listener answers only to an IP address, localhost or a configured admin host name"})
			return
		}
		h.ServeHTTP(w, r)
	})
}

func allowedAdminHost(host string, names []string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if host == "" || strings.EqualFold(host, "localhost") || net.ParseIP(host) != nil {
		return true
	}
	for _, n := range names {
		if strings.EqualFold(host, strings.TrimSuffix(n, ".")) {
			return true
		}
	}
	return false
}
