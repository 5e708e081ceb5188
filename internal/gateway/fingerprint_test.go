package gateway

import (
	"strings"
	"testing"
)

func TestFingerprint(t *testing.T) {
	fp := Fingerprint("a.b.c")
	if len(fp) != 8 || strings.Trim(fp, "0123456789abcdef") != "" {
		t.Fatalf("fingerprint %q is not 8 hex digits", fp)
	}
	if fp == Fingerprint("a.b.d") {
		t.Error("different tokens share a fingerprint")
	}
}
