package cli

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/testnet"
	"github.com/keygate/keygate/internal/tlscert"
)

// tlsFiles are the certificates of a TLS test: the traffic and admin
// listeners' (for localhost and 127.0.0.1, from ca), the CA file clients
// trust, and an operator's client certificate from clientCA.
type tlsFiles struct {
	ca, clientCA                   *testnet.CA
	caFile, clientCAFile           string
	cert, key, adminCert, adminKey string
	opCert, opKey                  string
	otherCert, otherKey            string // a client certificate from another CA
}

func newTLSFiles(t *testing.T, dir string) *tlsFiles {
	f := &tlsFiles{ca: testnet.NewCA(t, "keygate CA"), clientCA: testnet.NewCA(t, "operators")}
	hosts := testnet.LeafOptions{Hosts: []string{"localhost", "127.0.0.1"}}
	f.caFile = f.ca.WriteCA(t, dir, "ca.pem")
	f.clientCAFile = f.clientCA.WriteCA(t, dir, "operators.pem")
	f.cert, f.key = f.ca.Issue(t, hosts).Write(t, dir, "traffic")
	f.adminCert, f.adminKey = f.ca.Issue(t, hosts).Write(t, dir, "admin")
	f.opCert, f.opKey = f.clientCA.Issue(t, testnet.LeafOptions{Hosts: []string{"operator"}, Client: true}).Write(t, dir, "operator")
	f.otherCert, f.otherKey = testnet.NewCA(t, "someone else").Issue(t, testnet.LeafOptions{Hosts: []string{"operator"}, Client: true}).Write(t, dir, "other")
	return f
}

// serveEnv gives serve the files: the traffic listener's certificate, and
// the admin listener's with its client CAs.
func (f *tlsFiles) serveEnv() []string {
	return []string{"KEYGATE_TLS_CERT_FILE=" + f.cert, "KEYGATE_TLS_KEY_FILE=" + f.key, "KEYGATE_ADMIN_TLS_CERT_FILE=" + f.adminCert,
		"KEYGATE_ADMIN_TLS_KEY_FILE=" + f.adminKey, "KEYGATE_ADMIN_TLS_CLIENT_CA_FILE=" + f.clientCAFile}
}

