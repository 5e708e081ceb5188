package keygateecho_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/keygate/keygate/middleware"
	keygateecho "github.com/keygate/keygate/middleware/echo"
	"github.com/keygate/keygate/middleware/middlewaretest"
)

// TestKit runs middleware's shared table test against the echo adapter.
func TestKit(t *testing.T) {
	middlewaretest.Run(t, func(mw *middleware.Middleware, scopes []string, app middlewaretest.App) http.Handler {
		e := echo.New()
		e.GET("/orders/:id", func(c echo.Context) error {
			id, _ := keygateecho.FromContext(c)
			ctxID, _ := middleware.FromContext(c.Request().Context())
			return c.String(http.StatusOK, app(id, ctxID))
		}, keygateecho.New(mw, scopes...))
		return e
	})
}

func TestFromContextWithoutNew(t *testing.T) {
	c := echo.New().NewContext(httptest.NewRequest("GET", "/", nil), httptest.NewRecorder())
	if id, ok := keygateecho.FromContext(c); ok || id != nil {
		t.Fatalf("FromContext = %v, %v on a context New did not see", id, ok)
	}
}
