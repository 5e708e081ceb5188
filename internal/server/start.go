package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"syscall"
	"time"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/operr"
)

// DefaultAudience is the audience of the token service's tokens when
// token_service.audience sets none.
const DefaultAudience = "keygate-demo"

// Options configure Start: the server's Config, whose Node Start decides
// on, and what that decision takes.
type Options struct {
	Config
	// Dev asks for dev mode (serve --dev): a token service, whose root
	// key, admin token and demo client are generated in the data
	// directory when missing.
	Dev bool
	// InsecureAdmin lets the admin listener serve plain HTTP off loopback
	// (serve --insecure-admin); see checkAdminListener.
	InsecureAdmin bool
	// Rand is the node's source of randomness; nil means crypto/rand.
	Rand io.Reader
	// LookupEnv reads the secrets the environment gives the node
	// (KEYGATE_ROOT_KEY, ...); nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
}

// Started is a server on its open listeners, not yet serving them.
type Started struct {
	*Server
	ls Listeners
}

// Start decides what the node runs and opens it, without serving:
//
// Overrides are applied to Gateway first, as every reload applies them. The
// node runs the gateway alone when issuers are configured and nothing asks
// for a token service (gatewayOnly); otherwise it opens the token service
// too, whose issuer defaults to the traffic listener's URL and whose
// audience to DefaultAudience. The listeners are opened before the node,
// so that the default issuer names the port actually bound; the admin
// listener is refused off loopback without TLS unless InsecureAdmin
// (checkAdminListener), and a node that would start sealed is refused when
// no admin listener could unseal it.
func Start(ctx context.Context, o Options) (_ *Started, err error) {
	if o.Gateway == nil {
		return nil, errors.New("Start needs a configuration")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	cfg := o.Gateway
	file := cfg.TokenService
	o.Overrides.Apply(cfg)
	gatewayOnly := o.gatewayOnly(file)
	s := &Started{}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if s.ls, err = openListeners(ctx, cfg); err != nil {
		return nil, err
	}
	if s.ls.Admin != nil {
		if err := checkAdminListener(o.Logger, s.ls.Admin, cfg, o.InsecureAdmin); err != nil {
			return nil, err
		}
	}
	scfg := o.Config
	scfg.Node = nil
	if !gatewayOnly {
		scfg.Node = o.node(cfg, s.ls.Traffic.Addr().String())
	}
	if s.Server, err = New(ctx, scfg); err != nil {
		return nil, err
	}
	if n := s.Node(); n != nil && n.Sealed() && s.ls.Admin == nil {
		return nil, operr.New("the node has no root key and would start sealed, but with --admin-listen off it could never be unsealed: give token_service.root_key_file or KEYGATE_ROOT_KEY, or keep the admin listener")
	}
	return s, nil
}

// gatewayOnly reports whether the node runs the gateway alone: issuers are
// configured and nothing asks for a token service (Dev, a root key in the
// environment, a keyring in the data directory, or any token_service
// setting of the file or the environment but the admin token file). Such
// a node creates no files and no credentials. file is the section before
// the Overrides: the command line's --issuer and --audience alone ask for
// nothing.
func (o *Options) gatewayOnly(file config.TokenService) bool {
	// An admin token does not ask for a token service: it also guards a
	// gateway's pprof.
	file.AdminTokenFile = ""
	if len(o.Gateway.Issuers) == 0 || o.Dev || !reflect.ValueOf(file).IsZero() {
		return false
	}
	if v, _ := o.LookupEnv(node.RootKeyEnv); v != "" {
		return false
	}
	// A keyring set up in the data directory asks for a sealed token service.
	_, err := os.Stat(filepath.Join(o.Gateway.DataDir, node.KeyringFile))
	return err != nil
}

// node configures the token service's node on cfg; addr is the traffic
// listener's address, the default issuer's host.
func (o *Options) node(cfg *config.Config, addr string) *node.Config {
	issuer, audience := cfg.TokenService.Issuer, cfg.TokenService.Audience
	if issuer == "" {
		issuer = "http://" + addr
		if cfg.TLS.Enabled() {
			issuer = "https://" + addr
		}
	}
	if audience == "" {
		audience = DefaultAudience
	}
	return &node.Config{
		TokenService: cfg.TokenService,
		Audit:        cfg.Audit,
		DataDir:      cfg.DataDir,
		Issuer:       issuer,
		Audience:     audience,
		Dev:          o.Dev,
		Rand:         o.Rand,
		LookupEnv:    o.LookupEnv,
	}
}

// openListeners opens the listeners cfg names: the traffic listener always,
// the others unless off or unset. On an error it closes those it opened.
func openListeners(ctx context.Context, cfg *config.Config) (Listeners, error) {
	var ls Listeners
	for _, l := range []struct {
		dst        *net.Listener
		addr, name string
	}{
		{&ls.Traffic, cfg.Listen, "listen"},
		{&ls.Admin, adminAddr(cfg), "admin listen"},
		{&ls.Probe, cfg.ProbeListen, "probe listen"},
		{&ls.EnvoyGRPC, cfg.EnvoyGRPCListen, "envoy gRPC listen"},
	} {
		if l.addr == "" {
			continue
		}
		ln, err := new(net.ListenConfig).Listen(ctx, "tcp", l.addr)
		if err != nil {
			ls.close()
			return Listeners{}, fmt.Errorf("%s: %w", l.name, err)
		}
		*l.dst = ln
	}
	return ls, nil
}

// adminAddr is the admin listener's address, "" when it is off.
func adminAddr(cfg *config.Config) string {
	if cfg.AdminListen == "off" {
		return ""
	}
	return cfg.AdminListen
}

// close closes the listeners that are open.
func (ls Listeners) close() {
	for _, l := range []net.Listener{ls.Traffic, ls.Admin, ls.Probe, ls.EnvoyGRPC} {
		if l != nil {
			l.Close()
		}
	}
}

// Addr is the traffic listener's address.
func (s *Started) Addr() net.Addr { return s.ls.Traffic.Addr() }

// Serve serves until ctx is done (see ServeListeners), reloading the
// configuration on SIGHUP when it came from a file, and closes the server.
func (s *Started) Serve(ctx context.Context) error {
	defer s.Server.Close()
	if s.cfg.ConfigPath != "" {
		stop := reloadOnHangup(ctx, s.Server)
		defer stop()
	}
	return s.ServeListeners(ctx, s.ls)
}

// Close closes the listeners and the server, for a start that will not be
// served.
func (s *Started) Close() {
	s.ls.close()
	if s.Server != nil {
		s.Server.Close()
	}
}

// reloadOnHangup reloads srv's configuration on SIGHUP until ctx is done or
// the returned stop is called.
func reloadOnHangup(ctx context.Context, srv *Server) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				rctx, rcancel := context.WithTimeout(ctx, time.Minute)
				srv.Reload(rctx) //nolint:errcheck // logged and counted by Reload
				rcancel()
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		cancel()
		<-done
	}
}

// checkAdminListener checks the address the admin listener is bound to,
// before anything is served. Off loopback (0.0.0.0 and :: are every
// interface), plain HTTP is refused unless insecure (--insecure-admin): the
// listener carries unseal passphrases and root keys (/v1/sys/unseal) and
// the admin token, which anyone on the network path could read. It then
// logs a warning, as it does for TLS that any client may connect to.
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
