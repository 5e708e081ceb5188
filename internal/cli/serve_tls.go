package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"

	"github.com/keygate/keygate/internal/config"
)

// tlsFlags are serve's TLS flags: the listeners' certificates, the admin
// listener's client CAs, and Redis's TLS files.
type tlsFlags struct {
	certFile, keyFile                        string
	adminCertFile, adminKeyFile, adminCA     string
	insecureAdmin                            bool
	redisCAFile, redisCertFile, redisKeyFile string
}

func (f *tlsFlags) register(fs *flagSet) {
	fs.StringVar(&f.certFile, "tls-cert", "", "certificate `file` (PEM, then any intermediates) of the traffic listener, which then serves\nHTTPS (HTTP/2 and HTTP/1.1); the probe listener serves the same certificate (or tls.cert_file)")
	fs.StringVar(&f.keyFile, "tls-key", "", "private key `file` (PEM) of --tls-cert (or tls.key_file)")
	fs.StringVar(&f.adminCertFile, "admin-tls-cert", "", "certificate `file` of the admin listener, which then serves HTTPS (or admin_tls.cert_file)")
	fs.StringVar(&f.adminKeyFile, "admin-tls-key", "", "private key `file` of --admin-tls-cert (or admin_tls.key_file)")
	fs.StringVar(&f.adminCA, "admin-client-ca", "", "CA certificates `file` (PEM): the admin listener then serves only clients presenting a\ncertificate from one of them, on every path (or admin_tls.client_ca_file)")
	fs.BoolVar(&f.insecureAdmin, "insecure-admin", false, "allow the admin listener on an address other than loopback without TLS (it carries unseal\npassphrases, root keys and the admin token)")
	fs.StringVar(&f.redisCAFile, "redis-ca-file", "", "with a rediss:// URL, the CA certificates `file` Redis's certificate must chain to\n(default the system's; or token_service.redis_ca_file)")
	fs.StringVar(&f.redisCertFile, "redis-cert", "", "with a rediss:// URL, the client certificate `file` Redis asks for (or token_service.redis_cert_file)")
	fs.StringVar(&f.redisKeyFile, "redis-key", "", "private key `file` of --redis-cert (or token_service.redis_key_file)")
}

// overrides returns the listeners' TLS files the flags give.
func (f *tlsFlags) overrides() (config.TLS, config.AdminTLS) {
	return config.TLS{CertFile: f.certFile, KeyFile: f.keyFile},
		config.AdminTLS{TLS: config.TLS{CertFile: f.adminCertFile, KeyFile: f.adminKeyFile}, ClientCAFile: f.adminCA}
}

// fromFile takes Redis's TLS files from token_service where no flag was
// given.
func (f *tlsFlags) fromFile(ts *config.TokenService, fs *flagSet) {
	pick(!fs.isSet("redis-ca-file"), &f.redisCAFile, ts.RedisCAFile)
	pick(!fs.isSet("redis-cert"), &f.redisCertFile, ts.RedisCertFile)
	pick(!fs.isSet("redis-key"), &f.redisKeyFile, ts.RedisKeyFile)
}

// checkAdminExposure refuses an admin listener reachable from other hosts
// over plain HTTP: it carries unseal passphrases and root keys
// (/v1/sys/unseal) and the admin token, which anyone on the path could
// read. Loopback is the only address allowed without TLS or
// --insecure-admin; a host name counts as loopback only if every address
// it resolves to is one, and an empty host or 0.0.0.0 / :: (every
// interface) never does. The address actually bound is checked again by
// checkBoundAdmin.
func (a *app) checkAdminExposure(ctx context.Context, cfg *config.Config, insecure bool) error {
	if cfg.AdminListen == "off" || cfg.AdminTLS.Enabled() || insecure {
		return nil
	}
	host, _, err := net.SplitHostPort(cfg.AdminListen)
	if err != nil {
		return nil // Validate has refused it already
	}
	var addrs []netip.Addr
	if host != "" {
		if ip, err := netip.ParseAddr(host); err == nil {
			addrs = []netip.Addr{ip}
		} else if addrs, err = a.lookupIP(ctx, host); err != nil {
			return fmt.Errorf("admin listen address %q: %w", cfg.AdminListen, err)
		}
	}
	for _, ip := range addrs {
		if !ip.Unmap().IsLoopback() {
			return adminExposed(cfg.AdminListen, ip.String())
		}
	}
	if len(addrs) == 0 {
		return adminExposed(cfg.AdminListen, "every interface")
	}
	return nil
}

// checkBoundAdmin checks the address the admin listener was bound to, as
// checkAdminExposure checked the one it was given.
func checkBoundAdmin(ln net.Listener, cfg *config.Config, insecure bool) error {
	if ln == nil || cfg.AdminTLS.Enabled() || insecure {
		return nil
	}
	ta, ok := ln.Addr().(*net.TCPAddr)
	if !ok {
		return nil
	}
	if ip, ok := netip.AddrFromSlice(ta.IP); !ok || !ip.Unmap().IsLoopback() {
		return adminExposed(cfg.AdminListen, ta.IP.String())
	}
	return nil
}

func adminExposed(listen, where string) error {
	return fmt.Errorf("refusing to serve the admin listener on %s (%s) over plain HTTP: it carries unseal passphrases, "+
		"root keys and the admin token, which anyone on the network path could read. Give it a certificate "+
		"(--admin-tls-cert and --admin-tls-key, or admin_tls; with --admin-client-ca only holders of a client "+
		"certificate reach it), keep it on loopback (127.0.0.1:9090), or, if the network is private to this node "+
		"(a pod's sidecar), pass --insecure-admin", listen, where)
}

// warnAdminExposure warns when the admin listener is bound off loopback
// with a weaker guard than it could have: plain HTTP (--insecure-admin), or
// TLS that any client may connect to.
func warnAdminExposure(log *slog.Logger, ln net.Listener, cfg *config.Config) {
	ta, ok := ln.Addr().(*net.TCPAddr)
	if !ok {
		return
	}
	if ip, ok := netip.AddrFromSlice(ta.IP); ok && ip.Unmap().IsLoopback() {
		return
	}
	switch {
	case !cfg.AdminTLS.Enabled():
		log.Warn("the admin listener serves plain HTTP off loopback (--insecure-admin): unseal passphrases, root keys and the admin token cross the network unencrypted", "admin", ln.Addr().String())
	case cfg.AdminTLS.ClientCAFile == "":
		log.Warn("the admin listener accepts any TLS client off loopback: give it --admin-client-ca (admin_tls.client_ca_file) so that only holders of a client certificate reach unseal, metrics and pprof", "admin", ln.Addr().String())
	}
}

// lookupIP resolves host, through the app's resolver in tests.
func (a *app) lookupIP(ctx context.Context, host string) ([]netip.Addr, error) {
	if a.resolve != nil {
		return a.resolve(ctx, host)
	}
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}
