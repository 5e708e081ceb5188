package issuer

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"

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
