package httperr

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestWrite(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		status int
		body   string
		header http.Header
	}{
		{"refusal", &Error{Status: 400, Code: "invalid_request", Description: `issuer "a<b" is not trusted`}, 400,
			`{"error":"invalid_request","error_description":"issuer \"a\u003cb\" is not trusted"}` + "\n", http.Header{}},
		{"wrapped", fmt.Errorf("context: %w", &Error{Status: 409, Code: "conflict", Description: "client already exists"}), 409,
			`{"error":"conflict","error_description":"client already exists"}` + "\n", http.Header{}},
		{"retry after", &Error{Status: 429, Code: "slow_down", Description: "d", RetryAfter: 1500 * time.Millisecond}, 429,
			`{"error":"slow_down","error_description":"d"}` + "\n", http.Header{"Retry-After": {"2"}}},
		{"retry after under a second", &Error{Status: 429, Code: "slow_down", Description: "d", RetryAfter: time.Millisecond}, 429,
			`{"error":"slow_down","error_description":"d"}` + "\n", http.Header{"Retry-After": {"1"}}},
		{"challenge", &Error{Status: 401, Code: "invalid_client", Description: "d", Challenge: `Basic realm="keygate"`}, 401,
			`{"error":"invalid_client","error_description":"d"}` + "\n", http.Header{"Www-Authenticate": {`Basic realm="keygate"`}}},
		{"internal", errors.New("/var/lib/keygate/keygate.db: disk I/O error"), 500,
			`{"error":"server_error","error_description":"internal error"}` + "\n", http.Header{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			wr := Writer{Log: slog.New(slog.NewTextHandler(&logs, nil))}
			rec := httptest.NewRecorder()
			e := wr.Write(rec, httptest.NewRequest("POST", "/v1/x", nil), tt.err)
			if rec.Code != tt.status || e.Status != tt.status || rec.Body.String() != tt.body {
				t.Errorf("got %d (%d) %q, want %d %q", rec.Code, e.Status, rec.Body, tt.status, tt.body)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			for k, v := range tt.header {
				if got := rec.Header()[k]; len(got) != 1 || got[0] != v[0] {
					t.Errorf("%s: %q, want %q", k, got, v)
				}
			}
			if n := len(rec.Header()); n != 1+len(tt.header) {
				t.Errorf("headers %v, want Content-Type and %v", rec.Header(), tt.header)
			}
			logged := strings.Contains(logs.String(), "disk I/O error")
			if logged != (tt.status == 500) {
				t.Errorf("logged %v for status %d: %q", logged, tt.status, logs.String())
			}
		})
	}
}

type codeNoter struct {
	http.ResponseWriter
	code string
}

func (c *codeNoter) NoteErrorCode(code string) { c.code = code }

type wrapper struct{ http.ResponseWriter }

func (w wrapper) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Write tells the code answered to a CodeNoter, through a writer that
// wraps it; an error that is not an *Error is noted as server_error.
func TestWriteNotesCode(t *testing.T) {
	n := &codeNoter{ResponseWriter: httptest.NewRecorder()}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	Writer{}.Write(wrapper{n}, r, &Error{Status: 429, Code: "slow_down", Description: "d"})
	if n.code != "slow_down" {
		t.Errorf("noted %q, want slow_down", n.code)
	}
	Writer{}.Write(n, r, errors.New("disk"))
	if n.code != "server_error" {
		t.Errorf("noted %q, want server_error", n.code)
	}
	Writer{}.Write(httptest.NewRecorder(), r, errors.New("no noter")) // nothing to tell, no panic
}

// TestWriteVault: the Vault envelope carries the description alone, an
// empty list for an empty one, and the same headers and internal-error
// handling as the OAuth envelope.
func TestWriteVault(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		status int
		body   string
		retry  string
	}{
		{"refusal", &Error{Status: 400, Code: "malformed", Description: `invalid ciphertext: no "vault:v" prefix`}, 400,
			`{"errors":["invalid ciphertext: no \"vault:v\" prefix"]}` + "\n", ""},
		{"not found", &Error{Status: 404, Code: "not_found"}, 404, `{"errors":[]}` + "\n", ""},
		{"busy", &Error{Status: 503, Code: "busy", Description: "busy", RetryAfter: time.Second}, 503, `{"errors":["busy"]}` + "\n", "1"},
		{"internal", errors.New("disk I/O error"), 500, `{"errors":["internal error"]}` + "\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wr := Writer{Envelope: Vault}
			rec := httptest.NewRecorder()
			wr.Write(rec, httptest.NewRequest("POST", "/v1/transit/encrypt/k", nil), tt.err)
			if rec.Code != tt.status || rec.Body.String() != tt.body {
				t.Errorf("got %d %q, want %d %q", rec.Code, rec.Body, tt.status, tt.body)
			}
			if got := rec.Header().Get("Retry-After"); got != tt.retry {
				t.Errorf("Retry-After %q, want %q", got, tt.retry)
			}
		})
	}
}
