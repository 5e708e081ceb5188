package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

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
		s.trafficTLS = f
	}
	if c.AdminTLS.Enabled() && c.AdminListen != "off" {
		f, err := s.loadCert(ListenerAdmin, "admin_tls", c.AdminTLS.TLS, c.AdminTLS.ClientCAFile)
		if err != nil {
			return err
		}
		s.adminTLS = f
	}
	return nil
}

func (s *Server) loadCert(listener, field string, t config.TLS, clientCA string) (*tlscert.Files, error) {
	return tlscert.Load(tlscert.Config{Name: field, CertFile: t.CertFile, KeyFile: t.KeyFile, ClientCAFile: clientCA,
		NextProtos: nextProtos, Logger: s.log.With("listener", listener), Now: s.cfg.Now,
		OnLoad: func(ev tlscert.LoadEvent) {
			if s.metrics != nil {
				s.metrics.TLSCertificateLoad(listener, ev.OK, ev.NotAfter)
			}
		}})
}

// pollCerts reads the listeners' certificate files again where they
// changed; a pair that fails to load is logged and counted by its Files.
func (s *Server) pollCerts() {
	for _, f := range []*tlscert.Files{s.trafficTLS, s.adminTLS} {
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

// redisTLS returns the TLS config of a rediss:// URL, nil for redis://:
// the CAs Redis's certificate must chain to and the client certificate,
// from the files in c (tlscert.ClientConfig), with the URL's host as the
// server name, as go-redis sets it. It refuses the files with a redis://
// URL, and skip_verify, which would turn verification off. This is the
// one check of the Redis TLS settings: it sees the URL and the files in
// force, whether they came from flags or from the configuration file.
func redisTLS(c *Config, u *url.URL) (*tls.Config, error) {
	if u.Query().Has("skip_verify") {
		if v, err := strconv.ParseBool(u.Query().Get("skip_verify")); err != nil || v {
			return nil, errors.New("skip_verify would accept any certificate from Redis: give its CA with --redis-ca-file (token_service.redis_ca_file) instead")
		}
	}
	if u.Scheme != "rediss" {
		if c.RedisCAFile != "" || c.RedisCertFile != "" || c.RedisKeyFile != "" {
			return nil, errors.New("--redis-ca-file, --redis-cert and --redis-key (token_service.redis_ca_file, redis_cert_file, redis_key_file) are for TLS: the Redis URL must be rediss://")
		}
		return nil, nil
	}
	tc, err := tlscert.ClientConfig(c.RedisCAFile, c.RedisCertFile, c.RedisKeyFile)
	if err != nil {
		return nil, fmt.Errorf("--redis-ca-file, --redis-cert, --redis-key (token_service.redis_ca_file, redis_cert_file, redis_key_file): %w", err)
	}
	tc.ServerName = u.Hostname()
	return tc, nil
}

// databaseTLSWarning returns why the connection to PostgreSQL that url
// describes can be read or changed on the network, or "" when it cannot:
// a server on loopback or a Unix socket, or TLS that verifies the server's
// certificate (sslmode=verify-full, or verify-ca / require with
// sslrootcert). libpq's and pgx's default, sslmode=prefer, encrypts without
// verifying and falls back to plain text. The environment (PGSSLMODE, ...)
// counts, as it does when the store connects.
func databaseTLSWarning(rawURL string) string {
	cfg, err := pgconn.ParseConfig(rawURL)
	if err != nil {
		return "" // the store reports the error when it connects
	}
	targets := []*pgconn.FallbackConfig{{Host: cfg.Host, Port: cfg.Port, TLSConfig: cfg.TLSConfig}}
	targets = append(targets, cfg.Fallbacks...)
	unverified := ""
	for _, t := range targets {
		if localHost(t.Host) {
			continue
		}
		switch tc := t.TLSConfig; {
		case tc == nil:
			return fmt.Sprintf("the connection to PostgreSQL at %s can be plain text (sslmode disable, allow, or prefer, the default): use sslmode=verify-full with sslrootcert", t.Host)
		case tc.InsecureSkipVerify && tc.VerifyPeerCertificate == nil && unverified == "":
			unverified = fmt.Sprintf("the connection to PostgreSQL at %s does not verify the server's certificate (sslmode=require without sslrootcert): use sslmode=verify-full with sslrootcert", t.Host)
		}
	}
	return unverified
}

// localHost reports whether host is a Unix socket directory, localhost or
// a loopback address.
func localHost(host string) bool {
	if strings.HasPrefix(host, "/") || strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}
