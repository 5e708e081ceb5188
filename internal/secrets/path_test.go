package secrets

import (
	"errors"
	"strings"
	"testing"
)

func TestValidPath(t *testing.T) {
	for _, c := range []struct {
		path string
		ok   bool
	}{
		{"app", true}, {"billing/db/password", true}, {"émoji-🔑", true}, {"a b", true}, {strings.Repeat("a", MaxPathBytes), true},
		{"", false}, {"/app", false}, {"app/", false}, {"a//b", false}, {"a/../b", false}, {"..", false}, {"./a", false},
		{"@totp/a", false}, {"a\x00b", false}, {"a\nb", false}, {"a\x7f", false}, {"\xff", false}, {strings.Repeat("a", MaxPathBytes+1), false},
	} {
		err := ValidPath(c.path)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("ValidPath(%q) = %v, want ok %v", c.path, err, c.ok)
		}
	}
	for _, c := range []struct {
		prefix string
		ok     bool
	}{{"", true}, {"a/", true}, {"a/b/", true}, {"a", false}, {"/", false}, {"a//", false}} {
		if err := ValidFolder(c.prefix); (err == nil) != c.ok {
			t.Errorf("ValidFolder(%q) = %v, want ok %v", c.prefix, err, c.ok)
		}
	}
}
