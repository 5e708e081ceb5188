package kvapi

import (
	"net/http"
	"strings"

	"github.com/keygate/keygate/internal/secrets"
)

// route is what a request asks: its audit operation, the scope it needs
// and the function that serves it.
type route struct {
	name    string
	scope   kind
	op      func(*Handler, *call) error
	list    bool // the path is a folder
	changes bool // it changes the store: the audit log's pending record is written first
}

// Operations lists every operation an Outcome names, for metrics.
func Operations() []string {
	return []string{"secret", "secret.read", "secret.write", "secret.patch", "secret.delete", "secret.undelete",
		"secret.destroy", "secret.subkeys", "secret.metadata.read", "secret.metadata.write", "secret.metadata.patch",
		"secret.metadata.delete", "secret.list", "secret.config.read", "secret.config.write"}
}

var (
	rtRead      = route{name: "secret.read", scope: kindRead, op: (*Handler).read}
	rtWrite     = route{name: "secret.write", scope: kindWrite, op: (*Handler).write, changes: true}
	rtPatch     = route{name: "secret.patch", scope: kindWrite, op: (*Handler).patch, changes: true}
	rtDelLatest = route{name: "secret.delete", scope: kindDelete, op: (*Handler).deleteLatest, changes: true}
	rtDelete    = route{name: "secret.delete", scope: kindDelete, op: (*Handler).deleteVersions, changes: true}
	rtUndelete  = route{name: "secret.undelete", scope: kindDelete, op: (*Handler).undelete, changes: true}
	rtDestroy   = route{name: "secret.destroy", scope: kindAdmin, op: (*Handler).destroy, changes: true}
	rtSubkeys   = route{name: "secret.subkeys", scope: kindRead, op: (*Handler).subkeys}
	rtMetaRead  = route{name: "secret.metadata.read", scope: kindRead, op: (*Handler).metadataRead}
	rtMetaWrite = route{name: "secret.metadata.write", scope: kindAdmin, op: (*Handler).metadataWrite, changes: true}
	rtMetaPatch = route{name: "secret.metadata.patch", scope: kindAdmin, op: (*Handler).metadataPatch, changes: true}
	rtMetaDel   = route{name: "secret.metadata.delete", scope: kindAdmin, op: (*Handler).metadataDelete, changes: true}
	rtList      = route{name: "secret.list", scope: kindList, op: (*Handler).list, list: true}
	rtConfRead  = route{name: "secret.config.read", scope: kindAdmin, op: (*Handler).configRead}
	rtConfWrite = route{name: "secret.config.write", scope: kindAdmin, op: (*Handler).configWrite, changes: true}
)

// resolve finds the request's route and checks its path (the folder, for
// a list): an unknown path is 404, a method the path does not take 405, a
// path that is not a valid secret path 400. The route's name is set even
// when the method or the path is refused.
func resolve(r *http.Request) (route, string, error) {
	rest, ok := strings.CutPrefix(r.URL.Path, Prefix)
	if !ok {
		return route{}, "", errNoPath
	}
	seg, path, _ := strings.Cut(rest, "/")
	rt, err := routeOf(seg, r)
	if err != nil {
		return rt, "", err
	}
	if raw := r.URL.RawPath; raw != "" && (strings.Contains(raw, "%2F") || strings.Contains(raw, "%2f")) {
		return rt, "", badRequest("invalid secret path: an encoded slash (%2F) is not a path separator; send '/' as it is")
	}
	if seg == "config" {
		if path != "" {
			return route{}, "", errNoPath
		}
		return rt, "", nil
	}
	if rt.list {
		if path != "" && !strings.HasSuffix(path, "/") {
			path += "/" // Vault lists a folder named without its slash
		}
		err = secrets.ValidFolder(path)
	} else {
		err = secrets.ValidPath(path)
	}
	if err != nil {
		return rt, "", badRequest("invalid secret path: " + storeText(err, secrets.ErrInvalid))
	}
	return rt, path, nil
}

// byMethod is a path's routes by method ("POST" also serves PUT, as
// Vault takes both for a write).
type byMethod map[string]route

var routes = map[string]byMethod{
	"data":     {http.MethodGet: rtRead, http.MethodPost: rtWrite, http.MethodPatch: rtPatch, http.MethodDelete: rtDelLatest},
	"metadata": {"LIST": rtList, http.MethodGet: rtMetaRead, http.MethodPost: rtMetaWrite, http.MethodPatch: rtMetaPatch, http.MethodDelete: rtMetaDel},
	"delete":   {http.MethodPost: rtDelete},
	"undelete": {http.MethodPost: rtUndelete},
	"destroy":  {http.MethodPost: rtDestroy},
	"subkeys":  {http.MethodGet: rtSubkeys},
	"config":   {http.MethodGet: rtConfRead, http.MethodPost: rtConfWrite},
}

// routeOf is the route of the path's first segment and the method.
func routeOf(seg string, r *http.Request) (route, error) {
	ms, ok := routes[seg]
	if !ok {
		return route{}, errNoPath
	}
	m := r.Method
	switch {
	case m == http.MethodPut:
		m = http.MethodPost
	case isList(r):
		m = "LIST"
	}
	rt, ok := ms[m]
	if !ok {
		return route{}, errMethod
	}
	return rt, nil
}

// isList reports whether r is a list: the LIST method, or GET with
// list=true, as Vault reads them.
func isList(r *http.Request) bool {
	if r.Method == "LIST" {
		return true
	}
	if r.Method != http.MethodGet || r.URL.RawQuery == "" {
		return false
	}
	switch r.URL.Query().Get("list") {
	case "true", "1", "t", "T", "TRUE", "True":
		return true
	}
	return false
}
