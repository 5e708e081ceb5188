// Package keygateecho verifies bearer tokens in an echo service with
// package middleware's pipeline, answering refused requests exactly as the
// net/http middleware does: 401 or 403 with an RFC 6750 WWW-Authenticate
// challenge and a JSON error body, without calling the next handler. A
// handler let through finds the verified identity with FromContext (c.Get
// under ContextKey) or, from the request context, with
// middleware.FromContext.
//
// It is a module of its own, github.com/keygate/keygate/middleware/echo, so
// that keygate's core module never imports echo.
package keygateecho

import (
	"github.com/labstack/echo/v4"

	"github.com/keygate/keygate/middleware"
)

// ContextKey is the echo context key under which New stores the
// *middleware.Identity of a request let through.
const ContextKey = "keygate.identity"

// New returns echo middleware that lets through requests with a bearer
// token mw accepts holding every scope in scopes, and answers any other
// with mw's answer. The refusal is written, not returned as an error, so
// that echo's HTTPErrorHandler does not reshape it.
func New(mw *middleware.Middleware, scopes ...string) echo.MiddlewareFunc {
	scopes = append([]string(nil), scopes...)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			o := mw.Check(r.Context(), r.Header, scopes...)
			if !o.Allowed() {
				o.Write(c.Response())
				return nil
			}
			c.Set(ContextKey, o.Identity)
			c.SetRequest(r.WithContext(middleware.NewContext(r.Context(), o.Identity)))
			return next(c)
		}
	}
}

// FromContext returns the identity New stored in c.
func FromContext(c echo.Context) (*middleware.Identity, bool) {
	id, ok := c.Get(ContextKey).(*middleware.Identity)
	return id, ok && id != nil
}