// httpsClient trusts the test CA and presents the given client
// certificate files, if any.
func (f *tlsFiles) httpsClient(t *testing.T, certKey ...string) *http.Client {
	t.Helper()
	tc := &tls.Config{RootCAs: f.ca.Pool()}
	if len(certKey) == 2 {
		pair, err := tls.LoadX509KeyPair(certKey[0], certKey[1])
		if err != nil {
			t.Fatal(err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc, ForceAttemptHTTP2: true}}
}

var adminTLSLog = regexp.MustCompile(`admin=(\S+) admin_tls=client_certificates`)

// TestServeTLS: serve with the tls and admin_tls certificates from the
// environment, as Go's HTTP client, curl and keygate's own admin commands
// see it.
func TestServeTLS(t *testing.T) {
	h := newHarness(t)
	f := newTLSFiles(t, h.dir)
	data := h.path("data")
	h.env = f.serveEnv()
	s := h.serve("--listen", "127.0.0.1:0", "--data-dir", data)
	h.env = nil
	stop := sync.OnceValue(s.stop)
	t.Cleanup(func() { stop() })
	traffic := "https://" + s.addr
	admin := "https://" + logged(t, s, adminTLSLog) // an admin listener with client certificates

	// The dev-mode hints and the issuer say https.
	out := s.stdout.String()
	if !strings.Contains(out, traffic+"/oauth2/token") || !strings.Contains(out, traffic+"/auth") {
		t.Errorf("the printed curl lines do not use %s:\n%s", traffic, out)
	}
	c := f.httpsClient(t)
	resp, err := c.Get(traffic + "/.well-known/openid-configuration")
	if err != nil {
		t.Fatal(err)
	}
	var disc struct {
		Issuer string `json:"issuer"`
	}
	json.NewDecoder(resp.Body).Decode(&disc)
	resp.Body.Close()
	if disc.Issuer != traffic || resp.Proto != "HTTP/2.0" {
		t.Errorf("issuer %q over %s, want %q over HTTP/2.0", disc.Issuer, resp.Proto, traffic)
	}
	token := tokenLine.FindStringSubmatch(out)
	if token == nil {
		t.Fatalf("no sample token:\n%s", out)
	}
	req, _ := http.NewRequest(http.MethodGet, traffic+"/auth", nil)
	req.Header.Set("Authorization", "Bearer "+token[1])
	if resp, err := c.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("/auth over TLS: %v %v", err, resp)
	} else {
		resp.Body.Close()
	}

	// keygate's admin commands: with the CA and a client certificate they
	// work; without the certificate, or over http://, they say what to do.
	tokenFile := filepath.Join(data, "admin.token")
	withCert := []string{"--admin", admin, "--admin-ca", f.caFile, "--admin-cert", f.opCert, "--admin-key", f.opKey, "--admin-token-file", tokenFile}
	h.must(append([]string{"clients", "list"}, withCert...)...)
	expect(t, h.run("clients", "list", "--admin", admin, "--admin-ca", f.caFile, "--admin-token-file", tokenFile),
		ExitFail, "", "give --admin-cert and --admin-key")
	expect(t, h.run("clients", "list", "--admin", strings.Replace(admin, "https://", "http://", 1), "--admin-token-file", tokenFile),
		ExitFail, "", "the admin listener serves HTTPS: use --admin https://")
	expect(t, h.run("clients", "list", "--admin", admin, "--admin-ca", f.caFile, "--admin-cert", f.otherCert, "--admin-key", f.otherKey,
		"--admin-token-file", tokenFile), ExitFail, "", "remote error: tls")
	// Seal, then unseal with the root key, through the mutual-TLS listener.
	h.must(append([]string{"seal"}, withCert...)...)
	if out := h.must("unseal", "--admin", admin, "--admin-ca", f.caFile, "--admin-cert", f.opCert, "--admin-key", f.opKey,
		"--key-file", filepath.Join(data, "root.key")); !strings.Contains(out, `"sealed": false`) {
		t.Errorf("unseal over mutual TLS: %s", out)
	}

	t.Run("curl", func(t *testing.T) {
		curl := curlBinary(t)
		run := func(args ...string) (string, error) {
			cmd := exec.Command(curl, append([]string{"-sS", "--max-time", "10"}, args...)...)
			b, err := cmd.CombinedOutput()
			return string(b), err
		}
		// Traffic: HTTP/2 with the CA.
		if out, err := run("--cacert", f.caFile, "-w", " %{http_code} %{http_version}", traffic+"/healthz"); err != nil || !strings.HasSuffix(out, " 200 2") {
			t.Errorf("curl traffic: %v %q", err, out)
		}
		// Without the CA, curl refuses keygate's certificate.
		if out, err := run(traffic + "/healthz"); err == nil {
			t.Errorf("curl trusted an unknown CA: %q", out)
		}
		// Admin: with a client certificate, every path; without, none.
		for _, p := range []string{"/healthz", "/metrics", "/readyz"} {
			if out, err := run("--cacert", f.caFile, "--cert", f.opCert, "--key", f.opKey, "-o", "/dev/null", "-w", "%{http_code}", admin+p); err != nil || out != "200" {
				t.Errorf("curl admin %s with a client certificate: %v %q", p, err, out)
			}
			if out, err := run("--cacert", f.caFile, admin+p); err == nil {
				t.Errorf("curl admin %s without a client certificate: %q", p, out)
			}
			if out, err := run("--cacert", f.caFile, "--cert", f.otherCert, "--key", f.otherKey, admin+p); err == nil {
				t.Errorf("curl admin %s with another CA's client certificate: %q", p, out)
			}
		}
		// Plain HTTP to the TLS admin listener: a 400 that says why.
		out, err := run("-w", " %{http_code}", strings.Replace(admin, "https://", "http://", 1)+"/healthz")
		if err != nil || !strings.Contains(out, "Client sent an HTTP request to an HTTPS server") || !strings.HasSuffix(out, " 400") {
			t.Errorf("curl http:// to the TLS admin listener: %v %q", err, out)
		}
	})
	if code := stop(); code != ExitOK {
		t.Errorf("serve exit %d:\n%s", code, s.stderr)
	}
}

