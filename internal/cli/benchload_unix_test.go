//go:build unix

package cli

import (
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
)

// TestBenchLoadRaisesFileLimit: with the soft open-file limit below what the
// connections need (Go raises it at start; the test lowers it), bench load
// raises it to the hard limit and says so.
func TestBenchLoadRaisesFileLimit(t *testing.T) {
	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
		t.Fatal(err)
	}
	if orig.Max < 2048 {
		t.Skipf("hard open-file limit %d is too low for the test", orig.Max)
	}
	ts := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer ts.Close()
	low := orig
	low.Cur = 512
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Skip("cannot lower the open-file limit:", err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig) })
	h := newHarness(t)
	expect(t, h.run("bench", "load", "--url", ts.URL, "--connections", "500", "--requests", "500", "--duration", "0s",
		"--warmup", "0s"), ExitOK, "500  closed", "raised the open-file limit (RLIMIT_NOFILE) from 512 to")
}
