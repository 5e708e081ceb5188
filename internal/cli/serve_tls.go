package cli

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"

	"github.com/keygate/keygate/internal/config"
)

// tlsFlags are serve's TLS flags: the listeners' certificates and the admin
// listener's client CAs (Redis's TLS files are token_service's, tokenFlags).
type tlsFlags struct {
	certFile, keyFile                    string
	adminCertFile, adminKeyFile, adminCA string
	insecureAdmin                        bool
}

func (f *tlsFlags) register(fs *flagSet) {
	fs.StringVar(&f.certFile, "tls-cert", "", "certificate `file` (PEM, then any intermediates) of the traffic listener, which then serves\nHTTPS (HTTP/2 and HTTP/1.1); the probe listener serves the same certificate (or tls.cert_file)")
	fs.StringVar(&f.keyFile, "tls-key", "", "private key `file` (PEM) of --tls-cert (or tls.key_file)")
	fs.StringVar(&f.adminCertFile, "admin-tls-cert", "", "certificate `file` of the admin listener, which then serves HTTPS (or admin_tls.cert_file)")
	fs.StringVar(&f.adminKeyFile, "admin-tls-key", "", "private key `file` of --admin-tls-cert (or admin_tls.key_file)")
	fs.StringVar(&f.adminCA, "admin-client-ca", "", "CA certificates `file` (PEM): the admin listener then serves only clients presenting a\ncertificate from one of them, on every path (or admin_tls.client_ca_file)")
	fs.BoolVar(&f.insecureAdmin, "insecure-admin", false, "allow the admin listener on an address other than loopback without TLS (it carries unseal\npassphrases, root keys and the admin token)")
}

// overrides returns the listeners' TLS files the flags give.
func (f *tlsFlags) overrides() (config.TLS, config.AdminTLS) {
	return config.TLS{CertFile: f.certFile, KeyFile: f.keyFile},
		config.AdminTLS{TLS: config.TLS{CertFile: f.adminCertFile, KeyFile: f.adminKeyFile}, ClientCAFile: f.adminCA}
}

// checkAdminListener checks the address the admin listener is bound to,
// before anything is served. Off loopback (0.0.0.0 and :: are every
// interface), plain HTTP is refused unless --insecure-admin: the listener
// carries unseal passphrases and root keys (/v1/sys/unseal) and the admin
// token, which anyone on the network path could read. It then logs a
// warning, as it does for TLS that any client may connect to.
func checkAdminListener(log *slog.Logger, ln net.Listener, cfg *config.Config, insecure bool) error {
	ta, ok := ln.Addr().(*net.TCPAddr)
	if !ok || loopbackAddr(ta) {
		return nil
	}
	switch {
	case !cfg.AdminTLS.Enabled() && !insecure:
		return adminExposed(cfg.AdminListen, ta.IP)
	case !cfg.AdminTLS.Enabled():
		log.Warn("the admin listener serves plain HTTP off loopback (--insecure-admin): unseal passphrases, root keys and the admin token cross the network unencrypted", "admin", ln.Addr().String())
	case cfg.AdminTLS.ClientCAFile == "":
		log.Warn("the admin listener accepts any TLS client off loopback: give it --admin-client-ca (admin_tls.client_ca_file) so that only holders of a client certificate reach unseal, metrics and pprof", "admin", ln.Addr().String())
	}
	return nil
}

// loopbackAddr reports whether a is a TCP address on loopback (an
// IPv4-mapped one included).
func loopbackAddr(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return false
	}
	ip, ok := netip.AddrFromSlice(ta.IP)
	return ok && ip.Unmap().IsLoopback()
}

func adminExposed(listen string, ip net.IP) error {
	every := ""
	if ip.IsUnspecified() {
		every = ", every interface,"
	}
	return fmt.Errorf("refusing to serve the admin listener on %s (%s)%s over plain HTTP: it carries unseal passphrases, "+
		"root keys and the admin token, which anyone on the network path could read. Give it a certificate "+
		"(--admin-tls-cert and --admin-tls-key, or admin_tls; with --admin-client-ca only holders of a client "+
		"certificate reach it), keep it on loopback (127.0.0.1:9090), or, if the network is private to this node "+
		"(a pod's sidecar), pass --insecure-admin", listen, ip, every)
}
