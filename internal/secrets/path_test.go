package secrets

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
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

// validSegmentsRef is validSegments as first written (rune by rune, the
// segments split), which FuzzValidPath holds the byte-wise one to.
func validSegmentsRef(path string) error {
	switch {
	case path == "":
		return fmt.Errorf("%w: missing secret path", ErrInvalid)
	case len(path) > MaxPathBytes:
		return fmt.Errorf("%w: secret path longer than %d bytes", ErrInvalid, MaxPathBytes)
	case !utf8.ValidString(path):
		return fmt.Errorf("%w: secret path is not UTF-8", ErrInvalid)
	}
	for _, r := range path {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: secret path holds a control character", ErrInvalid)
		}
	}
	for seg := range strings.SplitSeq(path, "/") {
		switch seg {
		case "":
			return fmt.Errorf("%w: secret path %q has an empty segment", ErrInvalid, path)
		case ".", "..":
			return fmt.Errorf("%w: secret path %q has a %q segment", ErrInvalid, path, seg)
		}
	}
	return nil
}

// FuzzValidPath: validSegments answers every path as validSegmentsRef
// does, error text included.
func FuzzValidPath(f *testing.F) {
	for _, p := range []string{"app", "a/b/c", "émoji-🔑", "", "/a", "a/", "a//b", "a/./b", "a/..", "a\x00", "\x7f", "\xc2\x85", "\xff/a", "@x"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, path string) {
		got, want := validSegments(path), validSegmentsRef(path)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("validSegments(%q) = %v, want %v", path, got, want)
		}
	})
}
