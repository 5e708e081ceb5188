package kvapi_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// A request on every route, for the tables over all of them.
type routeCase struct {
	name, method, path, body string
	merge                    bool   // sent as a JSON merge patch
	scope                    string // the one scope that grants it
}

const mergeCT = "application/merge-patch+json"

// everyRoute names path p (or the top folder) on every route.
func everyRoute(p string) []routeCase {
	return []routeCase{
		{"read", "GET", "/v1/secret/data/" + p, "", false, "secrets:read:" + p},
		{"read version", "GET", "/v1/secret/data/" + p + "?version=1", "", false, "secrets:read:" + p},
		{"write", "POST", "/v1/secret/data/" + p, `{"data":{"a":"b"}}`, false, "secrets:write:" + p},
		{"write put", "PUT", "/v1/secret/data/" + p, `{"data":{"a":"b"},"options":{"cas":0}}`, false, "secrets:write:" + p},
		{"patch", "PATCH", "/v1/secret/data/" + p, `{"data":{"a":"c"}}`, true, "secrets:write:" + p},
		{"delete latest", "DELETE", "/v1/secret/data/" + p, "", false, "secrets:delete:" + p},
		{"delete versions", "POST", "/v1/secret/delete/" + p, `{"versions":[1]}`, false, "secrets:delete:" + p},
		{"undelete", "POST", "/v1/secret/undelete/" + p, `{"versions":[1]}`, false, "secrets:delete:" + p},
		{"destroy", "PUT", "/v1/secret/destroy/" + p, `{"versions":[1]}`, false, "secrets:admin"},
		{"subkeys", "GET", "/v1/secret/subkeys/" + p, "", false, "secrets:read:" + p},
		{"metadata read", "GET", "/v1/secret/metadata/" + p, "", false, "secrets:read:" + p},
		{"metadata write", "POST", "/v1/secret/metadata/" + p, `{"max_versions":3}`, false, "secrets:admin"},
		{"metadata patch", "PATCH", "/v1/secret/metadata/" + p, `{"max_versions":4}`, true, "secrets:admin"},
		{"metadata delete", "DELETE", "/v1/secret/metadata/" + p, "", false, "secrets:admin"},
		{"list", "LIST", "/v1/secret/metadata/", "", false, "secrets:list:*"},
		{"list get", "GET", "/v1/secret/metadata/?list=true", "", false, "secrets:list:*"},
		{"config read", "GET", "/v1/secret/config", "", false, "secrets:admin"},
		{"config write", "POST", "/v1/secret/config", `{"max_versions":3}`, false, "secrets:admin"},
	}
}

func (e *env) do(tok string, rc routeCase) (int, []byte) {
	e.t.Helper()
	if rc.merge {
		return e.call(tok, rc.method, rc.path, rc.body, "Content-Type", mergeCT)
	}
	return e.call(tok, rc.method, rc.path, rc.body)
}

// seed writes two versions of tenant's path p, and its metadata.
func (e *env) seed(tenant, p string) {
	e.t.Helper()
	tok := e.token(tenant, allScopes...)
	for _, body := range []string{`{"data":{"v":"one"}}`, `{"data":{"v":"two"}}`} {
		if st, b := e.call(tok, "POST", "/v1/secret/data/"+p, body); st != 200 {
			e.t.Fatalf("seed: %d %s", st, b)
		}
	}
	if st, b := e.call(tok, "POST", "/v1/secret/metadata/"+p, `{"custom_metadata":{"owner":"a"}}`); st != 204 {
		e.t.Fatalf("seed metadata: %d %s", st, b)
	}
}

var volatile = regexp.MustCompile(`"(request_id|created_time|updated_time|deletion_time)":"[^"]*"`)

