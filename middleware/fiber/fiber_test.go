package keygatefiber_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/gofiber/fiber/v2"

	"github.com/keygate/keygate/middleware"
	keygatefiber "github.com/keygate/keygate/middleware/fiber"
	"github.com/keygate/keygate/middleware/middlewaretest"
)

// TestKit runs middleware's shared table test against the fiber adapter,
// reached through App.Test (see served).
func TestKit(t *testing.T) {
	middlewaretest.Run(t, func(mw *middleware.Middleware, scopes []string, app middlewaretest.App) http.Handler {
		// fasthttp's default 4 KiB read buffer would refuse the
		// oversized token's request itself (431).
		f := fiber.New(fiber.Config{DisableStartupMessage: true, ReadBufferSize: 16 << 10})
		f.Get("/orders/:id", keygatefiber.New(mw, scopes...), func(c *fiber.Ctx) error {
			id, _ := keygatefiber.FromContext(c)
			ctxID, _ := middleware.FromContext(c.UserContext())
			return c.SendString(app(id, ctxID))
		})
		return served(t, f)
	})
}

// served is an http.Handler that sends each request to f with App.Test,
// which writes it out and lets fasthttp parse it as from a connection. (The
// adaptor package's FiberApp keeps only the last of repeated headers, and
// two Authorization headers are one of the cases.)
func served(t *testing.T, f *fiber.App) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, err := f.Test(r, -1)
		if err != nil {
			t.Errorf("fiber: %v", err)
			w.WriteHeader(599)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	})
}

func TestFromContextWithoutNew(t *testing.T) {
	f := fiber.New(fiber.Config{DisableStartupMessage: true})
	f.Get("/", func(c *fiber.Ctx) error {
		if id, ok := keygatefiber.FromContext(c); ok || id != nil {
			t.Errorf("FromContext = %v, %v on a context New did not see", id, ok)
		}
		return nil
	})
	req, _ := http.NewRequest("GET", "/", nil)
	if _, err := f.Test(req); err != nil {
		t.Fatal(err)
	}
}