// curlBinary finds curl or skips; with KEYGATE_REQUIRE_CURL set (as .ci/run
// should set it) it fails instead.
func curlBinary(t *testing.T) string {
	t.Helper()
	if bin, err := exec.LookPath("curl"); err == nil {
		return bin
	}
	if _, err := os.Stat("/usr/bin/curl"); err == nil {
		return "/usr/bin/curl"
	}
	if os.Getenv("KEYGATE_REQUIRE_CURL") != "" {
		t.Fatal("curl is required (KEYGATE_REQUIRE_CURL is set) but not installed")
	}
	t.Skip("curl not installed; apt-get install curl, or run .ci/run")
	return ""
}

// serveAdmin runs serve with args. It returns the exit code if serve ends
// by itself within a few seconds, or stops it once it listens and returns
// -1 and its logs.
func serveAdmin(t *testing.T, h *harness, args ...string) (code int, stderr string) {
	t.Helper()
	var stdout, errb syncBuffer
	a := h.app(&stdout, &errb)
	ready := make(chan string, 1)
	a.ready = func(addr string) { ready <- addr }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- a.main(ctx, append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", h.path("data")}, args...))
	}()
	select {
	case code := <-done:
		return code, errb.String()
	case <-ready:
		cancel()
		if code := <-done; code != ExitOK {
			t.Errorf("serve exit %d after it started:\n%s", code, errb.String())
		}
		return -1, errb.String()
	case <-time.After(15 * time.Second):
		t.Fatal("serve neither started nor ended")
	}
	return 0, ""
}

// adminRefusal is what a refused admin listener's error must say.
var adminRefusal = []string{"refusing to serve the admin listener", "unseal passphrases", "admin_tls.cert_file", "--insecure-admin"}

// TestServeAdminExposure: serve refuses an admin listener bound where
// other hosts reach it over plain HTTP (every IPv4 or IPv6 interface, or
// no host), before anything is written, and says why; loopback, by
// address or host name, is served; TLS or --insecure-admin lets it start,
// with a warning where the guard is weak. Addresses that cannot be bound
// here (10.x, a host name resolving off loopback) are TestCheckAdminListener's.
func TestServeAdminExposure(t *testing.T) {
	for _, tt := range []struct {
		name, listen string
		extra        []string
		refused      bool
		want         string
	}{
		{"every IPv4 interface", "0.0.0.0:0", nil, true, "0.0.0.0"},
		{"every IPv6 interface", "[::]:0", nil, true, "(::)"},
		{"no host", ":0", nil, true, "every interface"},
		{"IPv4 loopback", "127.0.0.1:0", nil, false, ""},
		{"a host name on loopback", "localhost:0", nil, false, ""},
		{"IPv6 loopback", "[::1]:0", nil, false, ""},
		{"--insecure-admin", "0.0.0.0:0", []string{"--insecure-admin"}, false, "serves plain HTTP off loopback"},
		{"TLS without client certificates", "0.0.0.0:0", []string{"tls"}, false, "accepts any TLS client off loopback"},
		{"mutual TLS", "0.0.0.0:0", []string{"mtls"}, false, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			args := []string{"--admin-listen", tt.listen}
			for _, e := range tt.extra {
				f := newTLSFiles(t, h.dir)
				adminTLS := []string{"KEYGATE_ADMIN_TLS_CERT_FILE=" + f.adminCert, "KEYGATE_ADMIN_TLS_KEY_FILE=" + f.adminKey}
				switch e {
				case "tls":
					h.env = adminTLS
				case "mtls":
					h.env = append(adminTLS, "KEYGATE_ADMIN_TLS_CLIENT_CA_FILE="+f.clientCAFile)
				default:
					args = append(args, e)
				}
			}
			code, stderr := serveAdmin(t, h, args...)
			if tt.refused {
				if code != ExitFail || !strings.Contains(stderr, tt.want) {
					t.Fatalf("exit %d, want %d and %q:\n%s", code, ExitFail, tt.want, stderr)
				}
				for _, want := range adminRefusal {
					if !strings.Contains(stderr, want) {
						t.Errorf("the refusal lacks %q:\n%s", want, stderr)
					}
				}
				if _, err := os.Stat(h.path("data")); err == nil {
					t.Error("the data directory was created before the refusal")
				}
				return
			}
			if code != -1 {
				t.Fatalf("serve did not start: exit %d\n%s", code, stderr)
			}
			if tt.want != "" && !strings.Contains(stderr, tt.want) {
				t.Errorf("no warning %q:\n%s", tt.want, stderr)
			}
			if tt.want == "" && strings.Contains(stderr, "off loopback") {
				t.Errorf("a warning where none was due:\n%s", stderr)
			}
		})
	}
}

