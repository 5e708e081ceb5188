package middleware_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/keygate/keygate/middleware"
)

// TestOutcomeWrite covers what the shared table cannot reach: a request to
// let through writes nothing, and a 503 (no verdict on the token) is the
// same JSON error without a challenge.
func TestOutcomeWrite(t *testing.T) {
	ok := middleware.Outcome{Status: http.StatusOK, Identity: &middleware.Identity{Subject: "alice"}}
	w := httptest.NewRecorder()
	ok.Write(w)
	if w.Body.Len() != 0 || len(w.Header()) != 0 || ok.Header() != nil || ok.Body() != nil {
		t.Errorf("an allowed Outcome wrote %q %v", w.Body, w.Header())
	}
	down := middleware.Outcome{Status: http.StatusServiceUnavailable, Error: "temporarily_unavailable",
		Description: "verification unavailable", Reason: "internal"}
	w = httptest.NewRecorder()
	down.Write(w)
	if w.Code != 503 || w.Body.String() != `{"error":"temporarily_unavailable","error_description":"verification unavailable"}` ||
		w.Header().Get("Content-Type") != "application/json" || w.Header().Get("Cache-Control") != "no-store" ||
		w.Header()["Www-Authenticate"] != nil {
		t.Errorf("503: %d %v %q", w.Code, w.Header(), w.Body)
	}
}
