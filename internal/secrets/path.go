package secrets

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// InternalPrefix begins the paths of keygate's own records kept beside a
// tenant's secrets (TOTP keys, password policies): no path a user names can
// begin with it, and only the engine's Internal view reaches them.
const InternalPrefix = "@"

// ValidPath checks a secret's path: 1 to MaxPathBytes bytes of UTF-8
// without control characters, segments separated by single slashes, none
// empty, "." or "..", and not beginning with InternalPrefix. Its error
// wraps ErrInvalid and says what is wrong.
func ValidPath(path string) error {
	if strings.HasPrefix(path, InternalPrefix) {
		return fmt.Errorf("%w: a secret path does not begin with %q", ErrInvalid, InternalPrefix)
	}
	return validSegments(path)
}

// validInternal checks the path of one of keygate's own records.
func validInternal(path string) error {
	if !strings.HasPrefix(path, InternalPrefix) {
		return fmt.Errorf("%w: %q is not an internal record's path", ErrInvalid, path)
	}
	return validSegments(path)
}

func validSegments(path string) error {
	switch {
	case path == "":
		return fmt.Errorf("%w: missing secret path", ErrInvalid)
	case len(path) > MaxPathBytes:
		return fmt.Errorf("%w: secret path longer than %d bytes", ErrInvalid, MaxPathBytes)
	case !utf8.ValidString(path):
		return fmt.Errorf("%w: secret path is not UTF-8", ErrInvalid)
	}
	// Byte by byte (every read checks its path): in UTF-8 the bytes of a
	// character past ASCII are all 0x80 or more, so a control character
	// (below 0x20, or DEL) is a byte of its own.
	for i := 0; i < len(path); i++ {
		if c := path[i]; c < 0x20 || c == 0x7f {
			return fmt.Errorf("%w: secret path holds a control character", ErrInvalid)
		}
	}
	start := 0
	for i := 0; i <= len(path); i++ {
		if i < len(path) && path[i] != '/' {
			continue
		}
		switch seg := path[start:i]; seg {
		case "":
			return fmt.Errorf("%w: secret path %q has an empty segment", ErrInvalid, path)
		case ".", "..":
			return fmt.Errorf("%w: secret path %q has a %q segment", ErrInvalid, path, seg)
		}
		start = i + 1
	}
	return nil
}

// ValidFolder checks a List prefix: "" (the top) or a ValidPath followed
// by '/'.
func ValidFolder(prefix string) error {
	if prefix == "" {
		return nil
	}
	p, ok := strings.CutSuffix(prefix, "/")
	if !ok {
		return fmt.Errorf("%w: a folder ends with '/'", ErrInvalid)
	}
	return ValidPath(p)
}
