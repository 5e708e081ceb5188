package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Tenants through the admin API of a running node; clients and users name
// theirs with --tenant (clients.go, admin.go).

func (a *app) tenantsCreate(ctx context.Context, args []string) error {
	fs := a.flags("keygate tenants create", "[flags] NAME",
		"Creates a tenant: a namespace of clients, users and transit keys. NAME is 1 to 64\n"+
			"characters of a-z, 0-9, '_' and '-', starting with a letter or a digit.")
	var af adminFlags
	af.register(fs)
	pos, err := fs.parse(args, 1, 1)
	if err != nil {
		return err
	}
	var out struct {
		Name string `json:"name"`
	}
	if err := af.call(ctx, a, http.MethodPost, "/v1/admin/tenants", map[string]string{"name": pos[0]}, &out); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "tenant=%s\n", out.Name)
	return nil
}

func (a *app) tenantsList(ctx context.Context, args []string) error {
	fs := a.flags("keygate tenants list", "[--json] [flags]", "Lists the tenants of a running node: name and creation time, default included.")
	var af adminFlags
	af.register(fs)
	var lf listing
	lf.register(fs)
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	var out struct {
		Tenants []struct {
			Name      string    `json:"name"`
			CreatedAt time.Time `json:"created_at"`
		} `json:"tenants"`
	}
	var raw json.RawMessage
	if err := af.call(ctx, a, http.MethodGet, "/v1/admin/tenants", nil, &raw); err != nil {
		return err
	}
	return lf.print(a, raw, &out, []string{"TENANT", "CREATED"}, func() (rows [][]string) {
		for _, t := range out.Tenants {
			rows = append(rows, []string{t.Name, t.CreatedAt.UTC().Format(time.RFC3339)})
		}
		return rows
	})
}

func (a *app) tenantsDelete(ctx context.Context, args []string) error {
	fs := a.flags("keygate tenants delete", "[flags] NAME",
		"Deletes an empty tenant. A tenant that still holds clients, users, transit keys or\n"+
			"secrets is refused, saying how many of each; the default tenant is never deleted.")
	var af adminFlags
	af.register(fs)
	pos, err := fs.parse(args, 1, 1)
	if err != nil {
		return err
	}
	return af.call(ctx, a, http.MethodDelete, "/v1/admin/tenants/"+url.PathEscape(pos[0]), nil, nil)
}

// tenantFlag is --tenant on the commands that create or list clients and
// users.
type tenantFlag struct{ name string }

func (f *tenantFlag) register(fs *flagSet, usage string) {
	fs.StringVar(&f.name, "tenant", "", usage)
}

// query is a list's path with the tenant filter, when --tenant was given.
func (f *tenantFlag) query(fs *flagSet, path string) string {
	if !fs.isSet("tenant") {
		return path
	}
	return path + "?" + url.Values{"tenant": {f.name}}.Encode()
}

// set adds the tenant to a create request's body, when --tenant was given.
func (f *tenantFlag) set(fs *flagSet, body map[string]any) {
	if fs.isSet("tenant") {
		body["tenant"] = f.name
	}
}
