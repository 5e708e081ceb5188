package grpcload

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/keygate/keygate/internal/bench/loadgen"
)

// Request is the HTTP request a CheckRequest describes.
type Request struct {
	Method string           // GET when empty
	Host   string           // :authority; api.example.com when empty
	Path   string           // :path, with its query; / when empty
	Header []loadgen.Header // more request headers (Envoy lower-cases their names)
}

// Envoy's view of the connection the request came on (a client at
// 203.0.113.7 talking to Envoy's listener at 10.0.0.2:8080), and the
// headers Envoy or a typical client adds.
const (
	sourceIP   = "203.0.113.7"
	sourcePort = 53412
	destIP     = "10.0.0.2"
	destPort   = 8080
	requestID  = "6b3f9b0e-7e3c-4f5e-9d7e-0c1c2e1d9f00"
)

// CheckRequest returns the CheckRequest Envoy's ext_authz filter builds
// for req over plaintext HTTP/1.1 (filters/common/ext_authz/
// check_request_utils.cc): header names in lower case, the
// pseudo-headers among them, :path (query included) as path and
// :authority as host; authorization, when token is not empty, is
// "Bearer " + token.
func CheckRequest(req *Request, token string) *authv3.CheckRequest {
	method, host, path := req.Method, req.Host, req.Path
	if method == "" {
		method = http.MethodGet
	}
	if host == "" {
		host = "api.example.com"
	}
	if path == "" {
		path = "/"
	}
	hs := map[string]string{":method": method, ":path": path, ":authority": host, ":scheme": "http",
		"x-forwarded-proto": "http", "x-request-id": requestID, "user-agent": "curl/8.5.0", "accept": "*/*"}
	given := map[string]bool{}
	for _, h := range req.Header {
		k := strings.ToLower(h.Name)
		if given[k] {
			hs[k] += "," + h.Value // Envoy joins repeated headers with ","
		} else {
			hs[k] = h.Value // replaces a default
		}
		given[k] = true
	}
	if token != "" {
		hs["authorization"] = "Bearer " + token
	}
	return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Source:      &authv3.AttributeContext_Peer{Address: sockAddr(sourceIP, sourcePort)},
		Destination: &authv3.AttributeContext_Peer{Address: sockAddr(destIP, destPort)},
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Id: "12345678901234567890", Method: method, Headers: hs, Path: path, Host: host, Scheme: "http",
			Protocol: "HTTP/1.1",
		}},
	}}
}

func sockAddr(ip string, port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: ip, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port}}}}
}

// messages are a run's requests, marshalled: for each token length, the
// bytes of a request whose token is a placeholder of that length, and
// where the placeholder is.
type messages struct {
	tokens []string
	n      int // len(tokens), or 1 without tokens
	fixed  []byte
	byLen  map[int]*shape
}

type shape struct {
	b   []byte
	off int // the token's first byte
}

func newMessages(req *Request, tokens []string) (*messages, error) {
	m := &messages{tokens: tokens, n: max(len(tokens), 1), byLen: map[int]*shape{}}
	if len(tokens) == 0 {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(CheckRequest(req, ""))
		if err != nil {
			return nil, fmt.Errorf("marshal: %w", err)
		}
		m.fixed = b
		return m, nil
	}
	for _, t := range tokens {
		if _, ok := m.byLen[len(t)]; ok {
			continue
		}
		ph := strings.Repeat("\x00", len(t))
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(CheckRequest(req, ph))
		if err != nil {
			return nil, fmt.Errorf("marshal: %w", err)
		}
		off := bytes.Index(b, []byte("Bearer "+ph))
		if off < 0 || bytes.Contains(b[off+7+len(t):], []byte(ph)) {
			return nil, errors.New("the token's place in the message is not unique")
		}
		m.byLen[len(t)] = &shape{b: b, off: off + len("Bearer ")}
	}
	return m, nil
}

// build returns request i's bytes, in buf if it is large enough.
func (m *messages) build(buf []byte, i int) []byte {
	if m.fixed != nil {
		return m.fixed // never written to: sent as it is
	}
	t := m.tokens[i]
	s := m.byLen[len(t)]
	buf = append(buf[:0], s.b...)
	copy(buf[s.off:], t)
	return buf
}