// TestTenantIsolation: on every route, another tenant's path is answered
// exactly as a path that exists nowhere, and leaves the owner's secret as
// it was.
func TestTenantIsolation(t *testing.T) {
	for _, rc := range everyRoute("p") {
		t.Run(rc.name, func(t *testing.T) {
			e := start(t)
			e.seed("alpha", "p")
			stOther, bOther := e.do(e.token("beta", allScopes...), rc)
			stNone, bNone := e.do(e.token("gamma", allScopes...), rc)
			if stOther != stNone || volatile.ReplaceAllString(string(bOther), "") != volatile.ReplaceAllString(string(bNone), "") {
				t.Errorf("another tenant's path: %d %s; a missing path: %d %s", stOther, bOther, stNone, bNone)
			}
			if strings.HasPrefix(rc.name, "read") || rc.name == "subkeys" || rc.name == "metadata read" || strings.HasPrefix(rc.name, "list") {
				if stOther != http.StatusNotFound {
					t.Errorf("read of another tenant's path: %d, want 404", stOther)
				}
			}
			owner := e.token("alpha", allScopes...)
			st, b := e.call(owner, "GET", "/v1/secret/data/p", "")
			var got struct {
				Data struct {
					Data     map[string]string `json:"data"`
					Metadata struct {
						Version      int    `json:"version"`
						DeletionTime string `json:"deletion_time"`
					} `json:"metadata"`
				} `json:"data"`
			}
			if st != 200 || json.Unmarshal(b, &got) != nil || got.Data.Data["v"] != "two" || got.Data.Metadata.Version != 2 ||
				got.Data.Metadata.DeletionTime != "" {
				t.Errorf("the owner's secret changed: %d %s", st, b)
			}
			st, b = e.call(owner, "GET", "/v1/secret/metadata/p", "")
			if st != 200 || !strings.Contains(string(b), `"custom_metadata":{"owner":"a"}`) || !strings.Contains(string(b), `"max_versions":0`) {
				t.Errorf("the owner's metadata changed: %d %s", st, b)
			}
		})
	}
}

// TestScopes: on every route, the one scope that grants it does, a
// token without it is refused 403 naming it — decided before any lookup,
// so a missing path is refused the same — and no other scope grants it.
func TestScopes(t *testing.T) {
	all := append(allScopes, "secrets:read:p", "secrets:write:p", "secrets:delete:p", "secrets:list:*")
	for _, rc := range everyRoute("p") {
		t.Run(rc.name, func(t *testing.T) {
			e := start(t)
			e.seed("default", "p")
			kind := strings.Split(rc.scope, ":")[1]
			var others []string
			for _, s := range all {
				if strings.Split(s, ":")[1] != kind {
					others = append(others, s)
				}
			}
			grant := []string{rc.scope}
			if kind == "admin" {
				others = append(others, "secrets:admin:*", "secrets:administrator", "SECRETS:ADMIN", "transit:admin", "secrets:*")
			} else {
				prefix := "secrets:" + kind + ":"
				others = append(others, prefix+"q", prefix+"p*x", prefix+"*p", prefix+"**", "secrets:"+kind, strings.ToUpper(rc.scope),
					"transit:"+kind+":*", "secrets:"+kind+"s:*")
				if kind == "list" {
					others = append(others, prefix+"a/*", prefix)
				} else {
					grant = append(grant, prefix+"*", prefix+"p*")
				}
			}
			for _, scopes := range [][]string{nil, others} {
				st, b := e.do(e.token("default", scopes...), rc)
				if st != http.StatusForbidden || !strings.Contains(errorsOf(t, b)[0], "do not grant "+rc.scope) {
					t.Errorf("scopes %q: %d %s", scopes, st, b)
				}
				if o := e.last(); o.Reason != "insufficient_scope" || o.Status != 403 {
					t.Errorf("outcome %+v", o)
				}
			}
			missing := rc
			missing.path = strings.Replace(rc.path, "/p", "/absent", 1)
			if rc.scope != "secrets:admin" && !strings.HasSuffix(rc.scope, "*") {
				if st, _ := e.do(e.token("default", others...), missing); st != http.StatusForbidden {
					t.Errorf("a missing path without the scope: %d, want 403 as for one that exists", st)
				}
			}
			for _, scope := range grant {
				if st, b := e.do(e.token("default", scope), rc); st == http.StatusForbidden {
					t.Errorf("scope %q refused: %s", scope, b)
				}
			}
		})
	}
}
