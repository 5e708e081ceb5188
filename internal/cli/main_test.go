package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"testing"
)

// TestMain lets this test binary stand in for the keygate binary: with
// KEYGATE_TEST_AS_CLI=1 it runs the command line instead of the tests, so
// that commands which start keygate as a child process (bench reproduce)
// can be tested without building the binary first.
func TestMain(m *testing.M) {
	if os.Getenv("KEYGATE_TEST_AS_CLI") == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}
