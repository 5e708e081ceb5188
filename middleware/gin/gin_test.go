package keygategin_test

import (
	"net/http"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/keygate/keygate/middleware"
	keygategin "github.com/keygate/keygate/middleware/gin"
	"github.com/keygate/keygate/middleware/middlewaretest"
)

func init() { gin.SetMode(gin.TestMode) }

// TestKit runs middleware's shared table test against the gin adapter.
func TestKit(t *testing.T) {
	middlewaretest.Run(t, func(mw *middleware.Middleware, scopes []string, app middlewaretest.App) http.Handler {
		r := gin.New()
		r.GET("/orders/:id", keygategin.New(mw, scopes...), func(c *gin.Context) {
			id, _ := keygategin.FromContext(c)
			ctxID, _ := middleware.FromContext(c.Request.Context())
			c.String(http.StatusOK, "%s", app(id, ctxID))
		})
		return r
	})
}

func TestFromContextWithoutNew(t *testing.T) {
	c, _ := gin.CreateTestContext(nil)
	if id, ok := keygategin.FromContext(c); ok || id != nil {
		t.Fatalf("FromContext = %v, %v on a context New did not see", id, ok)
	}
}
