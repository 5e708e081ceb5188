package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/keygate/keygate/internal/operr"
)

// The commands that talk to a running node: client management through the
// admin API, and fetching a token from the token endpoint.

type adminFlags struct {
	url, tokenFile string
	tls            adminTLSFlags
}

func (f *adminFlags) register(fs *flagSet) {
	fs.StringVar(&f.url, "admin", fs.a.adminURL(), "the node's admin listener `URL` (or KEYGATE_ADMIN_URL)")
	fs.StringVar(&f.tokenFile, "admin-token-file", "", "`file` holding the admin token (default $KEYGATE_ADMIN_TOKEN, else ./keygate-data/admin.token)")
	f.tls.register(fs)
}

// adminURL is the admin listener's URL by default: $KEYGATE_ADMIN_URL, or
// the default listener on this host.
func (a *app) adminURL() string {
	if u := a.lookupEnv("KEYGATE_ADMIN_URL"); u != "" {
		return u
	}
	return "http://127.0.0.1:9090"
}

func (f *adminFlags) token(a *app) (string, error) {
	if f.tokenFile == "" {
		if t := a.lookupEnv("KEYGATE_ADMIN_TOKEN"); t != "" {
			return t, nil
		}
		f.tokenFile = "./keygate-data/admin.token"
	}
	b, err := os.ReadFile(f.tokenFile)
	if err != nil {
		return "", fmt.Errorf("admin token: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// call sends one admin API request and decodes the JSON answer into out.
func (f *adminFlags) call(ctx context.Context, a *app, method, path string, body any, out any) error {
	tok, err := f.token(a)
	if err != nil {
		return err
	}
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(f.url, "/")+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return f.tls.send(req, out)
}

var httpClient = &http.Client{Timeout: 30 * time.Second}

// doJSON sends req and decodes a 2xx JSON answer into out, or turns an
// error answer into a *statusError naming its code: the node's refusal,
// whose description the node writes for its client (httperr), so an error
// for the operator (operr).
func doJSON(req *http.Request, out any) error { return sendJSON(httpClient, req, out) }

// statusError is an answer that is not 2xx.
type statusError struct {
	path   string
	status int
	body   []byte // up to 1 MiB
	header http.Header
	// code and description are the answer's "error" and
	// "error_description", if it is such a JSON object.
	code, description string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("%s: %d %s: %s", e.path, e.status, e.code, e.description)
}

// sendJSON is doJSON with client c.
func sendJSON(c *http.Client, req *http.Request, out any) error {
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error       string `json:"error"`
			Description string `json:"error_description"`
		}
		json.Unmarshal(b, &e)
		return operr.Errorf("%w", &statusError{path: req.URL.Path, status: resp.StatusCode, body: b, header: resp.Header,
			code: e.Error, description: e.Description})
	}
	if out == nil || len(b) == 0 {
		return nil
	}
	return json.Unmarshal(b, out)
}

func (a *app) clientsCreate(ctx context.Context, args []string) error {
	fs := a.flags("keygate clients create", "--name NAME [--scopes a,b] [--tenant T] [flags]",
		"Creates an OAuth client on a running node and prints its id and secret. The secret is shown once.\n"+
			"Its tokens carry its tenant (default: the default tenant), which never changes.")
	var af adminFlags
	af.register(fs)
	name := fs.String("name", "", "the client's `name`")
	var scopes scopeList
	fs.scopes(&scopes, "`scopes` the client may be granted")
	var tenant tenantFlag
	tenant.register(fs, "the `tenant` the client belongs to (default: default)")
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	if *name == "" {
		return usageErrorf(fs.Name(), "--name is required")
	}
	var out struct {
		ID     string `json:"client_id"`
		Secret string `json:"client_secret"`
	}
	body := map[string]any{"name": *name, "scopes": []string(scopes)}
	tenant.set(fs, body)
	if err := af.call(ctx, a, http.MethodPost, "/v1/admin/clients", body, &out); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "client_id=%s\nclient_secret=%s\n", out.ID, out.Secret)
	return nil
}

