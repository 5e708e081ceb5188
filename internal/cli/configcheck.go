package cli

import (
	"context"
	"fmt"
	"net/url"

	"go.yaml.in/yaml/v3"

	"github.com/keygate/keygate/internal/config"
)

// configCheck is keygate config check: the checks serve makes on a
// configuration before it connects to anything, and the configuration in
// effect (file, environment and defaults) printed back.
func (a *app) configCheck(_ context.Context, args []string) error {
	fs := a.flags("keygate config check", "[FILE]",
		"Validates a configuration file as keygate serve --config FILE would, with the KEYGATE_*\n"+
			"environment applied and the defaults filled in, without opening a listener or connecting to\n"+
			"anything, and prints the configuration in effect as YAML with the passwords of URLs\n"+
			"redacted. FILE defaults to $KEYGATE_CONFIG. Files the configuration names (keys,\n"+
			"certificates, tokens) are read when serve starts, not here.")
	pos, err := fs.parse(args, 0, 1)
	if err != nil {
		return err
	}
	path := a.lookupEnv("KEYGATE_CONFIG")
	if len(pos) == 1 {
		path = pos[0]
	}
	if path == "" {
		return usageErrorf(fs.Name(), "give the configuration FILE (or KEYGATE_CONFIG)")
	}
	cfg, err := config.Load(path, a.env)
	if err != nil {
		return err
	}
	if err := checkTokenService(cfg.TokenService); err != nil {
		return err
	}
	cfg.TokenService.DatabaseURL = redactURL(cfg.TokenService.DatabaseURL)
	cfg.TokenService.RedisURL = redactURL(cfg.TokenService.RedisURL)
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "# %s: valid; in effect with the environment and defaults:\n%s", path, out)
	return nil
}

// redactURL replaces a URL's password, and a password query parameter,
// with "redacted"; a string that does not parse is redacted whole.
func redactURL(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "redacted"
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "redacted")
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "redacted")
		u.RawQuery = q.Encode()
	}
	return u.String()
}
