package vaultapi

import (
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/keygate/keygate/internal/transit/keystore"
)

// route is one operation of the API: what it asks of the scopes, the
// parameters it knows (others draw Vault's warning) and its handler.
type route struct {
	name  string // the Outcome's Operation
	scope op
	// readNothing: a read, which answers a missing key as Vault answers a
	// read of nothing (404 {"errors":[]}) rather than with an error.
	readNothing bool
	// changes: the route changes a key (or makes the tenant's wrapping
	// key), so the audit log's pending record is written first.
	changes bool
	params  []string
	serve   func(h *Handler, c *call) error
}

// args are what the path holds besides the route.
type args struct {
	name   string // the key, "" for none
	a1, a2 string // export: type, version; datakey: plaintext|wrapped; sign, verify, hmac, hash: the algorithm; random: source, bytes
}

var (
	encParams  = []string{"plaintext", "context", "key_version", "associated_data", "batch_input", "type", "convergent_encryption", "partial_failure_response_code", "nonce"}
	decParams  = []string{"ciphertext", "context", "associated_data", "batch_input", "partial_failure_response_code", "nonce"}
	signParams = []string{"input", "context", "hash_algorithm", "algorithm", "key_version", "prehashed", "signature_algorithm", "marshaling_algorithm", "salt_length", "batch_input"}
	createKey  = []string{"type", "derived", "convergent_encryption", "exportable", "allow_plaintext_backup", "context", "auto_rotate_period", "key_size", "external_key_ref"}
)

// The routes, by the Outcome's Operation names.
var (
	rList          = &route{name: "transit.keys.list", scope: opAdmin, readNothing: true, serve: serveList}
	rCreate        = &route{name: "transit.keys.create", scope: opAdmin, changes: true, params: createKey, serve: serveCreate}
	rRead          = &route{name: "transit.keys.read", scope: opRead, readNothing: true, params: []string{"context"}, serve: serveRead}
	rDelete        = &route{name: "transit.keys.delete", scope: opAdmin, changes: true, serve: serveDelete}
	rConfig        = &route{name: "transit.keys.config", scope: opAdmin, changes: true, serve: serveConfig, params: []string{"min_decryption_version", "min_encryption_version", "deletion_allowed", "exportable", "allow_plaintext_backup", "auto_rotate_period"}}
	rRotate        = &route{name: "transit.keys.rotate", scope: opAdmin, changes: true, serve: serveRotate, params: []string{"external_key_ref"}}
	rTrim          = &route{name: "transit.keys.trim", scope: opAdmin, changes: true, serve: serveTrim, params: []string{"min_available_version"}}
	rImport        = &route{name: "transit.keys.import", scope: opAdmin, changes: true, serve: serveImport, params: []string{"type", "hash_function", "ciphertext", "public_key", "allow_rotation", "derived", "exportable", "allow_plaintext_backup", "context", "auto_rotate_period", "convergent_encryption"}}
	rImportVersion = &route{name: "transit.keys.import_version", scope: opAdmin, changes: true, serve: serveImportVersion, params: []string{"ciphertext", "public_key", "hash_function", "version"}}
	rWrappingKey   = &route{name: "transit.wrapping_key", scope: opAdmin, changes: true, serve: serveWrappingKey}
	rExport        = &route{name: "transit.export", scope: opAdmin, readNothing: true, params: []string{"format"}, serve: serveExport}
	rEncrypt       = &route{name: "transit.encrypt", scope: opEncrypt, params: encParams, serve: serveEncrypt}
	rDecrypt       = &route{name: "transit.decrypt", scope: opDecrypt, params: decParams, serve: serveDecrypt}
	rRewrap        = &route{name: "transit.rewrap", scope: opRewrap, params: []string{"ciphertext", "context", "key_version", "associated_data", "batch_input", "nonce"}, serve: serveRewrap}
	rDataKey       = &route{name: "transit.datakey", scope: opDataKey, params: []string{"context", "bits", "key_version", "associated_data", "nonce"}, serve: serveDataKey}
	rSign          = &route{name: "transit.sign", scope: opSign, params: signParams, serve: serveSign}
	rVerify        = &route{name: "transit.verify", scope: opVerify, params: append(slices.Clone(signParams), "signature", "hmac"), serve: serveVerify}
	rHMAC          = &route{name: "transit.hmac", scope: opHMAC, params: []string{"input", "algorithm", "key_version", "batch_input"}, serve: serveHMAC}
	rRandom        = &route{name: "transit.random", scope: opRandom, params: []string{"bytes", "format", "source"}, serve: serveRandom}
	rHash          = &route{name: "transit.hash", scope: opHash, params: []string{"input", "algorithm", "format"}, serve: serveHash}
	rBackup        = &route{name: "transit.keys.backup", scope: opAdmin, serve: serveBackup}
	// rRestore makes a key, but the audit log's pending record is written
	// by serveRestore, once the backup names the key.
	rRestore = &route{name: "transit.keys.restore", scope: opAdmin, params: []string{"backup", "name", "force"}, serve: serveRestore}
)

