// Package keygatefiber verifies bearer tokens in a fiber (fasthttp)
// service with package middleware's pipeline, answering refused requests
// exactly as the net/http middleware does: 401 or 403 with an RFC 6750
// WWW-Authenticate challenge and a JSON error body, without calling the
// next handler. A handler let through finds the verified identity with
// FromContext (c.Locals under ContextKey) or, from c.UserContext(), with
// middleware.FromContext.
//
// fasthttp refuses a request whose headers exceed fiber.Config's
// ReadBufferSize (4 KiB by default) with 431 before any handler runs: to
// accept tokens up to middleware.Config's MaxTokenSize (8 KiB by default),
// raise it, to 16 KiB say.
//
// Fiber reuses its Ctx between requests: keep the *middleware.Identity,
// not the Ctx, beyond the handler. The identity itself is immutable.
//
// It is a module of its own, github.com/keygate/keygate/middleware/fiber,
// so that keygate's core module never imports fiber or fasthttp.
package keygatefiber

import (
	"net/http"

	"github.com/gofiber/fiber/v2"

	"github.com/keygate/keygate/middleware"
)

// ContextKey is the c.Locals key under which New stores the
// *middleware.Identity of a request let through.
const ContextKey = "keygate.identity"

// New returns a fiber handler that lets through (c.Next) requests with a
// bearer token mw accepts holding every scope in scopes, and answers any
// other with mw's answer.
func New(mw *middleware.Middleware, scopes ...string) fiber.Handler {
	scopes = append([]string(nil), scopes...)
	return func(c *fiber.Ctx) error {
		// Check reads only the Authorization header; every copy of it
		// goes, so that two are refused as net/http's middleware refuses
		// them.
		var h http.Header
		for _, v := range c.Request().Header.PeekAll(fiber.HeaderAuthorization) {
			if h == nil {
				h = http.Header{}
			}
			h["Authorization"] = append(h["Authorization"], string(v))
		}
		o := mw.Check(c.UserContext(), h, scopes...)
		if !o.Allowed() {
			for k, v := range o.Header() {
				c.Set(k, v[0])
			}
			return c.Status(o.Status).Send(o.Body())
		}
		c.Locals(ContextKey, o.Identity)
		c.SetUserContext(middleware.NewContext(c.UserContext(), o.Identity))
		return c.Next()
	}
}

// FromContext returns the identity New stored in c.
func FromContext(c *fiber.Ctx) (*middleware.Identity, bool) {
	id, ok := c.Locals(ContextKey).(*middleware.Identity)
	return id, ok && id != nil
}
