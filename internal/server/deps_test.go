package server

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies keeps measuring and test-only code off the serve path,
// and the test-only peers (the JWT libraries, the Vault client) out of the
// binary.
func TestDependencies(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not found:", err)
	}
	testOnly := []string{
		"github.com/golang-jwt/jwt",
		"github.com/lestrrat-go/jwx",
		// The Vault client the Vault API tests drive keygate with, and what
		// it brings; the HCL parser (github.com/hashicorp/hcl) is the
		// password policies' and is linked.
		"github.com/hashicorp/vault", "github.com/hashicorp/go-",
		"testing",
	}
	for _, tc := range []struct {
		pkg, tags string
		forbidden []string
	}{
		{".", "", append([]string{"github.com/keygate/keygate/internal/bench", "github.com/keygate/keygate/internal/loadgen",
			"github.com/keygate/keygate/internal/cli"}, testOnly...)},
		{"github.com/keygate/keygate/cmd/keygate", "", testOnly},
		// grpc-go's request tracing (golang.org/x/net/trace) brings
		// html/template, whose reflection keeps every method of every type
		// in the binary (a third of its size); the README's build with
		// -tags grpcnotrace leaves it out.
		{"github.com/keygate/keygate/cmd/keygate", "grpcnotrace", append([]string{"golang.org/x/net/trace", "text/template"}, testOnly...)},
	} {
		out, err := exec.Command(goTool, "list", "-tags", tc.tags, "-deps", tc.pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", tc.pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, f := range tc.forbidden {
				if dep == f || strings.HasPrefix(dep, f+"/") {
					t.Errorf("%s depends on %s", tc.pkg, dep)
				}
			}
		}
	}
}
