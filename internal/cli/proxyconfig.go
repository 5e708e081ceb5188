package cli

import (
	"context"
	"fmt"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/gateway"
	"github.com/keygate/keygate/internal/server"
)

// proxyConfig prints the configuration of a proxy in front of forward-auth,
// taken from keygate's own: the claim headers its issuers map, where it
// listens. It is the block the real-proxy tests run.
func proxyConfig(proxy string) func(*app, context.Context, []string) error {
	return func(a *app, _ context.Context, args []string) error {
		cmd := "keygate config " + proxy
		fs := a.flags(cmd, "[flags]",
			"Prints the "+proxy+" configuration that puts keygate's forward-auth in front of an\n"+
				"application: it asks /auth about every request, copies the claim headers keygate\n"+
				"answers with onto the request, and overwrites or removes every client-sent copy of\n"+
				"them, also those spelled with _ for -. Start keygate with --proxy "+proxy+" so that\n"+
				"it trusts only the forwarding headers this configuration sets. The claim headers\n"+
				"come from --config (every issuer's headers, or X-Auth-Issuer, X-Auth-Scopes and\n"+
				"X-Auth-Subject).")
		var path, keygate, appAddr string
		fs.StringVar(&path, "config", "", "keygate's YAML configuration `file` (default: the built-in one)")
		fs.StringVar(&keygate, "keygate", "", "`host:port` where the proxy reaches keygate (default: the configuration's listen address)")
		fs.StringVar(&appAddr, "app", "127.0.0.1:9000", "`host:port` of the protected application")
		if _, err := fs.parse(args, 0, 0); err != nil {
			return err
		}
		cfg := &config.Config{}
		if path != "" {
			var err error
			if cfg, err = config.Load(path, a.env); err != nil {
				return err
			}
		}
		cfg.SetDefaults()
		if keygate == "" {
			keygate = localHostPort(cfg.Listen)
		}
		s := gateway.Snippet{Keygate: keygate, App: appAddr, Headers: server.ClaimHeaders(cfg)}
		var out string
		var err error
		switch proxy {
		case gateway.ProxyNginx:
			out, err = s.Nginx()
		case gateway.ProxyCaddy:
			out, err = s.Caddy()
		case gateway.ProxyTraefik:
			out, err = s.Traefik()
		}
		if err != nil {
			return err
		}
		fmt.Fprint(a.stdout, out)
		return nil
	}
}
