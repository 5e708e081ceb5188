package loadgen

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"testing"
)

func TestParseHeader(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Header
		ok   bool
	}{
		{"Authorization: Bearer abc", Header{"Authorization", "Bearer abc"}, true},
		{"X-Empty:", Header{"X-Empty", ""}, true},
		{"X-Colons: a:b:c ", Header{"X-Colons", "a:b:c"}, true},
		{"NoColon", Header{}, false},
		{": value", Header{}, false},
		{"Bad Name: x", Header{}, false},
		{" Leading: x", Header{}, false},
		{"X: a\r\nInjected: 1", Header{}, false},
	} {
		got, err := ParseHeader(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseHeader(%q) = %+v, %v", tt.in, got, err)
		}
	}
}

func TestBuild(t *testing.T) {
	marker := "Keygate-Bench: " + Marker()
	tests := []struct {
		name string
		req  Request
		addr string
		want string
	}{
		{"GET default", Request{URL: "http://127.0.0.1:8081/auth?x=1"}, "127.0.0.1:8081",
			"GET /auth?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8081\r\n" + marker + "\r\n\r\n"},
		{"no path, default port", Request{URL: "http://example.com"}, "example.com:80",
			"GET / HTTP/1.1\r\nHost: example.com\r\n" + marker + "\r\n\r\n"},
		{"IPv6", Request{URL: "http://[::1]:9/"}, "[::1]:9", "GET / HTTP/1.1\r\nHost: [::1]:9\r\n" + marker + "\r\n\r\n"},
		{"POST with headers and body", Request{Method: "POST", URL: "http://h:1/oauth2/token",
			Header: []Header{{"Content-Type", "application/x-www-form-urlencoded"}, {"Host", "api.example"}},
			Body:   []byte("grant_type=client_credentials")}, "h:1",
			"POST /oauth2/token HTTP/1.1\r\nContent-Type: application/x-www-form-urlencoded\r\nHost: api.example\r\n" +
				marker + "\r\nContent-Length: 29\r\n\r\ngrant_type=client_credentials"},
		{"empty POST", Request{Method: "POST", URL: "http://h:1/"}, "h:1",
			"POST / HTTP/1.1\r\nHost: h:1\r\n" + marker + "\r\nContent-Length: 0\r\n\r\n"},
		{"marker given: not twice", Request{URL: "http://h:1/", Header: []Header{{"keygate-bench", "scenario-7"}}}, "h:1",
			"GET / HTTP/1.1\r\nHost: h:1\r\nkeygate-bench: scenario-7\r\n\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tpl, err := tt.req.build()
			if err != nil {
				t.Fatal(err)
			}
			if tpl.addr != tt.addr || string(tpl.bytes) != tt.want {
				t.Errorf("addr %q, bytes\n%q\nwant %q\n%q", tpl.addr, tpl.bytes, tt.addr, tt.want)
			}
			// net/http reads the same request back.
			r, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(tpl.bytes)))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(r.Body)
			if r.Method != cmp(tt.req.Method, "GET") || !bytes.Equal(body, tt.req.Body) {
				t.Errorf("net/http reads %s with body %q", r.Method, body)
			}
		})
	}
	for _, req := range []Request{
		{URL: "https://example.com/"},
		{URL: "ftp://example.com/"},
		{URL: "/relative"},
		{URL: "http://user:pw@example.com/"},
		{URL: "http://example.com:99999/"},
		{URL: "http://example.com/", Method: "GE T"},
		{URL: "http://example.com/", Header: []Header{{"Content-Length", "3"}}},
		{URL: "http://example.com/", Header: []Header{{"X", "a\nb"}}},
	} {
		if _, err := req.build(); !errors.Is(err, ErrRequest) {
			t.Errorf("%+v: %v, want ErrRequest", req, err)
		}
	}
}

func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
