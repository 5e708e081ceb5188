package server

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/keygate/keygate/jose"
)

// realm is the RFC 6750 realm of the Bearer challenge.
const realm = `Bearer realm="keygate"`

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", s.handle(s.healthz))
	mux.Handle("GET /.well-known/jwks.json", s.handle(s.jwksDoc))
	mux.Handle("GET /auth", s.handle(s.auth))
	return mux
}

// apiError is a refusal with its status, the JSON error body, and for 401s
// the WWW-Authenticate challenge.
type apiError struct {
	Status      int
	Code        string
	Description string
	Challenge   string
}

func (e *apiError) Error() string { return e.Code + ": " + e.Description }

var errNoToken = &apiError{
	Status:      http.StatusUnauthorized,
	Code:        "unauthorized",
	Description: "a bearer token is required",
	Challenge:   realm,
}

// invalidToken is the RFC 6750 §3.1 invalid_token refusal; reason is a
// jose.Reason name and never echoes the token.
func invalidToken(reason string) *apiError {
	return &apiError{
		Status:      http.StatusUnauthorized,
		Code:        "invalid_token",
		Description: reason,
		Challenge:   realm + `, error="invalid_token", error_description="` + reason + `"`,
	}
}

// handle adapts a handler that returns an error, writing an *apiError as
// its JSON body and anything else as a 500 that reveals nothing.
func (s *Server) handle(fn func(http.ResponseWriter, *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := fn(w, r)
		if err == nil {
			return
		}
		var ae *apiError
		if !errors.As(err, &ae) {
			s.log.Error("request failed", "path", r.URL.Path, "err", err)
			ae = &apiError{Status: http.StatusInternalServerError, Code: "server_error", Description: "internal error"}
		}
		if ae.Challenge != "" {
			w.Header().Set("WWW-Authenticate", ae.Challenge)
		}
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, ae.Status, map[string]string{"error": ae.Code, "error_description": ae.Description})
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"error":"server_error"}`)
	}
	writeBody(w, status, append(body, '\n'))
}

func writeBody(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body) //nolint:errcheck // the client has gone; nothing to do
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) error {
	w.Header().Set("Cache-Control", "no-store")
	writeBody(w, http.StatusOK, []byte(`{"status":"ok"}`+"\n"))
	return nil
}

func (s *Server) jwksDoc(w http.ResponseWriter, _ *http.Request) error {
	w.Header().Set("Cache-Control", "public, max-age=300")
	writeBody(w, http.StatusOK, s.jwks)
	return nil
}

// auth is the forward-auth decision: 200 with the subject and scopes in
// headers for a valid bearer token, 401 with an RFC 6750 challenge
// otherwise.
func (s *Server) auth(w http.ResponseWriter, r *http.Request) error {
	token, err := bearerToken(r.Header)
	if err != nil {
		return err
	}
	t, err := s.verifier.Verify(token)
	if err != nil {
		reason := jose.ReasonOf(err).String()
		s.log.Info("auth rejected", "reason", reason, "token", fingerprint(token))
		return invalidToken(reason)
	}
	if s.log.Enabled(r.Context(), slog.LevelDebug) {
		s.log.Debug("auth accepted", "sub", t.Claims.Subject, "token", fingerprint(token))
	}
	h := w.Header()
	h.Set("X-Auth-Subject", headerSafe(t.Claims.Subject))
	h.Set("X-Auth-Scopes", headerSafe(t.Claims.Scope))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	return nil
}

// bearerToken extracts an RFC 6750 §2.1 bearer token. No Authorization
// header, or one with another scheme, is errNoToken; several headers or an
// empty token are malformed.
func bearerToken(h http.Header) (string, error) {
	values := h.Values("Authorization")
	switch len(values) {
	case 0:
		return "", errNoToken
	case 1:
	default:
		return "", invalidToken(jose.ReasonMalformed.String())
	}
	scheme, token, _ := strings.Cut(strings.TrimSpace(values[0]), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", errNoToken
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return "", invalidToken(jose.ReasonMalformed.String())
	}
	return token, nil
}

// headerSafe drops control characters, so a claim cannot split or corrupt
// the headers a proxy copies upstream.
func headerSafe(v string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, v)
}

// fingerprint names a token in logs without revealing it: the first 8 hex
// digits of its SHA-256.
func fingerprint(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:4])
}
