package cli

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"

	"github.com/keygate/keygate/internal/config"
)

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
		log.Warn("the admin listener accepts any TLS client off loopback: give it admin_tls.client_ca_file (KEYGATE_ADMIN_TLS_CLIENT_CA_FILE) so that only holders of a client certificate reach unseal, metrics and pprof", "admin", ln.Addr().String())
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
		"(admin_tls.cert_file and admin_tls.key_file; with admin_tls.client_ca_file only holders of a client "+
		"certificate reach it), keep it on loopback (127.0.0.1:9090), or, if the network is private to this node "+
		"(a pod's sidecar), pass --insecure-admin", listen, ip, every)
}
