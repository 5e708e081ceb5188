package jose

import (
	"os/exec"
	"strings"
	"testing"
)

// allowedDeps are the only modules jose may link outside the standard
// library, each for a reason:
//   - filippo.io/bigmod is crypto/rsa's own modular arithmetic as a module;
//     with it an RSA key's modulus is prepared once instead of on every
//     verification (see RSAVerifier);
//   - golang.org/x/sys/cpu is how bigmod picks its assembly (ADX, BMI2).
var allowedDeps = map[string]bool{
	"github.com/keygate/keygate/jose": true,
	"filippo.io/bigmod":               true,
	"golang.org/x/sys/cpu":            true,
}

// TestDependencies keeps jose importable by anyone: outside its tests it
// depends on the standard library, on allowedDeps alone and on nothing of
// keygate.
func TestDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Skipf("go list unavailable: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if !allowedDeps[p] {
			t.Errorf("jose depends on %s; it may use only the standard library and %v", p, allowedDeps)
		}
	}
}
