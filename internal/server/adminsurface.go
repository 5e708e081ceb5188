package server

import (
	"net"
	"net/http"
	"net/http/pprof"
	"strings"

	"github.com/keygate/keygate/internal/httperr"
	"github.com/keygate/keygate/internal/issuer"
)

// readCredentials reads the admin token (which guards the admin API, seal
// and pprof, even on a gateway-only node) and the optional metrics scrape
// token, once, before anything is written to disk.
func (s *Server) readCredentials() (err error) {
	if s.guards.operator, err = issuer.ReadBearer("admin token", s.cfg.Gateway.TokenService.AdminTokenFile, s.cfg.AdminToken); err != nil {
		return err
	}
	if s.guards.scraper, err = issuer.ReadBearer("metrics token", s.cfg.Gateway.MetricsTokenFile, s.cfg.MetricsToken); err != nil {
		return err
	}
	return nil
}

// addPprof serves the runtime profiles behind the admin token: CPU, heap,
// goroutine, block, mutex, allocs, threadcreate, symbol and trace. The
// command line is never served (it can hold a database URL with its
// password), and the index answers an unknown name, "cmdline" included,
// with 404.
func (s *Server) addPprof(mux *http.ServeMux) {
	guard := func(h http.HandlerFunc) http.Handler { return s.guards.operator.Require("keygate-admin", h) }
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
		if !allowedAdminHost(r.Host, s.cfg.Gateway.AdminHosts) {
			w.Header().Set("Cache-Control", "no-store")
			s.errs.Write(w, r, errForbiddenHost)
			return
		}
		h.ServeHTTP(w, r)
	})
}

var errForbiddenHost = &httperr.Error{Status: http.StatusMisdirectedRequest, Code: "forbidden_host",
	Description: "the admin listener answers only to an IP address, localhost or a configured admin host name"}

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
