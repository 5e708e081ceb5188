package runner

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// call sends one set-up request and decodes a JSON answer into out. It is
// for preparing a target, not for load: answers other than 2xx are errors
// that name the path and status (never the credentials sent).
func call(ctx context.Context, method, u string, header http.Header, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = header.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("set-up: %s %s: %w", method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("set-up: %s %s answered %s: %s", method, req.URL.Path, resp.Status, strings.TrimSpace(string(b)))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("set-up: %s %s: %w", method, req.URL.Path, err)
		}
	}
	return nil
}

// Client is an OAuth client created on a keygate target.
type Client struct{ ID, Secret string }

// CreateClient creates an OAuth client with scopes through the admin API.
func CreateClient(ctx context.Context, t *Target, name string, scopes ...string) (Client, error) {
	body, _ := json.Marshal(map[string]any{"name": name, "scopes": scopes})
	var out struct {
		ID     string `json:"client_id"`
		Secret string `json:"client_secret"`
	}
	h := http.Header{"Authorization": {"Bearer " + t.AdminToken}, "Content-Type": {"application/json"}}
	err := call(ctx, http.MethodPost, t.Admin+"/v1/admin/clients", h, body, &out)
	return Client{out.ID, out.Secret}, err
}

// BasicAuth is the client's Authorization header value.
func (c Client) BasicAuth() string {
	req, _ := http.NewRequest(http.MethodGet, "/", nil)
	req.SetBasicAuth(url.QueryEscape(c.ID), url.QueryEscape(c.Secret))
	return req.Header.Get("Authorization")
}

// AccessToken gets an access token for the client (client_credentials).
func AccessToken(ctx context.Context, t *Target, c Client) (string, error) {
	h := http.Header{"Authorization": {c.BasicAuth()}, "Content-Type": {"application/x-www-form-urlencoded"}}
	var out struct {
		AccessToken string `json:"access_token"`
	}
	if err := call(ctx, http.MethodPost, t.Base+"/oauth2/token", h, []byte("grant_type=client_credentials"), &out); err != nil {
		return "", err
	}
	if out.AccessToken == "" {
		return "", fmt.Errorf("set-up: /oauth2/token answered no access_token")
	}
	return out.AccessToken, nil
}

// VaultCall sends a Vault-API request with the token in X-Vault-Token.
func VaultCall(ctx context.Context, t *Target, token, method, path string, body any, out any) error {
	var b []byte
	if body != nil {
		b, _ = json.Marshal(body)
	}
	h := http.Header{"X-Vault-Token": {token}, "Content-Type": {"application/json"}}
	return call(ctx, method, t.Base+path, h, b, out)
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
