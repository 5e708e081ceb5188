package cli

import (
	"strings"
	"testing"
)

func TestBench(t *testing.T) {
	h := newHarness(t)
	tests := []struct {
		args   []string
		header string
		algs   []string
	}{
		{[]string{"bench", "verify", "--alg", "HS256", "--alg", "ES256,EdDSA", "--duration", "30ms", "--goroutines", "2"},
			"verifies/s", []string{"HS256", "ES256", "EdDSA"}},
		{[]string{"bench", "sign", "--alg", "RS256", "--duration", "30ms", "--goroutines", "1"},
			"signs/s", []string{"RS256"}},
	}
	for _, tt := range tests {
		t.Run(tt.args[1], func(t *testing.T) {
			out := h.must(tt.args...)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != 2+len(tt.algs) {
				t.Fatalf("want a heading, a header and %d rows:\n%s", len(tt.algs), out)
			}
			if f := strings.Fields(lines[1]); len(f) != 4 || f[1] != tt.header || f[2] != "ns/op" || f[3] != "allocs/op" {
				t.Errorf("header %q", lines[1])
			}
			for i, alg := range tt.algs {
				if f := strings.Fields(lines[2+i]); len(f) != 4 || f[0] != alg || f[1] == "0" {
					t.Errorf("row %q", lines[2+i])
				}
			}
		})
	}
}

func TestBenchUsage(t *testing.T) {
	h := newHarness(t)
	for _, args := range [][]string{
		{"--duration", "0s"},
		{"--goroutines", "0"},
		{"--alg", "none"},
		{"extra"},
	} {
		expect(t, h.run(append([]string{"bench", "verify"}, args...)...), ExitUsage, "", "")
	}
}
