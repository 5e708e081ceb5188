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
//   - filippo.io/nistec is crypto/ecdsa's own P-256 point arithmetic as a
//     module (with its internal packages: fiat-crypto field code, byte
//     order and constant-time helpers); with it an ES256 key's table of
//     multiples is kept instead of rebuilt on every verification (see
//     P256Verifier);
//   - golang.org/x/sys/cpu is how bigmod picks its assembly (ADX, BMI2), and
//     how nistec learns the byte order.
var allowedDeps = map[string]bool{
	"github.com/keygate/keygate/jose":      true,
	"filippo.io/bigmod":                    true,
	"filippo.io/nistec":                    true,
	"filippo.io/nistec/internal/fiat":      true,
	"filippo.io/nistec/internal/byteorder": true,
	"filippo.io/nistec/internal/subtle":    true,
	"golang.org/x/sys/cpu":                 true,
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
