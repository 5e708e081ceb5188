package middleware_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies keeps the public middleware light: a Go service that
// embeds it links no database or Redis client and no test-only peer.
func TestDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Skipf("go list unavailable: %v\n%s", err, out)
	}
	for _, forbidden := range []string{"github.com/redis/", "github.com/jackc/", "modernc.org/", "github.com/golang-jwt/",
		"github.com/lestrrat-go/", "internal/store", "internal/bench", "internal/cli"} {
		for _, dep := range strings.Fields(string(out)) {
			if strings.Contains(dep, forbidden) {
				t.Errorf("middleware links %s", dep)
			}
		}
	}
}