// TestServeTLSErrors: TLS settings from the environment that do not go
// together, or files that do not load, stop serve with the configuration
// field named.
func TestServeTLSErrors(t *testing.T) {
	h := newHarness(t)
	f := newTLSFiles(t, h.dir)
	const (
		cert, key                     = "KEYGATE_TLS_CERT_FILE=", "KEYGATE_TLS_KEY_FILE="
		adminCert, adminKey, clientCA = "KEYGATE_ADMIN_TLS_CERT_FILE=", "KEYGATE_ADMIN_TLS_KEY_FILE=", "KEYGATE_ADMIN_TLS_CLIENT_CA_FILE="
	)
	for _, tt := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"certificate without key", []string{cert + f.cert}, nil, "tls.key_file: is required with tls.cert_file"},
		{"key without certificate", []string{key + f.key}, nil, "tls.cert_file: is required with tls.key_file"},
		{"client CA without certificate", []string{clientCA + f.clientCAFile}, nil, "admin_tls.client_ca_file: needs admin_tls.cert_file and admin_tls.key_file"},
		{"admin TLS with the admin listener off", []string{adminCert + f.adminCert, adminKey + f.adminKey}, []string{"--admin-listen", "off"}, "admin_tls: is set but the admin listener is off"},
		{"missing certificate file", []string{cert + h.path("missing.crt"), key + f.key}, nil, "tls.cert_file: open " + h.path("missing.crt")},
		{"key of another certificate", []string{cert + f.cert, key + f.adminKey}, nil, "tls.key_file: " + f.adminKey},
		{"client CA file without a certificate", []string{adminCert + f.adminCert, adminKey + f.adminKey, clientCA + f.adminKey}, nil, "admin_tls.client_ca_file: " + f.adminKey + ": no PEM CERTIFICATE block"},
		{"Redis TLS files with redis://", []string{"KEYGATE_REDIS_URL=redis://127.0.0.1:1/0", "KEYGATE_TOKEN_SERVICE_REDIS_CA_FILE=" + f.caFile}, nil, "the Redis URL must be rediss://"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h.env = tt.env
			r := h.run(append([]string{"serve", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--data-dir", h.path("data")}, tt.args...)...)
			expect(t, r, ExitFail, "", tt.want)
		})
	}
}

