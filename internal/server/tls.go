package server

import (
	"net"
	"net/http"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/tlscert"
)

// TLS on the listeners.
//
// The traffic listener serves TLS with the tls section's certificate, and
// the probe listener with the same one (health checkers rarely verify it,
// and a probe port is opened to the same network as the traffic); the
// admin listener with the admin_tls section's, and, with a client CA file,
// only to clients that present a certificate from one of those CAs: every
// path of the admin listener then needs one (Vault's
// tls_require_and_verify_client_cert), so the admin API, unseal, metrics
// and pprof cannot be reached without it. Each listener offers HTTP/2 and
// HTTP/1.1. The files are read again when their content changes (see
// package tlscert): new handshakes get the new certificate and open
// connections keep theirs.

// nextProtos are the ALPN protocols every TLS listener offers: HTTP/2 first.
var nextProtos = []string{"h2", "http/1.1"}

// Listener names in logs and metrics.
const (
	ListenerTraffic = "traffic"
	ListenerAdmin   = "admin"
	ListenerProbe   = "probe"
)

// openTLS loads the certificate files c's tls and admin_tls sections name.
// It fails, naming the field at fault, unless every file loads.
func (s *Server) openTLS(c *config.Config) error {
	if c.TLS.Enabled() {
		f, err := s.loadCert(ListenerTraffic, "tls", c.TLS, "")
		if err != nil {
			return err
		}
		s.tls.traffic = f
	}
	if c.AdminTLS.Enabled() && c.AdminListen != "off" {
		f, err := s.loadCert(ListenerAdmin, "admin_tls", c.AdminTLS.TLS, c.AdminTLS.ClientCAFile)
		if err != nil {
			return err
		}
		s.tls.admin = f
	}
	return nil
}

func (s *Server) loadCert(listener, field string, t config.TLS, clientCA string) (*tlscert.Files, error) {
	return tlscert.Load(tlscert.Config{Name: field, CertFile: t.CertFile, KeyFile: t.KeyFile, ClientCAFile: clientCA,
		NextProtos: nextProtos, Logger: s.log.With("listener", listener), Now: s.cfg.Now,
		OnLoad: func(ev tlscert.LoadEvent) {
			if s.obs.metrics != nil {
				s.obs.metrics.TLSCertificateLoad(listener, ev.OK, ev.NotAfter)
			}
		}})
}

// pollCerts reads the listeners' certificate files again where they
// changed; a pair that fails to load is logged and counted by its Files.
func (s *Server) pollCerts() {
	for _, f := range []*tlscert.Files{s.tls.traffic, s.tls.admin} {
		if f != nil {
			f.Poll() //nolint:errcheck // logged and counted by the Files
		}
	}
}

// serveOn serves hs on ln: over TLS when hs.TLSConfig is set (to a
// tlscert.Files' ServerConfig, before any other goroutine sees hs).
func serveOn(hs *http.Server, ln net.Listener) error {
	if hs.TLSConfig == nil {
		return hs.Serve(ln)
	}
	// ServeTLS sets up HTTP/2 (ALPN "h2") before it wraps ln; the
	// certificate comes from TLSConfig.GetConfigForClient.
	return hs.ServeTLS(ln, "", "")
}

// tlsState describes a listener's TLS for the start-up log line.
func tlsState(f *tlscert.Files) string {
	switch {
	case f == nil:
		return "off"
	case f.MutualTLS():
		return "client_certificates"
	}
	return "on"
}