func (a *app) clientsList(ctx context.Context, args []string) error {
	fs := a.flags("keygate clients list", "[--tenant T] [--json] [flags]",
		"Lists the OAuth clients of a running node (never their secrets): tenant, id, name, scopes.")
	var af adminFlags
	af.register(fs)
	var tenant tenantFlag
	tenant.register(fs, "list only the clients of this `tenant`")
	var lf listing
	lf.register(fs)
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	var out struct {
		Clients []struct {
			ID     string   `json:"client_id"`
			Tenant string   `json:"tenant"`
			Name   string   `json:"name"`
			Scopes []string `json:"scopes"`
		} `json:"clients"`
	}
	var raw json.RawMessage
	if err := af.call(ctx, a, http.MethodGet, tenant.query(fs, "/v1/admin/clients"), nil, &raw); err != nil {
		return err
	}
	return lf.print(a, raw, &out, []string{"TENANT", "CLIENT_ID", "NAME", "SCOPES"}, func() (rows [][]string) {
		for _, c := range out.Clients {
			rows = append(rows, []string{c.Tenant, c.ID, c.Name, strings.Join(c.Scopes, " ")})
		}
		return rows
	})
}

func (a *app) clientsRotate(ctx context.Context, args []string) error {
	fs := a.flags("keygate clients rotate", "[flags] CLIENT_ID", "Replaces a client's secret and prints the new one, once.")
	var af adminFlags
	af.register(fs)
	pos, err := fs.parse(args, 1, 1)
	if err != nil {
		return err
	}
	var out struct {
		Secret string `json:"client_secret"`
	}
	if err := af.call(ctx, a, http.MethodPost, "/v1/admin/clients/"+url.PathEscape(pos[0])+"/secret", nil, &out); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "client_secret=%s\n", out.Secret)
	return nil
}

func (a *app) clientsUpdate(ctx context.Context, args []string) error {
	fs := a.flags("keygate clients update", "[--name NAME] [--scopes a,b] [flags] CLIENT_ID",
		"Renames a client or replaces its scopes. Fewer scopes also revoke the client_credentials\n"+
			"tokens issued to it until now; the secret is unchanged (see clients rotate).")
	var af adminFlags
	af.register(fs)
	name := fs.String("name", "", "the client's new `name`")
	var scopes scopeList
	fs.scopes(&scopes, "replace the client's `scopes`")
	pos, err := fs.parse(args, 1, 1)
	if err != nil {
		return err
	}
	body := map[string]any{}
	if fs.isSet("name") {
		body["name"] = *name
	}
	if fs.scopesSet() {
		body["scopes"] = []string(scopes)
	}
	if len(body) == 0 {
		return usageErrorf(fs.Name(), "nothing to change: give --name or --scopes")
	}
	return af.call(ctx, a, http.MethodPatch, "/v1/admin/clients/"+url.PathEscape(pos[0]), body, nil)
}

func (a *app) clientsDelete(ctx context.Context, args []string) error {
	fs := a.flags("keygate clients delete", "[flags] CLIENT_ID", "Deletes a client: its secret and refresh tokens stop working and its client_credentials tokens are revoked at once.")
	var af adminFlags
	af.register(fs)
	pos, err := fs.parse(args, 1, 1)
	if err != nil {
		return err
	}
	return af.call(ctx, a, http.MethodDelete, "/v1/admin/clients/"+url.PathEscape(pos[0]), nil, nil)
}

// tokenRequest is `keygate token --client ID --secret S`: the client
// credentials grant against a running node.
func (a *app) tokenRequest(ctx context.Context, args []string) error {
	fs := a.flags("keygate token", "--client ID --secret SECRET [--scope S] [--url URL]",
		"Gets an access token from a running node with the client credentials grant and prints it.")
	client := fs.String("client", "", "client `id`")
	secret := fs.String("secret", "", "client `secret` (default $KEYGATE_CLIENT_SECRET)")
	var scope scopeList
	fs.scopes(&scope, "`scopes` to ask for (default: all the client's)")
	base := fs.String("url", "http://127.0.0.1:8080", "the node's traffic `URL`")
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	if *secret == "" {
		*secret = a.lookupEnv("KEYGATE_CLIENT_SECRET")
	}
	if *client == "" || *secret == "" {
		return usageErrorf(fs.Name(), "--client and --secret are required")
	}
	form := url.Values{"grant_type": {"client_credentials"}}
	if len(scope) > 0 {
		form.Set("scope", strings.Join(scope, " "))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(*base, "/")+"/oauth2/token", strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(*client), url.QueryEscape(*secret))
	var out struct {
		AccessToken string `json:"access_token"`
	}
	if err := doJSON(req, &out); err != nil {
		return err
	}
	fmt.Fprintln(a.stdout, out.AccessToken)
	return nil
}
