//go:build unix

package loadgen

import (
	"syscall"
	"testing"
)

// TestEnsureFileLimitRaises lowers the soft open-file limit (Go's runtime
// raises it to the hard limit at start) and checks that EnsureFileLimit
// raises it again when connections need it.
func TestEnsureFileLimitRaises(t *testing.T) {
	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
		t.Fatal(err)
	}
	if orig.Max < 2048 {
		t.Skipf("hard open-file limit %d is too low for the test", orig.Max)
	}
	low := orig
	low.Cur = 512
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Skip("cannot lower the open-file limit:", err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig) })

	if raised, _, _, err := EnsureFileLimit(100); raised || err != nil {
		t.Errorf("100 connections under 512 files: raised %v, %v", raised, err)
	}
	raised, before, after, err := EnsureFileLimit(1000)
	if err != nil || !raised || before != 512 || after != orig.Max {
		t.Errorf("1000 connections: raised %v from %d to %d, %v; want 512 to %d", raised, before, after, err, orig.Max)
	}
	var now syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &now); err != nil || now.Cur != orig.Max {
		t.Errorf("soft limit now %d, want %d", now.Cur, orig.Max)
	}
}
