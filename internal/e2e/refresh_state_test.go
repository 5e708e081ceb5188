package e2e

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/issuer"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/rootkey"
	"github.com/keygate/keygate/internal/server"
	"github.com/keygate/keygate/internal/testnet"
)

// TestRefreshRedisDown: two nodes on one PostgreSQL, configured with a
// Redis that does not answer, so that a revocation made at one never
// reaches the other's memory. A user disabled (or deleted, or revoked) at
// node A through the admin API cannot refresh at node B: B reads the user
// and the subject's revocations from the store. The refusal revokes the
// family, so its newest refresh token is refused at both nodes afterwards,
// even once the user is enabled again.
func TestRefreshRedisDown(t *testing.T) {
	dbURL := newSchema(t)
	redisURL := "redis://" + testnet.ClosedAddr(t) + "/0"
	dir := t.TempDir()
	rootKey := filepath.Join(dir, "root.key")
	if err := rootkey.GenerateKeyFile(rootKey, rand.Reader); err != nil {
		t.Fatal(err)
	}
	adminToken := strings.Repeat("r", 40)
	var nodes []*live
	for i := range 2 {
		nodes = append(nodes, startLive(t, server.Config{AdminToken: adminToken,
			Node: &node.Config{DataDir: filepath.Join(dir, "node"+string(rune('a'+i))), Issuer: testIssuer, Audience: testAudience,
				TokenService: config.TokenService{DatabaseURL: dbURL, RootKeyFile: rootKey, RedisURL: redisURL}}}))
	}
	a, b := nodes[0], nodes[1]
	jh := http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + adminToken}}
	admin := func(t *testing.T, method, path, body string, want int) []byte {
		t.Helper()
		resp, out := do(t, method, a.admin+path, body, jh)
		if resp.StatusCode != want {
			t.Fatalf("%s %s at A: %d %s, want %d", method, path, resp.StatusCode, out, want)
		}
		return out
	}
	var cl struct {
		ID     string `json:"client_id"`
		Secret string `json:"client_secret"`
	}
	if err := json.Unmarshal(admin(t, http.MethodPost, "/v1/admin/clients", `{"name":"app","scopes":["demo"]}`, http.StatusCreated), &cl); err != nil {
		t.Fatal(err)
	}
	basic := form()
	req, _ := http.NewRequest(http.MethodPost, "/", nil)
	req.SetBasicAuth(url.QueryEscape(cl.ID), url.QueryEscape(cl.Secret))
	basic.Set("Authorization", req.Header.Get("Authorization"))
	type tokens struct {
		Refresh string `json:"refresh_token"`
		Error   string `json:"error"`
	}
	grant := func(t *testing.T, n *live, path, body string) (int, tokens) {
		t.Helper()
		resp, out := do(t, http.MethodPost, n.base+path, body, basic)
		var tr tokens
		if err := json.Unmarshal(out, &tr); err != nil {
			t.Fatalf("%s answered %d %s: %v", path, resp.StatusCode, out, err)
		}
		return resp.StatusCode, tr
	}
	refresh := func(t *testing.T, n *live, token string) (int, tokens) {
		t.Helper()
		return grant(t, n, "/oauth2/token", "grant_type=refresh_token&refresh_token="+url.QueryEscape(token))
	}

	for i, tc := range []struct {
		name   string
		change func(t *testing.T, userID string)
		undo   func(t *testing.T, userID string) // nil: nothing to undo
	}{
		{"disabled user", func(t *testing.T, id string) {
			admin(t, http.MethodPatch, "/v1/admin/users/"+id, `{"disabled":true}`, http.StatusOK)
		}, func(t *testing.T, id string) {
			admin(t, http.MethodPatch, "/v1/admin/users/"+id, `{"disabled":false}`, http.StatusOK)
		}},
		{"deleted user", func(t *testing.T, id string) {
			admin(t, http.MethodDelete, "/v1/admin/users/"+id, "", http.StatusNoContent)
		}, nil},
		{"subject revoked", func(t *testing.T, id string) {
			admin(t, http.MethodPost, "/v1/admin/revocations", `{"subject":"`+id+`"}`, http.StatusCreated)
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			username := fmt.Sprintf("user%d", i)
			var u struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal(admin(t, http.MethodPost, "/v1/admin/users", `{"username":"`+username+`","password":"a long password","scopes":["demo"]}`, http.StatusCreated), &u); err != nil {
				t.Fatal(err)
			}
			code, login := grant(t, a, "/v1/login", "username="+username+"&password=a+long+password")
			if code != http.StatusOK {
				t.Fatalf("login at A: %d %+v", code, login)
			}
			code, tr := refresh(t, b, login.Refresh)
			if code != http.StatusOK {
				t.Fatalf("refresh at B before the change: %d %+v", code, tr)
			}
			newest := tr.Refresh

			tc.change(t, u.ID)
			if b.Revocations().Revoked(testIssuer, "", u.ID, time.Now().Add(-time.Minute)) {
				t.Fatal("B heard of A's revocation: the test no longer models a node that missed it")
			}
			if code, tr := refresh(t, b, newest); code != http.StatusBadRequest || tr.Error != "invalid_grant" {
				t.Fatalf("refresh at B after the change at A: %d %+v, want 400 invalid_grant", code, tr)
			}
			if tc.undo != nil {
				tc.undo(t, u.ID)
			}
			for name, n := range map[string]*live{"A": a, "B": b} {
				if code, tr := refresh(t, n, newest); code != http.StatusBadRequest || tr.Error != "invalid_grant" {
					t.Errorf("the family's newest refresh token at %s afterwards: %d %+v, want 400 invalid_grant", name, code, tr)
				}
			}
			d := issuer.SecretDigest(newest)
			if rt, err := b.Store().GetRefreshToken(t.Context(), d[:]); err != nil || !rt.Revoked {
				t.Errorf("the family's newest refresh token in the store: revoked %v (%v), want revoked", rt.Revoked, err)
			}
		})
	}
}
