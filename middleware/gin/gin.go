// Package keygategin verifies bearer tokens in a gin service with package
// middleware's pipeline, answering refused requests exactly as the net/http
// middleware does: 401 or 403 with an RFC 6750 WWW-Authenticate challenge
// and a JSON error body, without running the handlers after it. A handler
// let through finds the verified identity with FromContext (c.Get under
// ContextKey) or, from the request context, with middleware.FromContext.
//
// It is a module of its own, github.com/keygate/keygate/middleware/gin, so
// that keygate's core module never imports gin.
package keygategin

import (
	"github.com/gin-gonic/gin"

	"github.com/keygate/keygate/middleware"
)

// ContextKey is the gin context key under which New stores the
// *middleware.Identity of a request let through.
const ContextKey = "keygate.identity"

// New returns gin middleware that lets through requests with a bearer
// token mw accepts holding every scope in scopes, and aborts any other with
// mw's answer.
func New(mw *middleware.Middleware, scopes ...string) gin.HandlerFunc {
	scopes = append([]string(nil), scopes...)
	return func(c *gin.Context) {
		o := mw.Check(c.Request.Context(), c.Request.Header, scopes...)
		if !o.Allowed() {
			o.Write(c.Writer)
			c.Abort()
			return
		}
		c.Set(ContextKey, o.Identity)
		c.Request = c.Request.WithContext(middleware.NewContext(c.Request.Context(), o.Identity))
		c.Next()
	}
}

// FromContext returns the identity New stored in c.
func FromContext(c *gin.Context) (*middleware.Identity, bool) {
	v, ok := c.Get(ContextKey)
	if !ok {
		return nil, false
	}
	id, ok := v.(*middleware.Identity)
	return id, ok && id != nil
}
