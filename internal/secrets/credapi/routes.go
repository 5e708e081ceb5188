package credapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/keygate/keygate/internal/secrets/totp"
)

// route finds the operation of a request, or refuses it.
func (h *Handler) route(r *http.Request) (*route, error) {
	p := r.URL.Path
	if raw := r.URL.RawPath; raw != "" && (strings.Contains(raw, "%2F") || strings.Contains(raw, "%2f")) {
		// decoded, it would name another path than a reader of the raw one
		// (a front proxy's rule) sees: p%2Fgenerate is not p/generate
		return nil, badRequest("invalid path: an encoded slash (%2F) is not a path separator; send '/' as it is")
	}
	if rest, ok := strings.CutPrefix(p, TOTPPrefix); ok {
		return h.totpRoute(r, rest)
	}
	if p == PoliciesList || p == PoliciesPrefix {
		if !isList(r) {
			return nil, errMethod
		}
		return &route{op: "password_policy.list", scope: "passwords:admin", run: h.listPolicies}, nil
	}
	if rest, ok := strings.CutPrefix(p, PoliciesPrefix); ok {
		return h.policyRoute(r, rest)
	}
	return nil, errNoPath
}

// isList: Vault's LIST, or GET with list=true.
func isList(r *http.Request) bool {
	return r.Method == "LIST" || r.Method == http.MethodGet && r.URL.Query().Get("list") == "true"
}

func (h *Handler) totpRoute(r *http.Request, rest string) (*route, error) {
	kind, name, _ := strings.Cut(rest, "/")
	switch {
	case kind == "keys" && name == "":
		if !isList(r) {
			return nil, errMethod
		}
		return &route{op: "totp.keys.list", scope: "totp:admin", run: h.listKeys}, nil
	case name == "" || strings.Contains(name, "/"):
		return nil, errNoPath
	case kind == "keys":
		switch r.Method {
		case http.MethodGet:
			return &route{op: "totp.keys.read", scope: "totp:admin", name: name, run: h.readKey}, nil
		case http.MethodPost, http.MethodPut:
			return &route{op: "totp.keys.create", scope: "totp:admin", name: name, run: h.createKey, change: true}, nil
		case http.MethodDelete:
			return &route{op: "totp.keys.delete", scope: "totp:admin", name: name, run: h.deleteKey, change: true}, nil
		}
		return nil, errMethod
	case kind == "code":
		switch r.Method {
		case http.MethodGet:
			return &route{op: "totp.code.generate", scope: "totp:code:", name: name, run: h.code}, nil
		case http.MethodPost, http.MethodPut:
			return &route{op: "totp.code.validate", scope: "totp:validate:", name: name, run: h.validate, change: true}, nil
		}
		return nil, errMethod
	}
	return nil, errNoPath
}

func (h *Handler) policyRoute(r *http.Request, rest string) (*route, error) {
	name, gen, _ := strings.Cut(rest, "/")
	switch {
	case name == "":
		return nil, errNoPath
	case gen == "generate":
		if r.Method != http.MethodGet {
			return nil, errMethod
		}
		return &route{op: "password_policy.generate", scope: "passwords:generate:", name: name, run: h.generate}, nil
	case gen != "":
		return nil, errNoPath
	}
	switch r.Method {
	case http.MethodGet:
		return &route{op: "password_policy.read", scope: "passwords:admin", name: name, run: h.readPolicy}, nil
	case http.MethodPost, http.MethodPut:
		return &route{op: "password_policy.write", scope: "passwords:admin", name: name, run: h.putPolicy, change: true}, nil
	case http.MethodDelete:
		return &route{op: "password_policy.delete", scope: "passwords:admin", name: name, run: h.deletePolicy, change: true}, nil
	}
	return nil, errMethod
}

// name is the key's or policy's name the request's path gives.
func (c *call) name() string { return c.rt.name }

func (h *Handler) listKeys(c *call) error {
	names, err := h.keys.List(c.ctx, c.tenant)
	return c.list(names, err)
}

// list answers a list as Vault does: {"keys":[…]}, or 404 for none.
func (c *call) list(names []string, err error) error {
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return errNothing
	}
	c.out = map[string]any{"keys": names}
	return nil
}

func (h *Handler) readKey(c *call) error {
	info, err := h.keys.Read(c.ctx, c.tenant, c.name())
	if err != nil {
		if isNotFound(err) {
			return errNothing // Vault reads nothing: 404 {"errors":[]}
		}
		return err
	}
	c.out = map[string]any{"issuer": info.Issuer, "account_name": info.AccountName, "algorithm": info.Algorithm,
		"digits": info.Digits, "period": int(info.Period / time.Second)}
	return nil
}

