package kvapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/keygate/keygate/internal/httperr"
	"github.com/keygate/keygate/internal/secrets"
)

// params are a request body's top-level members, undecoded.
type params map[string]json.RawMessage

// readParams reads the request's body, a JSON object (an empty body is
// none), bounded by maxBody.
func (h *Handler) readParams(c *call) (params, error) {
	if c.r.ContentLength > h.maxBody {
		return nil, errTooLarge
	}
	b, err := io.ReadAll(http.MaxBytesReader(c.w, c.r.Body, h.maxBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, errTooLarge
	case err != nil:
		return nil, badRequest("reading the request body: " + err.Error())
	}
	return parseParams(b)
}

// parseParams decodes a body: nothing, or one JSON object in UTF-8 with
// no key twice in any object. encoding/json keeps the last of a repeated
// key, so {"options":{"cas":1},"options":{}} would be a write without cas
// here and one with cas to a proxy or an audit reader in front. data's
// own objects are the store's to check (it checks every value it keeps);
// the other members' are checked here.
func parseParams(b []byte) (params, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return params{}, nil
	}
	if !utf8.Valid(b) {
		return nil, badRequest("the request body is not UTF-8")
	}
	p, err := members(b)
	if err != nil {
		return nil, err
	}
	for name, v := range p {
		if name == "data" {
			continue
		}
		if v := bytes.TrimLeft(v, " \t\r\n"); len(v) > 0 && v[0] == '{' {
			if err := secrets.CheckObject(name, v); err != nil {
				return nil, refusalOf(err)
			}
		}
	}
	return p, nil
}

var errNotObject = badRequest("the request body is not a JSON object")

// members reads the top-level object b into its members, undecoded,
// refusing a key given twice and anything after the object.
func members(b []byte) (params, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return nil, errNotObject
	}
	p := params{}
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return nil, errNotObject
		}
		key, _ := tok.(string)
		if _, dup := p[key]; dup {
			return nil, badRequest("the request body: key " + strconv.Quote(key) + " appears twice in one object")
		}
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return nil, errNotObject
		}
		p[key] = v
	}
	if _, err := d.Token(); err != nil { // '}'
		return nil, errNotObject
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errNotObject
	}
	return p, nil
}

// has reports whether the body holds name with a value other than null.
func (p params) has(name string) bool {
	v, ok := p[name]
	return ok && !isNull(v)
}

func isNull(v json.RawMessage) bool { return string(bytes.TrimSpace(v)) == "null" }

// object returns member name if it is a JSON object (nil if absent or
// null).
func (p params) object(name string) (params, error) {
	v, ok := p[name]
	if !ok || isNull(v) {
		return nil, nil
	}
	var o params
	if err := json.Unmarshal(v, &o); err != nil || o == nil {
		return nil, badRequest(name + " is not a JSON object")
	}
	return o, nil
}

// integer reads member name as a non-negative integer: a JSON number, or
// a string of digits (Vault's clients send either).
func (p params) integer(name string) (*int, error) {
	v, ok := p[name]
	if !ok || isNull(v) {
		return nil, nil
	}
	i, err := intValue(v)
	if err != nil {
		return nil, badRequest(name + " is not a non-negative integer")
	}
	return &i, nil
}

// intValue is a JSON number or string holding a non-negative integer.
func intValue(v json.RawMessage) (int, error) {
	var n json.Number
	if err := json.Unmarshal(v, &n); err != nil {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return 0, err
		}
		n = json.Number(s)
	}
	return atoi(string(n))
}

// atoi parses a non-negative integer that fits an int32 (versions,
// counts); a JSON number with a fraction or an exponent is none.
func atoi(s string) (int, error) {
	i, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || i < 0 || i > math.MaxInt32 {
		return 0, errors.New("not a non-negative integer")
	}
	return i, nil
}

// boolean reads member name: true or false, or a string of one.
func (p params) boolean(name string) (*bool, error) {
	v, ok := p[name]
	if !ok || isNull(v) {
		return nil, nil
	}
	var b bool
	if err := json.Unmarshal(v, &b); err != nil {
		var s string
		if json.Unmarshal(v, &s) != nil {
			return nil, badRequest(name + " is not a boolean")
		}
		if b, err = strconv.ParseBool(s); err != nil {
			return nil, badRequest(name + " is not a boolean")
		}
	}
	return &b, nil
}