// routes are every route, in the order of the API's documentation.
var routes = []*route{rList, rCreate, rRead, rDelete, rConfig, rRotate, rTrim, rImport, rImportVersion, rWrappingKey,
	rExport, rEncrypt, rDecrypt, rRewrap, rDataKey, rSign, rVerify, rHMAC, rRandom, rHash, rBackup, rRestore}

// Operations lists the Outcome's Operation names of every route
// ("transit.encrypt", ...); a request no route matched is "transit".
func Operations() []string {
	out := make([]string, len(routes))
	for i, rt := range routes {
		out[i] = rt.name
	}
	return out
}

// resolve finds the route of r's method and path: errNoPath for a path
// the API does not have (or a key name outside Vault's grammar, or longer
// than keystore.MaxNameBytes, which no key can have), errLongName for
// a key made under a name Vault would take but is too long, errMethod for
// a method the path does not take. Vault's
// methods: PUT and POST write, GET reads, LIST (or GET with ?list=true)
// lists, DELETE deletes.
func resolve(r *http.Request) (*route, args, error) {
	path, ok := strings.CutPrefix(r.URL.Path, Prefix)
	if !ok {
		return nil, args{}, errNoPath
	}
	m := r.Method
	write := m == http.MethodPost || m == http.MethodPut
	list := m == "LIST" || m == http.MethodGet && isList(r.URL.RawQuery)
	read := m == http.MethodGet && !list
	pick := func(rt *route, ok bool, a args) (*route, args, error) {
		if !ok {
			return rt, a, errMethod
		}
		return rt, a, nil
	}
	first, rest, _ := strings.Cut(path, "/")
	switch first {
	case "keys":
		if rest == "" {
			return pick(rList, list, args{})
		}
		name, sub, hasSub := strings.Cut(rest, "/")
		a := args{name: name}
		if !keystore.ValidName(name) {
			switch {
			case !keystore.LongName(name) || !write:
			case !hasSub:
				return rCreate, a, errLongName
			case sub == "import":
				return rImport, a, errLongName
			}
			return nil, a, errNoPath
		}
		if !hasSub {
			switch {
			case write:
				return rCreate, a, nil
			case read:
				return rRead, a, nil
			case m == http.MethodDelete:
				return rDelete, a, nil
			}
			return rRead, a, errMethod
		}
		var rt *route
		switch sub {
		case "config":
			rt = rConfig
		case "rotate":
			rt = rRotate
		case "trim":
			rt = rTrim
		case "import":
			rt = rImport
		case "import_version":
			rt = rImportVersion
		default:
			return nil, a, errNoPath
		}
		return pick(rt, write, a)
	case "wrapping_key":
		if rest != "" {
			return nil, args{}, errNoPath
		}
		return pick(rWrappingKey, read, args{})
	case "export":
		typ, rest, _ := strings.Cut(rest, "/")
		name, version, _ := strings.Cut(rest, "/")
		a := args{name: name, a1: typ, a2: version}
		if typ == "" || !keystore.ValidName(name) || strings.Contains(version, "/") {
			return nil, a, errNoPath
		}
		return pick(rExport, read, a)
	case "encrypt", "decrypt", "rewrap":
		a := args{name: rest}
		if !keystore.ValidName(rest) {
			return nil, a, errNoPath
		}
		rt := rEncrypt
		if first == "decrypt" {
			rt = rDecrypt
		} else if first == "rewrap" {
			rt = rRewrap
		}
		return pick(rt, write, a)
	case "datakey":
		kind, name, _ := strings.Cut(rest, "/")
		a := args{name: name, a1: kind}
		if kind == "" || !keystore.ValidName(name) {
			return nil, a, errNoPath
		}
		return pick(rDataKey, write, a)
	case "sign", "verify", "hmac":
		name, alg, _ := strings.Cut(rest, "/")
		a := args{name: name, a1: alg}
		if !keystore.ValidName(name) || strings.Contains(alg, "/") {
			return nil, a, errNoPath
		}
		rt := rSign
		if first == "verify" {
			rt = rVerify
		} else if first == "hmac" {
			rt = rHMAC
		}
		return pick(rt, write, a)
	case "random":
		source, bytes, _ := strings.Cut(rest, "/")
		if strings.Contains(bytes, "/") {
			return nil, args{}, errNoPath
		}
		return pick(rRandom, write, args{a1: source, a2: bytes})
	case "hash":
		if strings.Contains(rest, "/") {
			return nil, args{}, errNoPath
		}
		return pick(rHash, write, args{a1: rest})
	case "backup":
		a := args{name: rest}
		if !keystore.ValidName(rest) {
			return nil, a, errNoPath
		}
		return pick(rBackup, read, a)
	case "restore":
		a := args{name: rest}
		switch {
		case rest == "" || keystore.ValidName(rest):
			return pick(rRestore, write, a)
		case keystore.LongName(rest) && write:
			return rRestore, a, errLongName
		}
		return nil, a, errNoPath
	}
	return nil, args{}, errNoPath
}

