package keygatechi_test

import (
	"net/http"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/keygate/keygate/middleware"
	"github.com/keygate/keygate/middleware/middlewaretest"
)

// TestKit runs middleware's shared table test behind a chi router, with
// mw.Require as chi middleware.
func TestKit(t *testing.T) {
	middlewaretest.Run(t, func(mw *middleware.Middleware, scopes []string, app middlewaretest.App) http.Handler {
		r := chi.NewRouter()
		r.With(mw.Require(scopes...)).Get("/orders/{id}", func(w http.ResponseWriter, r *http.Request) {
			id, _ := middleware.FromContext(r.Context())
			w.Write([]byte(app(id, id)))
		})
		return r
	})
}
