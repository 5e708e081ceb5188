package middleware_test

import (
	"testing"

	"github.com/keygate/keygate/middleware/middlewaretest"
)

// TestKit runs the adapters' shared table test against the net/http
// middleware itself.
func TestKit(t *testing.T) { middlewaretest.Run(t, middlewaretest.NetHTTP) }
