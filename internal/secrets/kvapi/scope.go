package kvapi

import (
	"net/http"
	"strings"

	"github.com/keygate/keygate/internal/httperr"
)

// kind is what a route asks of the caller's scopes (see the package doc).
type kind uint8

const (
	kindRead kind = iota + 1
	kindWrite
	kindDelete
	kindList
	kindAdmin
)

var kindNames = [...]string{kindRead: "read", kindWrite: "write", kindDelete: "delete", kindList: "list", kindAdmin: "admin"}

func (k kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return ""
}

// permits reports whether the space-separated scopes grant k on path
// (ignored for admin).
func permits(scopes string, k kind, path string) bool {
	for scopes != "" {
		var tok string
		tok, scopes, _ = strings.Cut(scopes, " ")
		if grants(tok, k, path) {
			return true
		}
	}
	return false
}

// grants reports whether one scope grants k on path: secrets:admin for
// admin, secrets:<k>:<glob> for the others, where <glob> is the path
// itself or a prefix followed by '*'.
func grants(scope string, k kind, path string) bool {
	rest, ok := strings.CutPrefix(scope, "secrets:")
	if !ok || k == 0 {
		return false
	}
	if k == kindAdmin {
		return rest == "admin"
	}
	glob, ok := strings.CutPrefix(rest, k.String())
	if !ok || len(glob) == 0 || glob[0] != ':' {
		return false
	}
	glob = glob[1:]
	if glob == "" { // an empty glob is no path (the top folder is listed with '*')
		return false
	}
	if prefix, ok := strings.CutSuffix(glob, "*"); ok {
		return !strings.Contains(prefix, "*") && strings.HasPrefix(path, prefix)
	}
	return glob == path && !strings.Contains(glob, "*")
}

// need is the scope that would grant k on path.
func need(k kind, path string) string {
	switch {
	case k == kindAdmin:
		return "secrets:admin"
	case path == "": // the top folder, which only '*' matches
		path = "*"
	}
	return "secrets:" + k.String() + ":" + path
}

// scopeDenied is the answer to a token whose scopes do not grant the
// route, naming the scope that would.
func scopeDenied(k kind, path string) *httperr.Error {
	return &httperr.Error{Status: http.StatusForbidden, Code: "insufficient_scope",
		Description: "permission denied: the token's scopes do not grant " + need(k, path)}
}