// rawRequest is a request already marshalled.
type rawRequest []byte

// verdict is what a CheckResponse says Envoy does with the request: the
// HTTP status it answers with (200: the request goes to the upstream).
type verdict struct{ status int }

// errNotCheckResponse is an answer that is not a CheckResponse.
var errNotCheckResponse = errors.New("the answer is not a CheckResponse")

// codec sends rawRequests as they are and reads verdicts; it is forced on
// every call, and named "proto" so that the server uses its own.
type codec struct{}

func (codec) Name() string { return "proto" }

func (codec) Marshal(v any) (mem.BufferSlice, error) {
	r, ok := v.(rawRequest)
	if !ok {
		return nil, fmt.Errorf("cannot send %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(r)}, nil
}

func (codec) Unmarshal(data mem.BufferSlice, v any) error {
	vd, ok := v.(*verdict)
	if !ok {
		return fmt.Errorf("cannot read into %T", v)
	}
	var b []byte
	if len(data) == 1 {
		b = data[0].ReadOnlyData()
	} else {
		b = data.Materialize()
	}
	st, err := parseVerdict(b)
	if err != nil {
		return err
	}
	vd.status = st
	return nil
}

// Field numbers of the messages parseVerdict reads.
const (
	fieldStatus   = 1 // CheckResponse.status (google.rpc.Status), Status.code; HttpStatus.code
	fieldDenied   = 2 // CheckResponse.denied_response
	fieldOK       = 3 // CheckResponse.ok_response
	fieldErrorRsp = 5 // CheckResponse.error_response (a DeniedHttpResponse)
)

// parseVerdict reads a CheckResponse's verdict: 200 for an OkHttpResponse,
// the DeniedHttpResponse's status (403 when it has none) for a denied one,
// and, without an HTTP response, 200 when the gRPC status is OK and 403
// otherwise (what Envoy answers).
func parseVerdict(b []byte) (int, error) {
	code, httpStatus, kind := int64(0), 0, 0
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, errNotCheckResponse
		}
		b = b[n:]
		if typ != protowire.BytesType || num != fieldStatus && num != fieldDenied && num != fieldOK && num != fieldErrorRsp {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return 0, errNotCheckResponse
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return 0, errNotCheckResponse
		}
		b = b[n:]
		switch num {
		case fieldStatus:
			c, err := varintField(v, fieldStatus)
			if err != nil {
				return 0, err
			}
			code = c
		case fieldOK:
			kind = fieldOK
		case fieldDenied, fieldErrorRsp:
			kind = fieldDenied
			httpStatus = http.StatusForbidden
			// DeniedHttpResponse.status is an HttpStatus, whose code is field 1.
			if hs, err := bytesField(v, fieldStatus); err != nil {
				return 0, err
			} else if hs != nil {
				c, err := varintField(hs, fieldStatus)
				if err != nil {
					return 0, err
				}
				if c > 0 {
					httpStatus = int(c)
				}
			}
		}
	}
	switch {
	case kind == fieldOK:
		return http.StatusOK, nil
	case kind == fieldDenied:
		return httpStatus, nil
	case code == 0:
		return http.StatusOK, nil
	}
	return http.StatusForbidden, nil
}

// varintField returns the last value of varint field num in message b (0
// when absent).
func varintField(b []byte, num protowire.Number) (int64, error) {
	var out int64
	for len(b) > 0 {
		f, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, errNotCheckResponse
		}
		b = b[n:]
		if f == num && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return 0, errNotCheckResponse
			}
			out, b = int64(v), b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(f, typ, b)
		if n < 0 {
			return 0, errNotCheckResponse
		}
		b = b[n:]
	}
	return out, nil
}

// bytesField returns the last value of length-delimited field num in
// message b (nil when absent).
func bytesField(b []byte, num protowire.Number) ([]byte, error) {
	var out []byte
	for len(b) > 0 {
		f, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, errNotCheckResponse
		}
		b = b[n:]
		if f == num && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, errNotCheckResponse
			}
			out, b = v, b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(f, typ, b)
		if n < 0 {
			return nil, errNotCheckResponse
		}
		b = b[n:]
	}
	return out, nil
}
