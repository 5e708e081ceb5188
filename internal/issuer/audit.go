package issuer

import (
	"net/http"
	"net/url"

	"github.com/keygate/keygate/internal/audit/httpaudit"
)

// The audit records of the token service. The server wraps the endpoints
// with the node's httpaudit.Auditor; the handlers tell it what they know
// through httpaudit.From(w) (a nil Note, and so nothing, without one). What
// is recorded: the authenticated client or user; the signing key's kid of
// an issued token; and, as HMACs under the audit key, the jti of a token
// issued, introspected or revoked, the refresh token family, the username
// of a login and a client id that failed to authenticate. Never a secret,
// a password or a token. The admin API's records are package admin's.

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
// token the request issues, and its jti (HMAC'd), as accessToken made them.
func noteIssued(w http.ResponseWriter, id issuedID) {
	n := httpaudit.From(w)
	if n == nil {
		return
	}
	if id.kid != "" {
		n.Key(id.kid, 0)
	}
	if id.jti != "" {
		n.Hash("jti", id.jti)
	}
}
