package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/keygate/keygate/internal/mint"
	"github.com/keygate/keygate/internal/server"
)

// serveFlags are the flags of serve.
type serveFlags struct {
	listen, dataDir, issuer, audience string
	level                             slog.Level
}

func (f *serveFlags) register(fs *flagSet) {
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8080", "`address` to listen on (port 0 picks a free port)")
	fs.StringVar(&f.dataDir, "data-dir", "./keygate-data", "`directory` holding the signing key (created 0700)")
	fs.StringVar(&f.issuer, "issuer", "", "issuer `URL` of tokens (default \"http://\" + the listen address)")
	fs.StringVar(&f.audience, "audience", "keygate-demo", "`audience` /auth requires")
	fs.TextVar(&f.level, "log-level", slog.LevelInfo, "log `level`: debug, info, warn or error")
}

func (a *app) serve(ctx context.Context, args []string) error {
	fs := a.flags("keygate serve", "[flags]",
		"Runs the HTTP service with an embedded signing key and no external services:\n"+
			"  GET /healthz                 liveness\n"+
			"  GET /.well-known/jwks.json   the public signing key\n"+
			"  GET /auth                    forward-auth: 200 with X-Auth-Subject and X-Auth-Scopes,\n"+
			"                               or 401 with an RFC 6750 challenge\n"+
			"On first start it creates an ES256 key in the data directory; it prints a sample\n"+
			"token and a curl command, and stops gracefully on SIGINT or SIGTERM.")
	var f serveFlags
	f.register(fs)
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: f.level}))
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", f.listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv, err := a.newServer(f, ln.Addr().String(), log)
	if err != nil {
		ln.Close()
		return err
	}
	if err := a.printSample(srv, f.audience, ln.Addr()); err != nil {
		ln.Close()
		return err
	}
	if a.ready != nil {
		a.ready(ln.Addr().String())
	}
	return srv.Serve(ctx, ln)
}

func (a *app) newServer(f serveFlags, addr string, log *slog.Logger) (*server.Server, error) {
	if f.issuer == "" {
		f.issuer = "http://" + addr
	}
	return server.New(server.Config{
		DataDir:  f.dataDir,
		Issuer:   f.issuer,
		Audience: f.audience,
		Logger:   log,
		Now:      a.now,
		Rand:     a.random,
	})
}

// printSample prints a demo token and a curl command that presents it.
func (a *app) printSample(srv *server.Server, audience string, addr net.Addr) error {
	token, err := srv.Mint(mint.Claims{Subject: "demo", Audience: []string{audience}, Scope: "demo", TTL: time.Hour})
	if err != nil {
		return fmt.Errorf("sample token: %w", err)
	}
	fmt.Fprintf(a.stdout, "Sample token (sub \"demo\", scope \"demo\", aud %q, expires in 1h):\n%s\n\n", audience, token)
	fmt.Fprintf(a.stdout, "Try it:\ncurl -i -H 'Authorization: Bearer %s' %s/auth\n", token, baseURL(addr))
	return nil
}

// baseURL is where a local client reaches addr: an unspecified host
// (0.0.0.0, ::) is replaced by loopback.
func baseURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip.To4() == nil {
			host = "::1"
		}
	}
	return "http://" + net.JoinHostPort(host, port)
}