func (h *Handler) createKey(c *call) error {
	var req totp.CreateRequest
	var err error
	get := c.param
	if req.Generate, err = boolParam(get("generate"), false); err != nil {
		return err
	}
	if req.Exported, err = boolParam(get("exported"), true); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		dst  *int
		def  int
	}{{"key_size", &req.KeySize, totp.DefaultKeySize}, {"digits", &req.Digits, totp.DefaultDigits}, {"qr_size", &req.QRSize, 200}} {
		if *f.dst, err = intParam(f.name, get(f.name), f.def); err != nil {
			return err
		}
	}
	if v := get("skew"); v != nil {
		skew, err := intParam("skew", v, totp.DefaultSkew)
		if err != nil {
			return err
		}
		req.Skew = &skew
	}
	secs, err := intParam("period", get("period"), int(totp.DefaultPeriod/time.Second))
	if err != nil {
		return err
	}
	if secs <= 0 {
		return badRequest("the period value must be greater than zero")
	}
	req.Period = time.Duration(secs) * time.Second
	for _, f := range []struct {
		name string
		dst  *string
	}{{"url", &req.URL}, {"key", &req.Key}, {"issuer", &req.Issuer}, {"account_name", &req.AccountName}, {"algorithm", &req.Algorithm}} {
		if *f.dst, err = stringParam(f.name, get(f.name)); err != nil {
			return err
		}
	}
	out, err := h.keys.Create(c.ctx, c.tenant, c.name(), req)
	if err != nil || out == nil {
		return err
	}
	data := map[string]any{"url": out.URL}
	if out.Barcode != nil {
		data["barcode"] = b64(out.Barcode)
	}
	c.out = data
	return nil
}

func (h *Handler) deleteKey(c *call) error { return h.keys.Delete(c.ctx, c.tenant, c.name()) }

func (h *Handler) code(c *call) error {
	code, err := h.keys.Code(c.ctx, c.tenant, c.name())
	if err != nil {
		return err
	}
	c.out = map[string]any{"code": code}
	return nil
}

func (h *Handler) validate(c *call) error {
	code, err := stringParam("code", c.param("code"))
	if err != nil {
		return err
	}
	ok, err := h.keys.Validate(c.ctx, c.tenant, c.name(), strings.TrimSpace(code))
	if err != nil {
		return err
	}
	c.out = map[string]any{"valid": ok}
	return nil
}

func (h *Handler) listPolicies(c *call) error {
	names, err := h.policies.List(c.ctx, c.tenant)
	return c.list(names, err)
}

func (h *Handler) readPolicy(c *call) error {
	doc, err := h.policies.Get(c.ctx, c.tenant, c.name())
	if err != nil {
		return err
	}
	c.out = map[string]any{"policy": doc}
	return nil
}

func (h *Handler) putPolicy(c *call) error {
	doc, err := stringParam("policy", c.param("policy"))
	if err != nil {
		return err
	}
	if doc == "" {
		return badRequest("missing policy")
	}
	return h.policies.Put(c.ctx, c.tenant, c.name(), doc)
}

func (h *Handler) deletePolicy(c *call) error { return h.policies.Delete(c.ctx, c.tenant, c.name()) }

func (h *Handler) generate(c *call) error {
	pw, err := h.policies.Generate(c.ctx, c.tenant, c.name())
	if err != nil {
		return err
	}
	c.out = map[string]any{"password": pw}
	return nil
}

func isNotFound(err error) bool { return errors.Is(err, totp.ErrNotFound) }

// param is a body parameter, or for a GET its query parameter. A write's
// come from its body only, as Vault's: a key's seed or a code in a query
// string would be logged by a front proxy with the request line, and not
// seen by a reader of the body.
func (c *call) param(name string) any {
	if v, ok := c.params[name]; ok {
		return v
	}
	if c.r.Method != http.MethodGet {
		return nil
	}
	if q := c.r.URL.Query(); q.Has(name) {
		return q.Get(name)
	}
	return nil
}

// The parameters come as JSON values or as strings (the Vault CLI's
// key=value sends strings), as Vault's own framework takes them.

func boolParam(v any, def bool) (bool, error) {
	switch v := v.(type) {
	case nil:
		return def, nil
	case bool:
		return v, nil
	case string:
		b, err := strconv.ParseBool(v)
		if err == nil {
			return b, nil
		}
	}
	return false, badRequest(fmt.Sprintf("%v is not a boolean", v))
}

func intParam(name string, v any, def int) (int, error) {
	switch v := v.(type) {
	case nil:
		return def, nil
	case json.Number:
		if n, err := strconv.Atoi(v.String()); err == nil {
			return n, nil
		}
	case string:
		if n, err := strconv.Atoi(v); err == nil {
			return n, nil
		}
		if d, err := time.ParseDuration(v); err == nil && name == "period" && d%time.Second == 0 {
			return int(d / time.Second), nil
		}
	}
	return 0, badRequest(fmt.Sprintf("%s: %v is not a whole number", name, v))
}

func stringParam(name string, v any) (string, error) {
	switch v := v.(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	}
	return "", badRequest(name + " must be a string")
}
