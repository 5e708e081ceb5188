package cli

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/testnet"
)

// TestServeTLSRotationWithCurl drives `keygate serve` with TLS on the
// traffic, probe and admin listeners (client certificates on the admin one)
// and rotates, on the live node, what each reads from its files, with
// Debian's curl as the client:
//
//   - the traffic certificate (which the probe listener serves too), while
//     curl makes requests in a loop, one process (one handshake) each, and
//     one process keeps a single connection across the rotation: no request
//     fails, that connection is not dropped, and every new handshake after
//     the rotation presents the new certificate (curl --pinnedpubkey);
//   - the admin listener's certificate, the same way;
//   - the admin listener's client-CA file: a client certificate from the new
//     CA is refused before and accepted after, one from the old CA accepted
//     before and refused after.
func TestServeTLSRotationWithCurl(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: certificate rotation seen by curl under a live serve; run without -short")
	}
	curl := curlBinary(t)
	h := newHarness(t)
	f := newTLSFiles(t, h.dir)
	h.env = f.serveEnv()
	s := h.serve("--listen", "127.0.0.1:0", "--probe-listen", "127.0.0.1:0", "--data-dir", h.path("data"))
	stop := sync.OnceValue(s.stop)
	t.Cleanup(func() { stop() })
	traffic := "https://" + s.addr
	admin := "https://" + logged(t, s, adminTLSLog)
	probe := "https://" + logged(t, s, probeTLSLog)

	run := func(args ...string) (string, error) {
		b, err := exec.Command(curl, append([]string{"-sS", "--max-time", "10"}, args...)...).CombinedOutput()
		return string(b), err
	}
	// status fetches url with curl and returns the HTTP status, or the
	// error curl reports (a refused handshake, a key that is not pinned).
	status := func(url string, args ...string) string {
		out, err := run(append(append([]string{"--cacert", f.caFile, "-o", "/dev/null", "-w", "%{http_code}"}, args...), url)...)
		if err != nil {
			return fmt.Sprintf("error %v: %s", err, strings.TrimSpace(out))
		}
		return out
	}
	op := []string{"--cert", f.opCert, "--key", f.opKey}
	hosts := testnet.LeafOptions{Hosts: []string{"localhost", "127.0.0.1"}}

	t.Run("traffic certificate under load", func(t *testing.T) {
		oldPin := pin(t, f.cert)
		next := f.ca.Issue(t, hosts)
		nextCert, nextKey := next.Write(t, h.dir, "traffic-next")
		newPin := pin(t, nextCert)
		for _, u := range []string{traffic, probe} {
			if got := status(u+"/healthz", "--pinnedpubkey", oldPin); got != "200" {
				t.Fatalf("%s before the rotation: %s", u, got)
			}
		}

		var (
			requests, failures atomic.Int64
			mu                 sync.Mutex
			firstFailure       string
		)
		fail := func(what string) {
			failures.Add(1)
			mu.Lock()
			if firstFailure == "" {
				firstFailure = what
			}
			mu.Unlock()
		}
		done := make(chan struct{})
		var wg sync.WaitGroup
		stopLoad := sync.OnceFunc(func() { close(done); wg.Wait() })
		defer stopLoad() // also when the test fails early
		// A new curl, so a new connection and handshake, for every request.
		for range 2 {
			wg.Go(func() {
				for {
					select {
					case <-done:
						return
					default:
					}
					requests.Add(1)
					if got := status(traffic + "/healthz"); got != "200" {
						fail(got)
					}
				}
			})
		}
		// One curl that keeps one HTTP/2 connection for 200 requests over
		// 5 s, across the rotation.
		const kept = 200
		var keptOut string
		var keptErr error
		wg.Go(func() {
			args := []string{"--cacert", f.caFile, "--rate", "40/s", "-w", "%{http_code} %{num_connects} %{http_version}\n"}
			for range kept {
				args = append(args, "-o", "/dev/null", traffic+"/healthz")
			}
			keptOut, keptErr = run(args...)
		})

		time.Sleep(500 * time.Millisecond)
		// The renewed pair replaces the files in force, each by a rename,
		// as certbot or a Kubernetes secret volume does it: certificate first.
		replace(t, nextCert, f.cert)
		time.Sleep(50 * time.Millisecond)
		replace(t, nextKey, f.key)
		eventuallyCurl(t, "a new handshake on the traffic listener presents the new certificate", func() string {
			return status(traffic+"/healthz", "--pinnedpubkey", newPin)
		})
		time.Sleep(500 * time.Millisecond) // more requests after the swap
		stopLoad()

		if failures.Load() != 0 {
			t.Errorf("%d of %d requests failed during the rotation; first: %s", failures.Load(), requests.Load(), firstFailure)
		}
		if requests.Load() < 20 {
			t.Errorf("only %d requests: not much of a load", requests.Load())
		}
		lines := strings.Split(strings.TrimSpace(keptOut), "\n")
		connects := 0
		for _, l := range lines {
			var code, n int
			var version string
			if _, err := fmt.Sscanf(l, "%d %d %s", &code, &n, &version); err != nil || code != 200 || version != "2" {
				t.Errorf("kept-alive curl: %q", l)
				break
			}
			connects += n
		}
		if keptErr != nil || len(lines) != kept || connects != 1 {
			t.Errorf("kept-alive curl: %v, %d answers, %d connections; want %d answers on one connection:\n%s", keptErr, len(lines), connects, kept, keptOut)
		}
		// From now on every new handshake, on the traffic and the probe
		// listener, presents the new certificate.
		for i := range 10 {
			u := traffic
			if i%2 == 1 {
				u = probe
			}
			if got := status(u+"/healthz", "--pinnedpubkey", newPin); got != "200" {
				t.Fatalf("%s after the rotation, pinned to the new key: %s", u, got)
			}
			if got := status(u+"/healthz", "--pinnedpubkey", oldPin); got == "200" {
				t.Fatalf("%s after the rotation still presents the old certificate", u)
			}
		}
		t.Logf("%d requests, one per connection, and %d on one kept connection, across the rotation", requests.Load(), kept)
	})

	t.Run("admin certificate", func(t *testing.T) {
		oldPin := pin(t, f.adminCert)
		next := f.ca.Issue(t, hosts)
		nextCert, nextKey := next.Write(t, h.dir, "admin-next")
		newPin := pin(t, nextCert)
		if got := status(admin+"/healthz", append(op, "--pinnedpubkey", oldPin)...); got != "200" {
			t.Fatalf("admin before the rotation: %s", got)
		}
		replace(t, nextCert, f.adminCert)
		replace(t, nextKey, f.adminKey)
		eventuallyCurl(t, "a new handshake on the admin listener presents the new certificate", func() string {
			return status(admin+"/healthz", append(op, "--pinnedpubkey", newPin)...)
		})
		if got := status(admin+"/healthz", append(op, "--pinnedpubkey", oldPin)...); got == "200" {
			t.Error("the admin listener still presents the old certificate")
		}
		if got := status(traffic+"/healthz", "--pinnedpubkey", pin(t, f.cert)); got != "200" {
			t.Errorf("the traffic listener's certificate changed with the admin one: %s", got)
		}
	})

	t.Run("admin client CA", func(t *testing.T) {
		newCA := testnet.NewCA(t, "operators, renewed")
		newOpCert, newOpKey := newCA.Issue(t, testnet.LeafOptions{Hosts: []string{"operator"}, Client: true}).Write(t, h.dir, "operator-next")
		next := []string{"--cert", newOpCert, "--key", newOpKey}
		if got := status(admin+"/healthz", next...); got == "200" {
			t.Fatal("a client certificate from a CA not yet in the client-CA file was accepted")
		}
		if got := status(admin+"/healthz", op...); got != "200" {
			t.Fatalf("the operator's certificate before the CA file changed: %s", got)
		}
		replace(t, newCA.WriteCA(t, h.dir, "operators-next.pem"), f.clientCAFile)
		eventuallyCurl(t, "a client certificate from the new CA is accepted", func() string {
			return status(admin+"/healthz", next...)
		})
		for _, p := range []string{"/healthz", "/metrics", "/readyz"} {
			if got := status(admin+p, next...); got != "200" {
				t.Errorf("admin %s with the new CA's client certificate: %s", p, got)
			}
			if got := status(admin+p, op...); got == "200" {
				t.Errorf("admin %s with the old CA's client certificate: accepted after the CA file changed", p)
			}
		}
		// keygate's own admin commands, with the new operator certificate.
		h.must("clients", "list", "--admin", admin, "--admin-ca", f.caFile, "--admin-cert", newOpCert, "--admin-key", newOpKey,
			"--admin-token-file", filepath.Join(h.path("data"), "admin.token"))
	})

	if code := stop(); code != ExitOK {
		t.Errorf("serve exit %d:\n%s", code, s.stderr)
	}
}

var probeTLSLog = regexp.MustCompile(`probe=(\S+) probe_tls=on`)

// logged waits for serve to log a line re matches and returns its first
// group.
func logged(t *testing.T, s *serving, re *regexp.Regexp) string {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := re.FindStringSubmatch(s.stderr.String()); m != nil {
			return m[1]
		}
	}
	t.Fatalf("serve logged nothing that matches %s:\n%s", re, s.stderr)
	return ""
}

// pin is curl's --pinnedpubkey for the certificate in the PEM file path:
// the SHA-256 of its public key, base64.
func pin(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s: no PEM block", path)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(c.RawSubjectPublicKeyInfo)
	return "sha256//" + base64.StdEncoding.EncodeToString(sum[:])
}

// replace puts a copy of src in place of dst by a rename, so that dst is
// never seen half written.
func replace(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	tmp := dst + ".new"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		t.Fatal(err)
	}
}

// eventuallyCurl waits, for up to 10 s (the watcher reads the files every
// 2 s), until get answers "200".
func eventuallyCurl(t *testing.T, what string, get func() string) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if last = get(); last == "200" {
			return
		}
	}
	t.Fatalf("%s: never, last %s", what, last)
}