// TestServeRedisTLS: the Redis TLS files and the URL's scheme are checked
// as they are in force, the environment over the configuration file. A
// certificate without its key, a key without its certificate, or TLS files
// with a redis:// URL are refused, naming the fields; a file with a
// redis:// URL and the TLS files, run with KEYGATE_REDIS_URL=rediss://...,
// reaches a Redis that speaks TLS only and requires the client certificate.
func TestServeRedisTLS(t *testing.T) {
	h := newHarness(t)
	f := newTLSFiles(t, h.dir)
	for i, tt := range []struct{ name, yaml, want string }{
		{"certificate without key", "token_service: {redis_url: \"rediss://127.0.0.1:1/0\", redis_cert_file: " + f.opCert + "}",
			"a client certificate and its private key go together"},
		{"key without certificate", "token_service: {redis_url: \"rediss://127.0.0.1:1/0\", redis_key_file: " + f.opKey + "}",
			"a client certificate and its private key go together"},
		{"TLS files with redis://", "token_service: {redis_url: \"redis://127.0.0.1:1/0\", redis_ca_file: " + f.caFile + "}",
			"the Redis URL must be rediss://"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := h.write(fmt.Sprintf("refused-%d.yaml", i), []byte(tt.yaml+"\n"))
			r := h.run("serve", "--config", cfg, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--data-dir", h.path(fmt.Sprintf("data-%d", i)))
			expect(t, r, ExitFail, "", tt.want)
			expect(t, r, ExitFail, "", "token_service.redis_")
		})
	}
	t.Run("KEYGATE_REDIS_URL rediss:// over redis:// in the file", func(t *testing.T) {
		h := newHarness(t)
		client, err := tlscert.ClientConfig(f.caFile, f.opCert, f.opKey)
		if err != nil {
			t.Fatal(err)
		}
		client.ServerName = "localhost"
		addr := testnet.RedisTLS(t, f.cert, f.key, f.clientCAFile, client)
		_, port, _ := net.SplitHostPort(addr)
		cfg := h.write("redis.yaml", []byte("token_service: {redis_url: \"redis://127.0.0.1:1/0\", redis_ca_file: "+f.caFile+
			", redis_cert_file: "+f.opCert+", redis_key_file: "+f.opKey+"}\n"))
		h.env = []string{"KEYGATE_REDIS_URL=rediss://localhost:" + port + "/0"}
		s := h.serve("--config", cfg, "--listen", "127.0.0.1:0", "--data-dir", h.path("data"))
		t.Cleanup(func() { s.stop() })
		readyz := s.adminURL(t) + "/readyz"
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			resp, err := http.Get(readyz)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("/readyz never 200 on Redis over TLS: %v\n%s", err, s.stderr)
			}
		}
	})
}

// TestServeTLSFromFile: the tls and admin_tls sections of a configuration
// file, with variables that replace two of the files.
func TestServeTLSFromFile(t *testing.T) {
	h := newHarness(t)
	f := newTLSFiles(t, h.dir)
	other := f.ca.Issue(t, testnet.LeafOptions{Hosts: []string{"localhost", "127.0.0.1"}})
	otherCert, otherKey := other.Write(t, h.dir, "other-traffic")
	cfg := h.write("keygate.yaml", []byte("tls: {cert_file: "+f.cert+", key_file: "+f.key+"}\n"+
		"admin_tls: {cert_file: "+f.adminCert+", key_file: "+f.adminKey+", client_ca_file: "+f.clientCAFile+"}\n"))
	h.env = []string{"KEYGATE_TLS_CERT_FILE=" + otherCert, "KEYGATE_TLS_KEY_FILE=" + otherKey}
	s := h.serve("--config", cfg, "--listen", "127.0.0.1:0", "--data-dir", h.path("data"))
	t.Cleanup(func() { s.stop() })
	resp, err := f.httpsClient(t).Get("https://" + s.addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if !resp.TLS.PeerCertificates[0].Equal(other.Cert) {
		t.Error("KEYGATE_TLS_CERT_FILE did not replace tls.cert_file")
	}
	// The admin listener logs that it serves TLS as it starts, which can
	// come after the traffic listener has answered.
	for deadline := time.Now().Add(10 * time.Second); !adminTLSLog.MatchString(s.stderr.String()); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("admin_tls from the file not in force:\n%s", s.stderr)
		}
	}
}
