package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Users, the node's signing keys and revocations, through the admin API of
// a running node (the client commands are in clients.go).

func (a *app) usersCreate(ctx context.Context, args []string) error {
	fs := a.flags("keygate users create", "--username NAME [--scopes a,b] [--tenant T] [--password-file FILE] [flags]",
		"Creates a user who can log in with POST /v1/login, through a client of the user's tenant\n"+
			"(default: the default tenant). The password (8+ characters) is read from the terminal\n"+
			"(twice, without echo), the first line of standard input, or --password-file; the node\n"+
			"stores only its Argon2id hash.")
	var af adminFlags
	af.register(fs)
	username := fs.String("username", "", "the user's login `name` (unique within the tenant)")
	var scopes scopeList
	fs.scopes(&scopes, "`scopes` the user may be granted")
	var tenant tenantFlag
	tenant.register(fs, "the `tenant` the user belongs to (default: default)")
	passFile := fs.String("password-file", "", "read the password from this `file`")
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	if *username == "" {
		return usageErrorf(fs.Name(), "--username is required")
	}
	pass, err := a.readSecret("Password for "+*username+": ", *passFile, true)
	if err != nil {
		return err
	}
	defer clear(pass)
	var out struct {
		ID string `json:"id"`
	}
	body := map[string]any{"username": *username, "password": string(pass), "scopes": []string(scopes)}
	tenant.set(fs, body)
	if err := af.call(ctx, a, http.MethodPost, "/v1/admin/users", body, &out); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "user_id=%s\n", out.ID)
	return nil
}

func (a *app) usersList(ctx context.Context, args []string) error {
	fs := a.flags("keygate users list", "[--tenant T] [--json] [flags]",
		"Lists the users of a running node: tenant, id, name, scopes, and \"disabled\" when so.")
	var af adminFlags
	af.register(fs)
	var tenant tenantFlag
	tenant.register(fs, "list only the users of this `tenant`")
	var lf listing
	lf.register(fs)
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	var out struct {
		Users []struct {
			ID       string   `json:"id"`
			Tenant   string   `json:"tenant"`
			Username string   `json:"username"`
			Scopes   []string `json:"scopes"`
			Disabled bool     `json:"disabled"`
		} `json:"users"`
	}
	var raw json.RawMessage
	if err := af.call(ctx, a, http.MethodGet, tenant.query(fs, "/v1/admin/users"), nil, &raw); err != nil {
		return err
	}
	return lf.print(a, raw, &out, []string{"TENANT", "USER_ID", "USERNAME", "SCOPES", "STATE"}, func() (rows [][]string) {
		for _, u := range out.Users {
			state := "enabled"
			if u.Disabled {
				state = "disabled"
			}
			rows = append(rows, []string{u.Tenant, u.ID, u.Username, strings.Join(u.Scopes, " "), state})
		}
		return rows
	})
}

func (a *app) usersUpdate(ctx context.Context, args []string) error {
	fs := a.flags("keygate users update", "[--password | --password-file FILE] [--scopes a,b] [--disable | --enable] [flags] USER_ID",
		"Changes a user on a running node. A new password, fewer scopes or --disable also revoke\n"+
			"everything issued to the user until now; --enable and more scopes do not. With --password\n"+
			"the new password is read like users create reads one.")
	var af adminFlags
	af.register(fs)
	newPass := fs.Bool("password", false, "set a new password, read from the terminal or standard input")
	passFile := fs.String("password-file", "", "set a new password, read from this `file`")
	var scopes scopeList
	fs.scopes(&scopes, "replace the user's `scopes`")
	disable := fs.Bool("disable", false, "refuse the user's logins and end their sessions")
	enable := fs.Bool("enable", false, "allow a disabled user to log in again")
	pos, err := fs.parse(args, 1, 1)
	if err != nil {
		return err
	}
	if *disable && *enable {
		return usageErrorf(fs.Name(), "give one of --disable and --enable")
	}
	body := map[string]any{}
	if *newPass || *passFile != "" {
		pass, err := a.readSecret("New password: ", *passFile, true)
		if err != nil {
			return err
		}
		defer clear(pass)
		body["password"] = string(pass)
	}
	if fs.scopesSet() {
		body["scopes"] = []string(scopes)
	}
	if *disable || *enable {
		body["disabled"] = *disable
	}
	if len(body) == 0 {
		return usageErrorf(fs.Name(), "nothing to change: give --password, --scopes, --disable or --enable")
	}
	return af.call(ctx, a, http.MethodPatch, "/v1/admin/users/"+url.PathEscape(pos[0]), body, nil)
}

