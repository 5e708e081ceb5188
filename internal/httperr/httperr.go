// Package httperr is keygate's one mapping from a handler's error to an HTTP
// answer. Handlers return errors; an [*Error] found in one (errors.As) is a
// refusal the client is told about: its status, a machine-readable code, a
// description for people and the headers it calls for (Retry-After,
// WWW-Authenticate). Anything else is a failure of keygate's own: it is
// logged and answered 500 server_error with a description that reveals
// nothing, so that no store detail, file name or key material reaches a
// client by way of an error.
//
// The body's shape is the API's [Envelope]: RFC 6749 §5.2's
// {"error": code, "error_description": description} for the token service
// and keygate's own APIs, Vault's {"errors": [description]} for transit.
// Caching headers are the API's too, and are set by its handlers on every
// answer, not here.
package httperr

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"
)

// Error is a refusal with what the client is told: Status, Code and
// Description, and optionally when to retry and how to authenticate. An
// Error is never built from an internal error's text.
type Error struct {
	Status      int
	Code        string // machine-readable: "invalid_request", "temporarily_unavailable", ...
	Description string
	// RetryAfter, when positive, is sent as Retry-After in whole seconds,
	// rounded up from a thousandth.
	RetryAfter time.Duration
	// Challenge, if set, is sent as WWW-Authenticate.
	Challenge string
}

func (e *Error) Error() string { return e.Code + ": " + e.Description }

// Internal is what an error that is not an *Error is answered as.
var Internal = &Error{Status: http.StatusInternalServerError, Code: "server_error", Description: "internal error"}

// An Envelope is the JSON shape of an API's error answers.
type Envelope uint8

// Envelopes. A further API with an answer shape of its own adds one here.
const (
	// OAuth is RFC 6749 §5.2's {"error": code, "error_description":
	// description}: the token endpoints', and keygate's own APIs'.
	OAuth Envelope = iota
	// Vault is Vault's {"errors": [description]}: the transit API's. The
	// Code is not sent (Vault has none); an empty Description is sent as
	// an empty list, as Vault answers a read of nothing ({"errors":[]}).
	Vault
)

// body is e in env, with a trailing newline as json.Encoder writes it.
func (env Envelope) body(e *Error) []byte {
	var v any = oauthBody{e.Code, e.Description}
	if env == Vault {
		vb := vaultBody{Errors: []string{}}
		if e.Description != "" {
			vb.Errors = append(vb.Errors, e.Description)
		}
		v = vb
	}
	b, err := json.Marshal(v)
	if err != nil && env == Vault { // strings always marshal
		return []byte(`{"errors":["internal error"]}` + "\n")
	} else if err != nil {
		return []byte(`{"error":"server_error"}` + "\n")
	}
	return append(b, '\n')
}

type vaultBody struct {
	Errors []string `json:"errors"`
}

type oauthBody struct {
	Error       string `json:"error"`
	Description string `json:"error_description"`
}

// Writer answers the errors of one API: in its Envelope, logging on Log
// (nil: discarded) each error that is not an *Error.
type Writer struct {
	Envelope Envelope
	Log      *slog.Logger
}

// A CodeNoter is a ResponseWriter that wants to know the code of the
// error answered on it: the audit log's writer, which records it as the
// request's reason. Write finds one through writers that wrap another
// (an Unwrap() http.ResponseWriter method, as http.ResponseController
// reads them).
type CodeNoter interface {
	NoteErrorCode(code string)
}

// noteCode tells the CodeNoter among w and the writers it wraps, if any,
// the code answered.
func noteCode(w http.ResponseWriter, code string) {
	for range 8 { // wrappers are few; a cycle must not hang the answer
		if n, ok := w.(CodeNoter); ok {
			n.NoteErrorCode(code)
			return
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return
		}
		w = u.Unwrap()
	}
}

// Write answers r with err and returns the *Error it answered: err's own,
// or Internal for an error that is not one, which it logs with r's path.
// It sets Content-Type and the Error's headers, then writes the status and
// the body, and tells a CodeNoter among the writers the code.
func (wr Writer) Write(w http.ResponseWriter, r *http.Request, err error) *Error {
	var e *Error
	if !errors.As(err, &e) {
		if wr.Log != nil {
			wr.Log.Error("request failed", "path", r.URL.Path, "err", err)
		}
		e = Internal
	}
	noteCode(w, e.Code)
	h := w.Header()
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int(e.RetryAfter.Seconds()+0.999)))
	}
	if e.Challenge != "" {
		h.Set("WWW-Authenticate", e.Challenge)
	}
	h.Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	w.Write(wr.Envelope.body(e)) //nolint:errcheck // the client has gone; nothing to do
	return e
}
