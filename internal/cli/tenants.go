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

// dataKeyStatus is the answer of GET /v1/admin/tenants/{name}/data-key and
// of its rotate.
type dataKeyStatus struct {
	Tenant   string   `json:"tenant"`
	Current  uint32   `json:"current_version"`
	Versions []uint32 `json:"versions"`
	Rotation struct {
		State      string `json:"state"`
		ID         string `json:"id"`
		Version    int    `json:"version"`
		Done       int64  `json:"done"`
		Total      int64  `json:"total"`
		Failed     string `json:"failed"`
		FinishedAt string `json:"finished_at"`
	} `json:"rotation"`
}

func (a *app) tenantsRotateKey(ctx context.Context, args []string) error {
	fs := a.flags("keygate tenants rotate-key", "[--rate N] [--wait] [flags] NAME\n       keygate tenants rotate-key --status [--wait] [flags] NAME",
		"Rotates a tenant's data key, the key its transit keys and secrets are sealed under, on a\n"+
			"running node and every node sharing its store. The new version seals every record written\n"+
			"from then on; the tenant's existing records are rewrapped under it in the background (by\n"+
			"one node at a time, resumed by any node after a crash) while every version still opens\n"+
			"what it sealed, so no request fails. Once no record is under an older version, the older\n"+
			"versions are destroyed. --status prints the data key's versions and the rotation's\n"+
			"progress; --wait follows it until it is done.")
	var af adminFlags
	af.register(fs)
	rate := fs.Int("rate", 0, "rewrap at most `N` records a second (0: no bound)")
	status := fs.Bool("status", false, "print the data key's versions and the rotation's progress, and exit")
	wait := fs.Bool("wait", false, "follow the rotation until it is done")
	pos, err := fs.parse(args, 1, 1)
	if err != nil {
		return err
	}
	path := "/v1/admin/tenants/" + url.PathEscape(pos[0]) + "/data-key"
	if !*status {
		if *rate < 0 {
			return usageErrorf(fs.Name(), "--rate must be 0 or more")
		}
		var st dataKeyStatus
		if err := af.call(ctx, a, http.MethodPost, path+"/rotate", map[string]int{"rate": *rate}, &st); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "tenant %s: data key rotation %s started: version %d is current\n", st.Tenant, st.Rotation.ID, st.Current)
	}
	return a.follow(ctx, *wait, func() (string, bool, error) {
		var st dataKeyStatus
		if err := af.call(ctx, a, http.MethodGet, path, nil, &st); err != nil {
			return "", false, err
		}
		line := fmt.Sprintf("tenant=%s current=%d versions=%v rotation=%s", st.Tenant, st.Current, st.Versions, st.Rotation.State)
		if r := st.Rotation; r.State != "none" {
			line += fmt.Sprintf(" id=%s rewrapped=%d/%d", r.ID, r.Done, r.Total) + progressTail(r.Failed, r.FinishedAt)
		}
		return line, st.Rotation.State == "rewrapping", nil
	})
}