func (a *app) usersDelete(ctx context.Context, args []string) error {
	fs := a.flags("keygate users delete", "[flags] USER_ID", "Deletes a user and revokes everything issued to them: their password, access tokens and refresh tokens stop working at once.")
	var af adminFlags
	af.register(fs)
	pos, err := fs.parse(args, 1, 1)
	if err != nil {
		return err
	}
	return af.call(ctx, a, http.MethodDelete, "/v1/admin/users/"+url.PathEscape(pos[0]), nil, nil)
}

func (a *app) keysRotate(ctx context.Context, args []string) error {
	fs := a.flags("keygate keys rotate", "[--immediate] [flags]",
		"Rotates a running node's signing key: the new key is published at once and signs after\n"+
			"the pre-publication time, or at once with --immediate (for a compromised key; gateways\n"+
			"that cached the old JWKS fetch the new key on its first unknown kid). The old key stays\n"+
			"published until the last token it signed has expired. Prints the new kid.")
	var af adminFlags
	af.register(fs)
	immediate := fs.Bool("immediate", false, "sign with the new key at once")
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	var out struct {
		KID string `json:"kid"`
	}
	if err := af.call(ctx, a, http.MethodPost, "/v1/admin/keys/rotate", map[string]bool{"immediate": *immediate}, &out); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "kid=%s\n", out.KID)
	return nil
}

func (a *app) keysList(ctx context.Context, args []string) error {
	fs := a.flags("keygate keys list", "[flags]",
		"Lists a running node's signing keys: kid, algorithm, publish, active and retire times,\n"+
			"and \"signing\" for the key in force.")
	var af adminFlags
	af.register(fs)
	var lf listing
	lf.register(fs)
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	var out struct {
		Keys []struct {
			KID       string     `json:"kid"`
			Alg       string     `json:"alg"`
			PublishAt time.Time  `json:"publish_at"`
			ActiveAt  time.Time  `json:"active_at"`
			RetireAt  *time.Time `json:"retire_at"`
			Signing   bool       `json:"signing"`
		} `json:"keys"`
	}
	var raw json.RawMessage
	if err := af.call(ctx, a, http.MethodGet, "/v1/admin/keys", nil, &raw); err != nil {
		return err
	}
	return lf.print(a, raw, &out, []string{"KID", "ALG", "PUBLISHED", "ACTIVE", "RETIRES", "SIGNING"}, func() (rows [][]string) {
		for _, k := range out.Keys {
			retire, signing := "-", "-"
			if k.RetireAt != nil {
				retire = k.RetireAt.UTC().Format(time.RFC3339)
			}
			if k.Signing {
				signing = "signing"
			}
			rows = append(rows, []string{k.KID, k.Alg, k.PublishAt.UTC().Format(time.RFC3339), k.ActiveAt.UTC().Format(time.RFC3339), retire, signing})
		}
		return rows
	})
}

func (a *app) revoke(ctx context.Context, args []string) error {
	fs := a.flags("keygate revoke", "(--jti ID [--until TIME] | --subject SUB [--before TIME] [--until TIME]) [--issuer ISS] [flags]",
		"Revokes on a running node, and through Redis on its whole fleet: one token by its jti\n"+
			"(until it would have expired; default now + the access-token lifetime, or 30 days for\n"+
			"another issuer's token), or every token issued to a subject before a time (default\n"+
			"now; kept 30 days, or until --until if later). --issuer names whose tokens: the token\n"+
			"service's own (the default) or an issuer the node's gateway trusts. TIME is RFC 3339.")
	var af adminFlags
	af.register(fs)
	iss := fs.String("issuer", "", "the `issuer` whose token or subject to revoke (default: the token service's own)")
	jti := fs.String("jti", "", "the token's `jti`")
	until := fs.String("until", "", "keep the revocation until `TIME`: with --jti, the token's expiry; with --subject,\nwhen every token issued before --before has expired, if past the default retention")
	subject := fs.String("subject", "", "the `subject` whose tokens to revoke")
	before := fs.String("before", "", "with --subject: revoke tokens issued before `TIME`")
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	if (*jti == "") == (*subject == "") {
		return usageErrorf(fs.Name(), "give exactly one of --jti and --subject")
	}
	if *before != "" && *subject == "" {
		return usageErrorf(fs.Name(), "--before goes with --subject")
	}
	body := map[string]string{}
	for name, v := range map[string]string{"issuer": *iss, "jti": *jti, "subject": *subject, "until": *until, "before": *before} {
		if v == "" {
			continue
		}
		if name == "until" || name == "before" {
			if _, err := time.Parse(time.RFC3339, v); err != nil {
				return usageErrorf(fs.Name(), "--%s %q is not an RFC 3339 time", name, v)
			}
		}
		body[name] = v
	}
	if err := af.call(ctx, a, http.MethodPost, "/v1/admin/revocations", body, nil); err != nil {
		return err
	}
	fmt.Fprintln(a.stdout, "revoked")
	return nil
}
