package issuer

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestBearer(t *testing.T) {
	const token = "scrape-token-0123456789-0123456789"
	req := func(auth string) *http.Request {
		r := httptest.NewRequest("GET", "/metrics", nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		return r
	}
	b := NewBearer(token)
	for auth, want := range map[string]bool{
		"Bearer " + token: true, "bearer " + token: true, "BEARER " + token: true,
		"": false, "Bearer": false, "Bearer " + token + "x": false, "Basic " + token: false, token: false,
	} {
		if got := b.Allows(req(auth)); got != want {
			t.Errorf("Allows(%q) = %v, want %v", auth, got, want)
		}
	}
	var unset Bearer
	if unset.Set() || NewBearer("").Set() || !b.Set() {
		t.Error("Set is wrong")
	}
	if unset.Allows(req("Bearer ")) || NewBearer("").Allows(req("Bearer ")) {
		t.Error("an unset Bearer allowed an empty token")
	}
	h := b.Require("keygate-metrics", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	for auth, want := range map[string]int{"Bearer " + token: http.StatusNoContent, "Bearer nope": http.StatusUnauthorized, "": http.StatusUnauthorized} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req(auth))
		if w.Code != want {
			t.Errorf("Require with %q: %d, want %d", auth, w.Code, want)
		}
		if want == http.StatusUnauthorized && (w.Header().Get("WWW-Authenticate") != `Bearer realm="keygate-metrics"` || w.Header().Get("Cache-Control") != "no-store") {
			t.Errorf("401 headers: %v", w.Header())
		}
	}
}
