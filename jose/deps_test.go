package jose

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies keeps jose importable by anyone: outside its tests it
// depends on the standard library alone and on nothing of keygate.
func TestDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Skipf("go list unavailable: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if p != "github.com/keygate/keygate/jose" {
			t.Errorf("jose depends on %s; it may use only the standard library", p)
		}
	}
}
