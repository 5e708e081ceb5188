package admin

import (
	"net/http"
	"strings"

	"github.com/keygate/keygate/internal/audit"
	"github.com/keygate/keygate/internal/audit/httpaudit"
	"github.com/keygate/keygate/internal/store"
)

// The audit records of the admin API. The server wraps the API with the
// node's httpaudit.Auditor, as it does the token endpoints; the handlers
// tell it what they know through httpaudit.From(w). What is recorded: that
// the admin made the request, its operation, the tenant it names, the kid
// of a signing key it rotates in and, as HMACs under the audit key, the ids
// it acts on (a client's or a user's, a revoked jti or subject). Never a
// secret, a password or a token.

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
