package server

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies keeps measuring and test-only code off the serve path.
func TestDependencies(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not found:", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	forbidden := []string{
		"github.com/keygate/keygate/internal/bench",
		"github.com/keygate/keygate/internal/cli",
		"github.com/golang-jwt/jwt",
		"github.com/lestrrat-go/jwx",
		"testing",
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, f+"/") {
				t.Errorf("internal/server depends on %s", dep)
			}
		}
	}
}
