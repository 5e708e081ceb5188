// Command keygate is a JWT gateway and key service: it verifies and issues
// tokens, serves a JWKS and a forward-auth endpoint, and measures itself.
// Run "keygate help" for its commands.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/keygate/keygate/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
