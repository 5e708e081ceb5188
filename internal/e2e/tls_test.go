package e2e

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/rootkey"
	"github.com/keygate/keygate/internal/server"
	"github.com/keygate/keygate/internal/telemetry"
	"github.com/keygate/keygate/internal/testnet"
)

// tlsNode is a server with TLS on its traffic, admin and probe listeners,
// from certificates a test CA issued; the admin listener requires client
// certificates from clientCA.
type tlsNode struct {
	*server.Server
	ca, clientCA          *testnet.CA
	dir                   string
	certFile, keyFile     string // the traffic listener's
	traffic, admin, probe string // https:// base URLs
	plainAdmin            string // the admin listener's address as http://
	logs                  *syncBuffer
	stop                  func()
	operator              tls.Certificate // a client certificate from clientCA
}

func startTLSNode(t *testing.T) *tlsNode {
	t.Helper()
	n := &tlsNode{ca: testnet.NewCA(t, "keygate test CA"), clientCA: testnet.NewCA(t, "operators"), dir: t.TempDir(), logs: &syncBuffer{}}
	n.certFile, n.keyFile = n.issue(t).Write(t, n.dir, "traffic")
	adminCert, adminKey := n.issue(t).Write(t, n.dir, "admin")
	clientCAFile := n.clientCA.WriteCA(t, n.dir, "operators.pem")
	n.operator = n.clientCA.Issue(t, testnet.LeafOptions{Hosts: []string{"operator"}, Client: true}).TLSCertificate(t)
	path := filepath.Join(n.dir, "keygate.yaml")
	yaml := fmt.Sprintf("tls: {cert_file: %s, key_file: %s}\nadmin_tls: {cert_file: %s, key_file: %s, client_ca_file: %s}\n",
		n.certFile, n.keyFile, adminCert, adminKey, clientCAFile)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.New(context.Background(), server.Config{Gateway: cfg, ConfigPath: path, Metrics: telemetry.New(), Logger: slog.New(slog.NewTextHandler(n.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Node: &node.Config{DataDir: filepath.Join(n.dir, "data"), Issuer: "https://self", Audience: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	n.Server = s
	var ls server.Listeners
	for _, l := range []*net.Listener{&ls.Traffic, &ls.Admin, &ls.Probe} {
		if *l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	n.traffic, n.admin, n.probe = "https://"+ls.Traffic.Addr().String(), "https://"+ls.Admin.Addr().String(), "https://"+ls.Probe.Addr().String()
	n.plainAdmin = "http://" + ls.Admin.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.ServeListeners(ctx, ls) }()
	n.stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	t.Cleanup(func() {
		n.stop()
		s.Close()
	})
	return n
}

// issue issues a server certificate for loopback.
func (n *tlsNode) issue(t *testing.T) *testnet.Leaf {
	return n.ca.Issue(t, testnet.LeafOptions{Hosts: []string{"localhost", "127.0.0.1"}})
}

// client is an HTTP client that trusts the node's CA, presents cert when
// given, and speaks HTTP/2 when the server offers it.
func (n *tlsNode) client(cert *tls.Certificate) *http.Client {
	tc := &tls.Config{RootCAs: n.ca.Pool()}
	if cert != nil {
		tc.Certificates = []tls.Certificate{*cert}
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc, ForceAttemptHTTP2: true}}
}

func fetch(c *http.Client, url string) (*http.Response, string, error) {
	resp, err := c.Get(url)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

// TestTLSListeners: HTTP/2 over TLS on the traffic and probe listeners;
// the admin listener answers only clients with a certificate from the
// client CA, on every path; TLS below 1.2 and plain HTTP are refused
// with a clear answer.
func TestTLSListeners(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: TLS listeners with client certificates, TLS versions and plain HTTP; run without -short")
	}
	n := startTLSNode(t)
	c := n.client(nil)
	for _, u := range []string{n.traffic + "/healthz", n.traffic + "/.well-known/jwks.json", n.probe + "/healthz", n.probe + "/readyz"} {
		resp, body, err := fetch(c, u)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		if resp.StatusCode != http.StatusOK || resp.Proto != "HTTP/2.0" || resp.TLS == nil || resp.TLS.NegotiatedProtocol != "h2" {
			t.Errorf("%s: %d %s %+v %s", u, resp.StatusCode, resp.Proto, resp.TLS != nil, body)
		}
		if resp.TLS.Version < tls.VersionTLS12 {
			t.Errorf("%s: TLS version %x", u, resp.TLS.Version)
		}
	}
	// Headers up to the listener's limit are read over HTTP/2 as over
	// HTTP/1.1: a token over max_token_size gets keygate's own 401.
	req, _ := http.NewRequest(http.MethodGet, n.traffic+"/auth", nil)
	req.Header.Set("Authorization", "Bearer "+strings.Repeat("a", 40<<10))
	if resp, err := c.Do(req); err != nil || resp.Proto != "HTTP/2.0" || resp.StatusCode != http.StatusUnauthorized ||
		!strings.Contains(resp.Header.Get("WWW-Authenticate"), "invalid_token") {
		t.Errorf("a 40 KiB token over HTTP/2: %v %+v", err, resp)
	} else {
		resp.Body.Close()
	}
	// An HTTP/1.1-only client is served too.
	h1 := n.client(nil)
	h1.Transport.(*http.Transport).ForceAttemptHTTP2 = false
	if resp, _, err := fetch(h1, n.traffic+"/healthz"); err != nil || resp.Proto != "HTTP/1.1" {
		t.Errorf("HTTP/1.1 client: %v", err)
	}
	// TLS 1.1 is refused.
	old := n.client(nil)
	old.Transport.(*http.Transport).TLSClientConfig.MaxVersion = tls.VersionTLS11
	if _, _, err := fetch(old, n.traffic+"/healthz"); err == nil {
		t.Error("a TLS 1.1 client was served")
	}

	// Admin: a client certificate from the client CA opens every path.
	op := n.client(&n.operator)
	for _, p := range []string{"/healthz", "/metrics", "/readyz", "/v1/sys/seal-status"} {
		resp, _, err := fetch(op, n.admin+p)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("admin %s with a client certificate: %v %v", p, err, resp)
		}
	}
	// Without one, or with one from another CA, no path answers.
	other := testnet.NewCA(t, "another CA").Issue(t, testnet.LeafOptions{Hosts: []string{"operator"}, Client: true}).TLSCertificate(t)
	for name, cl := range map[string]*http.Client{"no client certificate": n.client(nil), "a certificate from another CA": n.client(&other)} {
		for _, p := range []string{"/healthz", "/debug/pprof/", "/v1/sys/unseal"} {
			if resp, _, err := fetch(cl, n.admin+p); err == nil {
				t.Errorf("admin %s with %s: %d", p, name, resp.StatusCode)
			}
		}
	}
	// Plain HTTP to a TLS listener gets net/http's plain answer.
	resp, body, err := fetch(&http.Client{Timeout: 5 * time.Second}, n.plainAdmin+"/healthz")
	if err != nil || resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "HTTP request to an HTTPS server") {
		t.Errorf("plain HTTP to the admin listener: %v %v %q", err, resp, body)
	}

	_, metrics, err := fetch(op, n.admin+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`keygate_tls_certificate_loads_total{listener="traffic",result="ok"} 1`,
		`keygate_tls_certificate_loads_total{listener="admin",result="ok"} 1`,
		`keygate_tls_certificate_loads_total{listener="admin",result="error"} 0`,
		`keygate_tls_certificate_not_after_timestamp_seconds{listener="traffic"}`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	logs := n.logs.String()
	for _, want := range []string{"tls=on", "admin_tls=client_certificates", "probe_tls=on"} {
		if !strings.Contains(logs, want) {
			t.Errorf("start-up log lacks %s:\n%s", want, logs)
		}
	}
}

// TestTLSRotationUnderLoad: clients on kept-alive HTTP/2 connections and
// clients that connect for every request run while the certificate files
// are rewritten (certificate first, then key). No request fails, a
// connection opened before the rotation goes on serving with the old
// certificate, and once the watcher has read the new pair every new
// handshake presents its serial.
func TestTLSRotationUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: certificate rotation under load; run without -short")
	}
	n := startTLSNode(t)
	oldSerial := certSerial(t, n.certFile)
	next := n.issue(t)

	var (
		failures, requests atomic.Int64
		mu                 sync.Mutex
		firstErr           error
		oldAfterSwap       atomic.Int64 // requests served with the old certificate on a connection kept alive across the swap
		swapped            atomic.Bool
	)
	fail := func(err error) {
		failures.Add(1)
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	const clients = 6
	for i := range clients {
		keepAlive := i%2 == 0
		c := n.client(nil)
		c.Transport.(*http.Transport).DisableKeepAlives = !keepAlive
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.CloseIdleConnections()
			for ctx.Err() == nil {
				resp, _, err := fetch(c, n.traffic+"/healthz")
				requests.Add(1)
				switch {
				case err != nil:
					fail(err)
				case resp.StatusCode != http.StatusOK:
					fail(fmt.Errorf("status %d", resp.StatusCode))
				case keepAlive && swapped.Load() && resp.TLS.PeerCertificates[0].SerialNumber.Cmp(oldSerial) == 0:
					oldAfterSwap.Add(1)
				}
				if !keepAlive {
					time.Sleep(2 * time.Millisecond)
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	// Certificate first, key second, as a renewal script writes them.
	if err := os.WriteFile(n.certFile, next.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if err := os.WriteFile(n.keyFile, next.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a new handshake presents the new certificate", func() bool {
		return handshakeSerial(t, n).Cmp(next.Cert.SerialNumber) == 0
	})
	swapped.Store(true)
	time.Sleep(500 * time.Millisecond)
	// Every new handshake from here on gets the new certificate.
	for range 20 {
		if got := handshakeSerial(t, n); got.Cmp(next.Cert.SerialNumber) != 0 {
			t.Fatalf("a new handshake after the rotation presented serial %x", got)
		}
	}
	cancel()
	wg.Wait()
	if failures.Load() != 0 {
		t.Fatalf("%d of %d requests failed during the rotation; first: %v", failures.Load(), requests.Load(), firstErr)
	}
	if requests.Load() < 50 {
		t.Errorf("only %d requests: not much of a load", requests.Load())
	}
	if oldAfterSwap.Load() == 0 {
		t.Error("no request on a connection kept alive across the rotation: were connections dropped?")
	}
	_, metrics, err := fetch(n.client(&n.operator), n.admin+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(metrics, `keygate_tls_certificate_loads_total{listener="traffic",result="ok"} 2`) ||
		!strings.Contains(metrics, `keygate_tls_certificate_loads_total{listener="traffic",result="error"} 0`) {
		t.Errorf("loads not counted as one more success and no error:\n%s", grepLines(metrics, "tls_certificate"))
	}
	t.Logf("%d requests, %d on old connections after the swap", requests.Load(), oldAfterSwap.Load())
}

// handshakeSerial opens a new connection to the traffic listener and
// returns the serial of the certificate it presents.
func handshakeSerial(t *testing.T, n *tlsNode) *big.Int {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", strings.TrimPrefix(n.traffic, "https://"),
		&tls.Config{RootCAs: n.ca.Pool(), ServerName: "localhost"})
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber
}

func certSerial(t *testing.T, path string) *big.Int {
	t.Helper()
	c, err := tlsLeaf(path)
	if err != nil {
		t.Fatal(err)
	}
	return c.SerialNumber
}

// TestTLSBadRotation: a key that does not match the certificate, and then
// a key file that is gone, never replace the pair in force: each is logged
// once and counted once, and new handshakes keep the old certificate.
func TestTLSBadRotation(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: bad certificate rotations, each waited for through the watcher; run without -short")
	}
	n := startTLSNode(t)
	oldSerial := certSerial(t, n.certFile)
	errors := func() string {
		_, m, err := fetch(n.client(&n.operator), n.admin+"/metrics")
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	want := func(k int) string {
		return fmt.Sprintf(`keygate_tls_certificate_loads_total{listener="traffic",result="error"} %d`, k)
	}
	if err := os.WriteFile(n.keyFile, n.issue(t).KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the mismatched key counted", func() bool { return strings.Contains(errors(), want(1)) })
	time.Sleep(2*server.WatchInterval + 500*time.Millisecond) // two more polls of the same files
	if !strings.Contains(errors(), want(1)) {
		t.Error("the same broken files counted more than once")
	}
	if got := handshakeSerial(t, n); got.Cmp(oldSerial) != 0 {
		t.Fatalf("a new handshake presented serial %x after a bad rotation", got)
	}
	if k := strings.Count(n.logs.String(), "certificate files failed to load"); k != 1 {
		t.Errorf("%d error lines for one broken pair:\n%s", k, n.logs)
	}
	if !strings.Contains(n.logs.String(), "tls.key_file") || !strings.Contains(n.logs.String(), "does not match") {
		t.Errorf("the log line does not say which file and why:\n%s", n.logs)
	}
	if err := os.Remove(n.keyFile); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the missing key counted", func() bool { return strings.Contains(errors(), want(2)) })
	if got := handshakeSerial(t, n); got.Cmp(oldSerial) != 0 {
		t.Fatalf("a new handshake presented serial %x with the key file gone", got)
	}
	// A good pair is taken at once.
	next := n.issue(t)
	os.WriteFile(n.certFile, next.CertPEM, 0o600)
	os.WriteFile(n.keyFile, next.KeyPEM, 0o600)
	eventually(t, "the good pair in force", func() bool { return handshakeSerial(t, n).Cmp(next.Cert.SerialNumber) == 0 })
}

// TestTLSWatcherStops: the watcher that follows the certificate files
// ends with Serve, and starts nothing of its own.
func TestTLSWatcherStops(t *testing.T) {
	n := startTLSNode(t)
	handshakeSerial(t, n)
	n.stop()
	deadline := time.Now().Add(5 * time.Second)
	for {
		stacks := goroutineStacks()
		if !strings.Contains(stacks, "(*Server).watch") && !strings.Contains(stacks, "tlscert.") && !strings.Contains(stacks, "net/http.(*conn).serve") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines outlived Serve:\n%s", stacks)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTLSStartRefused: certificate files that do not load stop New, naming
// the field, before anything is written to the data directory.
func TestTLSStartRefused(t *testing.T) {
	ca := testnet.NewCA(t, "ca")
	dir := t.TempDir()
	cert, key := ca.Issue(t, testnet.LeafOptions{Hosts: []string{"localhost"}}).Write(t, dir, "a")
	_, otherKey := ca.Issue(t, testnet.LeafOptions{Hosts: []string{"localhost"}}).Write(t, dir, "b")
	expCert, expKey := ca.Issue(t, testnet.LeafOptions{Hosts: []string{"localhost"}, NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)}).Write(t, dir, "expired")
	tests := []struct {
		name string
		cfg  config.Config
		want string
	}{
		{"missing certificate", config.Config{TLS: config.TLS{CertFile: filepath.Join(dir, "nope.crt"), KeyFile: key}}, "tls.cert_file: open "},
		{"key of another certificate", config.Config{TLS: config.TLS{CertFile: cert, KeyFile: otherKey}}, "tls.key_file: "},
		{"expired", config.Config{TLS: config.TLS{CertFile: expCert, KeyFile: expKey}}, "tls.cert_file: " + expCert + ": the certificate has expired"},
		{"admin key of another certificate", config.Config{AdminTLS: config.AdminTLS{TLS: config.TLS{CertFile: cert, KeyFile: otherKey}}}, "admin_tls.key_file: "},
		{"client CA file missing", config.Config{AdminTLS: config.AdminTLS{TLS: config.TLS{CertFile: cert, KeyFile: key}, ClientCAFile: filepath.Join(dir, "nope.pem")}}, "admin_tls.client_ca_file: open "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.SetDefaults()
			data := filepath.Join(t.TempDir(), "data")
			s, err := server.New(context.Background(), server.Config{Gateway: &tt.cfg, Node: &node.Config{DataDir: data, Issuer: "https://self", Audience: "x"}})
			if err == nil {
				s.Close()
				t.Fatal("New succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want %q", err, tt.want)
			}
			if _, err := os.Stat(data); err == nil {
				t.Error("the data directory was created")
			}
		})
	}
}

// TestPostgresTLS: the database URL reaches PostgreSQL over TLS with
// sslmode=verify-full and sslrootcert as libpq reads them; a CA that did
// not sign the server's certificate, or a host name it does not hold,
// fails the start. It uses the TLS of the PostgreSQL at DATABASE_URL
// (Debian's, with its snakeoil certificate for "localhost"), and skips
// when that server has ssl off.
func TestPostgresTLS(t *testing.T) {
	base := newSchema(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	var ssl, certFile string
	err = conn.QueryRow(ctx, "SELECT current_setting('ssl'), current_setting('ssl_cert_file')").Scan(&ssl, &certFile)
	conn.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ssl != "on" {
		t.Skip("the PostgreSQL at DATABASE_URL has ssl off; the client side is covered by TestDatabaseTLSWarning")
	}
	if _, err := os.ReadFile(certFile); err != nil {
		t.Skipf("cannot read the server's certificate to trust it: %v", err)
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	with := func(host, rootCert string) string {
		v := *u
		v.Host = net.JoinHostPort(host, u.Port())
		q := v.Query()
		q.Set("sslmode", "verify-full")
		q.Set("sslrootcert", rootCert)
		v.RawQuery = q.Encode()
		return v.String()
	}
	leaf, err := tlsLeaf(certFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(leaf.DNSNames) == 0 {
		t.Skipf("the server's certificate %s names no host", certFile)
	}
	good := with(leaf.DNSNames[0], certFile)
	conn, err = pgx.Connect(ctx, good)
	if err != nil {
		t.Fatalf("verify-full to %s: %v", leaf.DNSNames[0], err)
	}
	var onTLS bool
	err = conn.QueryRow(ctx, "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&onTLS)
	conn.Close(ctx)
	if err != nil || !onTLS {
		t.Fatalf("the connection is not TLS: %v", err)
	}
	node := func(dbURL string) error {
		dir := t.TempDir()
		key := filepath.Join(dir, "root.key")
		if err := rootkey.GenerateKeyFile(key, rand.Reader); err != nil {
			t.Fatal(err)
		}
		logs := &syncBuffer{}
		s, err := server.New(ctx, server.Config{Logger: slog.New(slog.NewTextHandler(logs, nil)),
			Node: &node.Config{DataDir: filepath.Join(dir, "data"), Issuer: testIssuer, Audience: testAudience,
				TokenService: config.TokenService{DatabaseURL: dbURL, RootKeyFile: key, StoreTimeout: 5 * time.Second}}})
		if err == nil {
			s.Close()
			if strings.Contains(logs.String(), "database_url") {
				t.Errorf("a verified connection was warned about:\n%s", logs)
			}
		}
		return err
	}
	if err := node(good); err != nil {
		t.Fatalf("a node on verify-full: %v", err)
	}
	otherCA := testnet.NewCA(t, "not the database's CA").WriteCA(t, t.TempDir(), "ca.pem")
	if err := node(with(leaf.DNSNames[0], otherCA)); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a CA that did not sign the server's certificate: %v", err)
	}
	if err := node(with("127.0.0.1", certFile)); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("an address the certificate does not name: %v", err)
	}
}

// tlsLeaf returns the first certificate of a PEM file.
func tlsLeaf(path string) (*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	for {
		var block *pem.Block
		if block, b = pem.Decode(b); block == nil {
			return nil, errors.New(path + ": no certificate")
		}
		if block.Type == "CERTIFICATE" {
			return x509.ParseCertificate(block.Bytes)
		}
	}
}
