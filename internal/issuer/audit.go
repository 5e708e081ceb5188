package issuer

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"

	"github.com/keygate/keygate/internal/audit"
	"github.com/keygate/keygate/internal/audit/httpaudit"
	"github.com/keygate/keygate/internal/store"
)

// The audit records of the token service and the admin API. The server
// wraps the endpoints with the node's httpaudit.Auditor; the handlers tell
// it what they know through httpaudit.From(w) (a nil Note, and so nothing,
// without one). What is recorded: the authenticated client or user, or
// the admin; the signing key's kid of an issued token; and, as HMACs under
// the audit key, the jti of a token issued, introspected or revoked, the
// refresh token family, the username of a login, a client id that failed
// to authenticate and the ids an admin request acts on. Never a secret,
// a password or a token.

// adminOps name the admin API's operations by route pattern; a route not
// here is named after its pattern (adminOp).
var adminOps = map[string]audit.Operation{
	"POST /v1/admin/tenants":             "admin.tenants.create",
	"GET /v1/admin/tenants":              "admin.tenants.list",
	"GET /v1/admin/tenants/{name}":       "admin.tenants.read",
	"DELETE /v1/admin/tenants/{name}":    "admin.tenants.delete",
	"POST /v1/admin/clients":             "admin.clients.create",
	"GET /v1/admin/clients":              "admin.clients.list",
	"POST /v1/admin/clients/{id}/secret": "admin.clients.rotate_secret",
	"DELETE /v1/admin/clients/{id}":      "admin.clients.delete",
	"PATCH /v1/admin/clients/{id}":       "admin.clients.update",
	"POST /v1/admin/users":               "admin.users.create",
	"GET /v1/admin/users":                "admin.users.list",
	"DELETE /v1/admin/users/{id}":        "admin.users.delete",
	"PATCH /v1/admin/users/{id}":         "admin.users.update",
	"POST /v1/admin/keys/rotate":         "admin.keys.rotate",
	"GET /v1/admin/keys":                 "admin.keys.list",
	"POST /v1/admin/revocations":         "admin.revocations.create",
}

// adminOp names the operation of an admin request by its route pattern:
// from adminOps, else "admin." followed by the pattern's literal path
// segments after /v1/admin/ and its method, in lower case
// ("POST /v1/admin/tenants" is admin.tenants.post).
func adminOp(pattern string) audit.Operation {
	if op, ok := adminOps[pattern]; ok {
		return op
	}
	method, path, _ := strings.Cut(pattern, " ")
	var b strings.Builder
	b.WriteString("admin")
	for _, seg := range strings.Split(strings.TrimPrefix(path, "/v1/admin/"), "/") {
		if seg == "" || strings.HasPrefix(seg, "{") {
			continue
		}
		b.WriteByte('.')
		b.WriteString(strings.ReplaceAll(strings.ToLower(seg), "-", "_"))
	}
	b.WriteByte('.')
	b.WriteString(strings.ToLower(method))
	if op := audit.Operation(b.String()); op.Valid() {
		return op
	}
	return "admin.request"
}

// noteAdmin tells the record of an admin request that the admin made it,
// its operation and the id it acts on, and for a request that changes
// state writes the pending record before the handler runs.
func noteAdmin(w http.ResponseWriter, r *http.Request) error {
	n := httpaudit.From(w)
	n.Admin()
	n.Op(adminOp(r.Pattern))
	if id := r.PathValue("id"); id != "" {
		n.Hash("id", id)
	}
	if name := r.PathValue("name"); name != "" && store.ValidTenantName(name) == nil {
		n.Tenant(name) // tenant names are not secret, and a valid one fits a record
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return nil
	}
	return n.Intent(r.Context())
}

// noteClient tells the record the authenticated client, and its tenant.
func noteClient(w http.ResponseWriter, c client) {
	n := httpaudit.From(w)
	n.Client(c.ID)
	n.Tenant(c.Tenant)
}

// noteRefused tells the record of a request whose client did not
// authenticate the client id it named, HMAC'd: it was never checked.
func noteRefused(w http.ResponseWriter, r *http.Request, v url.Values) {
	n := httpaudit.From(w)
	if n == nil {
		return
	}
	id, _, basic := r.BasicAuth()
	if basic {
		id, _ = url.QueryUnescape(id)
	} else if v != nil {
		id = v.Get("client_id")
	}
	if id != "" {
		n.Hash("client_id", id)
	}
}

// noteIssued tells the record the kid of the key that signed an access
// token the request issues, and its jti (HMAC'd), both read back from the
// token: its header and claims are the compact JSON keygate writes.
func noteIssued(w http.ResponseWriter, token string) {
	n := httpaudit.From(w)
	if n == nil {
		return
	}
	header, rest, _ := strings.Cut(token, ".")
	claims, _, _ := strings.Cut(rest, ".")
	if kid := member(header, "kid"); kid != "" {
		n.Key(kid, 0)
	}
	if jti := member(claims, "jti"); jti != "" {
		n.Hash("jti", jti)
	}
}

// member returns the string member name of the JSON object that seg holds
// in base64url, as keygate writes it: a member name in quotes cannot
// appear inside a string value, whose quotes are escaped.
func member(seg, name string) string {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return ""
	}
	_, v, ok := strings.Cut(string(b), `"`+name+`":"`)
	if !ok {
		return ""
	}
	v, _, ok = strings.Cut(v, `"`)
	if !ok {
		return ""
	}
	return v
}