// maxDuration bounds delete_version_after: a century, far beyond any use,
// well within time.Duration.
const maxDuration = 100 * 365 * 24 * time.Hour

// duration reads member name as Vault's duration: whole seconds (a number
// or a string of digits) or a Go duration string such as "3h25m19s".
func (p params) duration(name string) (*time.Duration, error) {
	v, ok := p[name]
	if !ok || isNull(v) {
		return nil, nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		var n json.Number
		if json.Unmarshal(v, &n) != nil {
			return nil, badRequest(name + " is not a duration")
		}
		s = string(n)
	}
	d, err := parseDuration(s)
	if err != nil {
		return nil, badRequest(name + ": " + err.Error())
	}
	return &d, nil
}

func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	var d time.Duration
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		if i < 0 || i > int64(maxDuration/time.Second) {
			return 0, errors.New("out of range (0 to 100 years)")
		}
		d = time.Duration(i) * time.Second
	} else if d, err = time.ParseDuration(s); err != nil {
		return 0, errors.New("not a duration (seconds, or such as \"3h25m19s\")")
	}
	if d < 0 || d > maxDuration {
		return 0, errors.New("out of range (0 to 100 years)")
	}
	return d, nil
}

// versions reads the versions member: a list of version numbers (numbers
// or strings of digits), one number, or a comma-separated string, as
// Vault takes them; at least one, each positive.
func (p params) versions() ([]int, error) {
	v, ok := p["versions"]
	if !ok || isNull(v) {
		return nil, badRequest("no version number provided")
	}
	var items []json.RawMessage
	if json.Unmarshal(v, &items) != nil {
		var s string
		if json.Unmarshal(v, &s) == nil {
			for f := range strings.SplitSeq(s, ",") {
				items = append(items, json.RawMessage(strconv.Quote(f)))
			}
		} else {
			items = []json.RawMessage{v}
		}
	}
	if len(items) == 0 {
		return nil, badRequest("no version number provided")
	}
	if len(items) > maxVersionsListed {
		return nil, errTooManyVersions
	}
	out := make([]int, 0, len(items))
	for _, it := range items {
		n, err := intValue(it)
		if err != nil || n == 0 {
			return nil, badRequest("versions: each version is a positive integer")
		}
		out = append(out, n)
	}
	return out, nil
}

// maxVersionsListed bounds the versions of one delete, undelete or destroy.
const maxVersionsListed = 1000

var errTooManyVersions = &httperr.Error{Status: http.StatusRequestEntityTooLarge, Code: "too_large",
	Description: "versions: more than " + strconv.Itoa(maxVersionsListed)}

// customMetadata reads custom_metadata: an object of strings; with
// nullable (a merge patch), a null value stands for "" (remove the key).
func (p params) customMetadata(nullable bool) (map[string]string, error) {
	o, err := p.object("custom_metadata")
	if err != nil || o == nil {
		return nil, err
	}
	m := make(map[string]string, len(o))
	for k, v := range o {
		if nullable && isNull(v) {
			m[k] = ""
			continue
		}
		var s string
		if json.Unmarshal(v, &s) != nil {
			return nil, badRequest("custom_metadata: the value of " + strconv.Quote(k) + " is not a string")
		}
		m[k] = s
	}
	return m, nil
}

// queryInt reads a query parameter as a non-negative integer (absent: 0).
func queryInt(r *http.Request, name string) (int, error) {
	if r.URL.RawQuery == "" {
		return 0, nil
	}
	s := r.URL.Query().Get(name)
	if s == "" {
		return 0, nil
	}
	i, err := atoi(s)
	if err != nil {
		return 0, badRequest(name + " is not a non-negative integer")
	}
	return i, nil
}

// checkMergePatch refuses a PATCH that is not a JSON merge patch, as
// Vault does (415).
func checkMergePatch(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return badRequest("invalid Content-Type header")
	}
	if mt != mergePatch {
		// Vault's text; the type echoed is one mime.ParseMediaType accepted,
		// a token of printable ASCII
		return &httperr.Error{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type",
			Description: "PATCH requires Content-Type of " + mergePatch + ", provided " + mt}
	}
	return nil
}

const mergePatch = "application/merge-patch+json"