// isList reports whether a query asks for a list (list=true, as Vault's
// HTTP layer reads it).
func isList(rawQuery string) bool {
	if rawQuery == "" {
		return false
	}
	v, err := url.ParseQuery(rawQuery)
	if err != nil {
		return false
	}
	l := v.Get("list")
	return l == "true" || l == "1" || l == "t" || l == "True" || l == "TRUE"
}

// paramWarnings are Vault's warnings about the request's parameters:
// those the route does not know (ignored), and those the path gives as
// well (the path's value is the one used). Some Vault clients take the
// first for a mistake of theirs, the second for none. A request without
// either allocates nothing here: this runs on every transit request.
func paramWarnings(rt *route, a args, q *request) []string {
	var ignored, replaced []string
	for _, m := range q.top {
		switch {
		case captured(rt, a, m.name):
			replaced = append(replaced, string(m.name))
		case !known(rt, m.name):
			ignored = append(ignored, string(m.name))
		}
	}
	if len(ignored)+len(replaced) == 0 {
		return nil
	}
	var out []string
	if len(ignored) > 0 {
		slices.Sort(ignored)
		out = append(out, "Endpoint ignored these unrecognized parameters: ["+strings.Join(ignored, " ")+"]")
	}
	if len(replaced) > 0 {
		slices.Sort(replaced)
		out = append(out, "Endpoint replaced the value of these parameters with the values captured from the endpoint's path: ["+
			strings.Join(replaced, " ")+"]")
	}
	return out
}

func known(rt *route, name []byte) bool {
	for _, p := range rt.params {
		if string(name) == p {
			return true
		}
	}
	return false
}

// captured reports whether the request's path gives the parameter name,
// by the name of Vault's field for it.
func captured(rt *route, a args, name []byte) bool {
	switch string(name) {
	case "name":
		return a.name != ""
	case "type":
		return rt == rExport
	case "version":
		return rt == rExport && a.a2 != ""
	case "plaintext": // Vault's field for datakey's plaintext|wrapped
		return rt == rDataKey
	case "urlalgorithm":
		return (rt == rSign || rt == rVerify || rt == rHMAC || rt == rHash) && a.a1 != ""
	case "source":
		return rt == rRandom && a.a1 != ""
	case "urlbytes":
		return rt == rRandom && a.a2 != ""
	}
	return false
}
