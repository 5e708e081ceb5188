package loadgen

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Request is the template every request of a run is made from: the same
// method, URL, headers and body each time. It is serialised once (Build);
// the connections then write those bytes as they are.
type Request struct {
	Method string   // GET when empty
	URL    string   // http://host[:port]/path[?query]
	Header []Header // sent in order, after Host
	Body   []byte   // sent with Content-Length (also 0 for POST, PUT and PATCH)
}

// Header is one request header line.
type Header struct{ Name, Value string }

// MarkerHeader, with the value Marker returns, marks every request the
// generator sends (a Request that gives MarkerHeader itself keeps its
// own). 'keygate bench server', which checks no token, answers only
// requests that carry its marker and refuses the others: started where an
// authorizer was meant to be, it allows nothing outside a benchmark. The
// value is a secret of the run, not a constant, because a proxy in front
// of forward-auth passes a client's own headers on to it.
const (
	MarkerHeader = "Keygate-Bench"
	// MarkerEnv names the environment variable that gives the marker, so
	// that a bench server and the load generators of one run agree.
	MarkerEnv = "KEYGATE_BENCH_MARKER"
)

// Marker returns this process's benchmark marker: $KEYGATE_BENCH_MARKER,
// or when that is unset a random value drawn once (which a bench server
// prints, and a process starting one passes on in its environment).
var Marker = sync.OnceValue(func() string {
	if v := strings.TrimSpace(os.Getenv(MarkerEnv)); v != "" {
		return v
	}
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
})

// marked reports whether hs gives MarkerHeader.
func marked(hs []Header) bool {
	for _, h := range hs {
		if strings.EqualFold(h.Name, MarkerHeader) {
			return true
		}
	}
	return false
}

// ParseHeader reads a header given as "Name: value" (curl's and wrk's -H).
func ParseHeader(s string) (Header, error) {
	name, value, ok := strings.Cut(s, ":")
	h := Header{Name: strings.TrimSpace(name), Value: strings.TrimSpace(value)}
	if !ok || h.Name != name || !validName(h.Name) {
		return Header{}, fmt.Errorf("header %q is not \"Name: value\"", s)
	}
	if strings.ContainsAny(h.Value, "\r\n\x00") {
		return Header{}, fmt.Errorf("header %q: the value holds a line break or NUL", h.Name)
	}
	return h, nil
}

const tokenPunct = "!#$%&'*+-.^_`|~"

// validName reports whether s is an HTTP token (RFC 9110, section 5.6.2).
func validName[T string | []byte](s T) bool {
	if len(s) == 0 {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(tokenPunct, c) >= 0 {
			continue
		}
		return false
	}
	return true
}

// Validate reports whether r can be sent (Run would refuse it otherwise);
// its errors wrap ErrRequest.
func (r *Request) Validate() error {
	_, err := r.build()
	return err
}

// template is a Request ready to send.
type template struct {
	addr  string // host:port to dial
	bytes []byte // the whole request
	head  bool   // a HEAD request: answers carry no body
}

// addrOr returns t's address, or def when t is nil (the first of a pool).
func (t *template) addrOr(def string) string {
	if t == nil {
		return def
	}
	return t.addr
}

// ErrRequest is wrapped by every error Build returns.
var ErrRequest = errors.New("invalid request")

func requestErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrRequest}, args...)...)
}

// build checks r and serialises it. The Host header is the URL's unless
// one is given; MarkerHeader follows r's headers unless one of them is it;
// Content-Length and Transfer-Encoding are the generator's own and
// refused in Header.
func (r *Request) build() (*template, error) {
	method := r.Method
	if method == "" {
		method = "GET"
	}
	if !validName(method) {
		return nil, requestErrorf("method %q is not a token", method)
	}
	u, err := url.Parse(r.URL)
	if err != nil {
		return nil, requestErrorf("URL: %v", err)
	}
	switch {
	case u.Scheme == "https":
		return nil, requestErrorf("URL %q: https is not supported (the generator speaks plain HTTP/1.1)", r.URL)
	case u.Scheme != "http" || u.Host == "":
		return nil, requestErrorf("URL %q is not http://host[:port]/path", r.URL)
	case u.User != nil:
		return nil, requestErrorf("URL %q: user information is not supported (send an Authorization header)", r.URL)
	}
	port := u.Port()
	if port == "" {
		port = "80"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return nil, requestErrorf("URL %q: bad port", r.URL)
	}
	t := &template{addr: net.JoinHostPort(u.Hostname(), port), head: method == "HEAD"}
	b := make([]byte, 0, 256+len(r.Body))
	b = append(b, method...)
	b = append(b, ' ')
	b = append(b, u.RequestURI()...)
	b = append(b, " HTTP/1.1\r\n"...)
	hasHost := false
	for _, h := range r.Header {
		if _, err := ParseHeader(h.Name + ": " + h.Value); err != nil {
			return nil, requestErrorf("%v", err)
		}
		switch strings.ToLower(h.Name) {
		case "host":
			hasHost = true
		case "content-length", "transfer-encoding":
			return nil, requestErrorf("header %s is set by the generator from the body", h.Name)
		}
	}
	if !hasHost {
		b = append(b, "Host: "...)
		b = append(b, u.Host...)
		b = append(b, "\r\n"...)
	}
	for _, h := range r.Header {
		b = append(b, h.Name...)
		b = append(b, ": "...)
		b = append(b, h.Value...)
		b = append(b, "\r\n"...)
	}
	if !marked(r.Header) {
		b = append(b, MarkerHeader+": "+Marker()+"\r\n"...)
	}
	if len(r.Body) > 0 || method == "POST" || method == "PUT" || method == "PATCH" {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(len(r.Body)), 10)
		b = append(b, "\r\n"...)
	}
	b = append(b, "\r\n"...)
	t.bytes = append(b, r.Body...)
	return t, nil
}
