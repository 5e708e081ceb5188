package tlscert

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/keyfile"
	"github.com/keygate/keygate/internal/testnet"
)

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer = testnet.SyncBuffer

// env is a CA, a directory and the files of a server certificate in it.
type env struct {
	t                  *testing.T
	ca                 *testnet.CA
	dir                string
	certFile, keyFile  string
	logs               *syncBuffer
	events             []LoadEvent
	mu                 sync.Mutex
	clientCA, clientCF string
}

func newEnv(t *testing.T) *env {
	e := &env{t: t, ca: testnet.NewCA(t, "server CA"), dir: t.TempDir(), logs: &syncBuffer{}}
	e.certFile, e.keyFile = e.issue().Write(t, e.dir, "server")
	return e
}

func (e *env) issue() *testnet.Leaf {
	return e.ca.Issue(e.t, testnet.LeafOptions{Hosts: []string{"localhost", "127.0.0.1"}})
}

func (e *env) config() Config {
	return Config{Name: "tls", CertFile: e.certFile, KeyFile: e.keyFile, ClientCAFile: e.clientCA,
		Logger: slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnLoad: func(ev LoadEvent) { e.mu.Lock(); e.events = append(e.events, ev); e.mu.Unlock() }}
}

func (e *env) load() *Files {
	e.t.Helper()
	f, err := Load(e.config())
	if err != nil {
		e.t.Fatalf("Load: %v", err)
	}
	return f
}

func (e *env) failures() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.events {
		if !ev.OK {
			n++
		}
	}
	return n
}

// write replaces a file's content in place.
func write(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// serve accepts TLS connections with f's config until the test ends; each
// connection that completes its handshake is answered "ok".
func serve(t *testing.T, f *Files) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", f.ServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				if c.(*tls.Conn).Handshake() == nil {
					io.WriteString(c, "ok")
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// dial connects with cfg and reads the server's answer: it returns the
// certificate the server presented, and an error when the handshake, or
// (TLS 1.3 checks a client certificate after the client's side is done) the
// first read, failed.
func dial(addr string, cfg *tls.Config) (*x509.Certificate, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil {
		return nil, err
	}
	if string(b) != "ok" {
		return nil, errors.New("no answer")
	}
	return c.ConnectionState().PeerCertificates[0], nil
}

func (e *env) client() *tls.Config {
	return &tls.Config{RootCAs: e.ca.Pool(), ServerName: "localhost"}
}

func TestLoadAndServe(t *testing.T) {
	e := newEnv(t)
	f := e.load()
	addr := serve(t, f)
	got, err := dial(addr, e.client())
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(f.Certificate()) {
		t.Error("the server presented another certificate")
	}
	if f.MutualTLS() {
		t.Error("MutualTLS without a client CA")
	}
	if len(e.events) != 1 || !e.events[0].OK || !e.events[0].NotAfter.Equal(f.Certificate().NotAfter) {
		t.Errorf("load events %+v", e.events)
	}
	// TLS 1.1 and below are refused; TLS 1.2 and 1.3 are served.
	old := e.client()
	old.MinVersion, old.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
	if _, err := dial(addr, old); err == nil {
		t.Error("a TLS 1.1 client was served")
	}
	for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		c := e.client()
		c.MinVersion, c.MaxVersion = v, v
		if _, err := dial(addr, c); err != nil {
			t.Errorf("TLS version %x: %v", v, err)
		}
	}
}

// TestLoadCombinedFile: the key may be in the certificate file.
func TestLoadCombinedFile(t *testing.T) {
	e := newEnv(t)
	l := e.issue()
	both := filepath.Join(e.dir, "both.pem")
	write(t, both, append(append([]byte{}, l.KeyPEM...), l.CertPEM...))
	e.certFile, e.keyFile = both, both
	if f := e.load(); !f.Certificate().Equal(l.Cert) {
		t.Error("wrong certificate")
	}
}

// TestLoadRefused: what Load refuses, each error naming the field.
func TestLoadRefused(t *testing.T) {
	e := newEnv(t)
	other := e.issue()
	otherCert, otherKey := other.Write(t, e.dir, "other")
	past := e.ca.Issue(t, testnet.LeafOptions{Hosts: []string{"localhost"}, NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Minute)})
	expiredCert, expiredKey := past.Write(t, e.dir, "expired")
	future := e.ca.Issue(t, testnet.LeafOptions{Hosts: []string{"localhost"}, NotBefore: time.Now().Add(time.Hour)})
	futureCert, futureKey := future.Write(t, e.dir, "future")
	empty := filepath.Join(e.dir, "empty.pem")
	write(t, empty, nil)
	big := filepath.Join(e.dir, "big.pem")
	write(t, big, bytes.Repeat([]byte("A"), keyfile.MaxFileSize+1))
	garbage := filepath.Join(e.dir, "garbage.pem")
	write(t, garbage, []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
	tests := []struct {
		name          string
		cert, key, ca string
		field         string
		is            error
		want          string
	}{
		{"no cert file", "", e.keyFile, "", "tls.cert_file", nil, "is required"},
		{"no key file", e.certFile, "", "", "tls.key_file", nil, "is required"},
		{"missing cert file", filepath.Join(e.dir, "nope.crt"), e.keyFile, "", "tls.cert_file", os.ErrNotExist, "nope.crt"},
		{"missing key file", e.certFile, filepath.Join(e.dir, "nope.key"), "", "tls.key_file", os.ErrNotExist, "nope.key"},
		{"a directory", e.dir, e.keyFile, "", "tls.cert_file", nil, "is a directory"},
		{"key that does not match", e.certFile, otherKey, "", "tls.key_file", nil, "does not match"},
		{"certificate and key swapped", e.keyFile, e.certFile, "", "tls.cert_file", ErrNoCertificate, ""},
		{"empty certificate file", empty, e.keyFile, "", "tls.cert_file", ErrNoCertificate, ""},
		{"certificate that does not parse", garbage, e.keyFile, "", "tls.cert_file", nil, "certificate 1"},
		{"too large", big, e.keyFile, "", "tls.cert_file", keyfile.ErrTooLarge, ""},
		{"expired", expiredCert, expiredKey, "", "tls.cert_file", ErrExpired, "not after"},
		{"not valid for an hour", futureCert, futureKey, "", "tls.cert_file", ErrNotYetValid, "not before"},
		{"client CA file without a certificate", otherCert, otherKey, e.keyFile, "tls.client_ca_file", ErrNoCertificate, ""},
		{"missing client CA file", otherCert, otherKey, filepath.Join(e.dir, "nope-ca.pem"), "tls.client_ca_file", os.ErrNotExist, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := e.config()
			c.CertFile, c.KeyFile, c.ClientCAFile = tt.cert, tt.key, tt.ca
			_, err := Load(c)
			if err == nil {
				t.Fatal("loaded")
			}
			if !strings.HasPrefix(err.Error(), tt.field+": ") {
				t.Errorf("error does not name %s: %v", tt.field, err)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error is not %v: %v", tt.is, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error lacks %q: %v", tt.want, err)
			}
		})
	}
}

// TestLoadNotBeforeLeeway: a certificate valid from a minute from now
// (another clock a little ahead) is put in force.
func TestLoadNotBeforeLeeway(t *testing.T) {
	e := newEnv(t)
	l := e.ca.Issue(t, testnet.LeafOptions{Hosts: []string{"localhost"}, NotBefore: time.Now().Add(time.Minute)})
	e.certFile, e.keyFile = l.Write(t, e.dir, "soon")
	e.load()
}

// TestLoadUnreadable: a file the process may not read is refused, naming
// the field (root reads every file, so this runs as another user only).
func TestLoadUnreadable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("running as root, which reads a file of any mode")
	}
	e := newEnv(t)
	if err := os.Chmod(e.keyFile, 0); err != nil {
		t.Fatal(err)
	}
	_, err := Load(e.config())
	if err == nil || !errors.Is(err, os.ErrPermission) || !strings.HasPrefix(err.Error(), "tls.key_file: ") {
		t.Fatalf("got %v", err)
	}
}

// TestWorldReadableKeyWarns: a key file every user may read is served,
// with a warning.
func TestWorldReadableKeyWarns(t *testing.T) {
	e := newEnv(t)
	if err := os.Chmod(e.keyFile, 0o644); err != nil {
		t.Fatal(err)
	}
	e.load()
	if !strings.Contains(e.logs.String(), "readable by every user") {
		t.Errorf("no warning:\n%s", e.logs)
	}
}

// TestPollRotates: new handshakes get a new certificate once Poll has
// read it, whether written in place or renamed over the old file.
func TestPollRotates(t *testing.T) {
	e := newEnv(t)
	f := e.load()
	addr := serve(t, f)
	if err := f.Poll(); err != nil {
		t.Fatalf("Poll with nothing changed: %v", err)
	}
	if len(e.events) != 1 {
		t.Errorf("a poll with nothing changed reported a load: %+v", e.events)
	}
	// In place.
	l2 := e.issue()
	write(t, e.certFile, l2.CertPEM)
	write(t, e.keyFile, l2.KeyPEM)
	if err := f.Poll(); err != nil {
		t.Fatal(err)
	}
	if got, err := dial(addr, e.client()); err != nil || !got.Equal(l2.Cert) {
		t.Fatalf("after an in-place rotation: %v, same certificate %v", err, got != nil && got.Equal(l2.Cert))
	}
	// Renamed into place, as Kubernetes and configuration management do.
	l3 := e.issue()
	c3, k3 := l3.Write(t, e.dir, "next")
	if err := os.Rename(c3, e.certFile); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(k3, e.keyFile); err != nil {
		t.Fatal(err)
	}
	if err := f.Poll(); err != nil {
		t.Fatal(err)
	}
	if got, err := dial(addr, e.client()); err != nil || !got.Equal(l3.Cert) {
		t.Fatalf("after a rename: %v", err)
	}
	if !strings.Contains(e.logs.String(), "certificate files changed") || !strings.Contains(e.logs.String(), l3.Cert.SerialNumber.Text(16)) {
		t.Errorf("rotation not logged with the new serial:\n%s", e.logs)
	}
}

// TestPollHalfWritten: a poll that reads the new certificate beside the
// old key reports nothing; the next, after the key is written, loads both.
func TestPollHalfWritten(t *testing.T) {
	e := newEnv(t)
	f := e.load()
	l2 := e.issue()
	write(t, e.certFile, l2.CertPEM)
	if err := f.Poll(); err != nil {
		t.Fatalf("half a rotation reported: %v", err)
	}
	if f.Certificate().Equal(l2.Cert) {
		t.Fatal("half a rotation put in force")
	}
	write(t, e.keyFile, l2.KeyPEM)
	if err := f.Poll(); err != nil {
		t.Fatal(err)
	}
	if !f.Certificate().Equal(l2.Cert) {
		t.Fatal("the completed rotation is not in force")
	}
	if e.failures() != 0 || strings.Contains(e.logs.String(), "level=ERROR") {
		t.Errorf("a rotation in two writes was reported as a failure:\n%s", e.logs)
	}
}

// TestPollBroken: a bad pair keeps the certificate in force; it is
// reported on its second poll, once, and a fixed pair loads at once.
func TestPollBroken(t *testing.T) {
	e := newEnv(t)
	f := e.load()
	addr := serve(t, f)
	first := f.Certificate()
	cases := []struct {
		name string
		cert []byte
		key  []byte
		is   error
	}{
		{"key that does not match", nil, e.issue().KeyPEM, nil},
		{"expired", nil, nil, ErrExpired},
		{"not PEM", []byte("not a certificate"), nil, ErrNoCertificate},
	}
	expired := e.ca.Issue(t, testnet.LeafOptions{Hosts: []string{"localhost"}, NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
	cases[1].cert, cases[1].key = expired.CertPEM, expired.KeyPEM
	orig, _ := os.ReadFile(e.certFile)
	origKey, _ := os.ReadFile(e.keyFile)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.cert != nil {
				write(t, e.certFile, c.cert)
			}
			if c.key != nil {
				write(t, e.keyFile, c.key)
			}
			if err := f.Poll(); err != nil {
				t.Fatalf("reported on the first poll: %v", err)
			}
			err := f.Poll()
			if err == nil || (c.is != nil && !errors.Is(err, c.is)) {
				t.Fatalf("second poll: %v", err)
			}
			for range 3 {
				if err := f.Poll(); err != nil {
					t.Fatalf("the same broken files reported again: %v", err)
				}
			}
			if e.failures() != i+1 {
				t.Errorf("%d failures reported, want %d", e.failures(), i+1)
			}
			if got, err := dial(addr, e.client()); err != nil || !got.Equal(first) {
				t.Fatalf("the certificate in force stopped serving: %v", err)
			}
			write(t, e.certFile, orig)
			write(t, e.keyFile, origKey)
			if err := f.Poll(); err != nil {
				t.Fatal(err)
			}
		})
	}
	if n := strings.Count(e.logs.String(), "failed to load"); n != len(cases) {
		t.Errorf("%d error lines for %d broken contents:\n%s", n, len(cases), e.logs)
	}
	// A fixed pair loads on the first poll that sees it.
	l2 := e.issue()
	write(t, e.certFile, l2.CertPEM)
	write(t, e.keyFile, l2.KeyPEM)
	if err := f.Poll(); err != nil || !f.Certificate().Equal(l2.Cert) {
		t.Fatalf("a good pair after broken ones: %v", err)
	}
}

// TestMutualTLS: with a client CA, a handshake needs a client certificate
// from that CA; the CA file is followed like the pair.
func TestMutualTLS(t *testing.T) {
	e := newEnv(t)
	clientCA, otherCA := testnet.NewCA(t, "client CA"), testnet.NewCA(t, "other CA")
	e.clientCA = clientCA.WriteCA(t, e.dir, "clients.pem")
	f := e.load()
	if !f.MutualTLS() {
		t.Error("MutualTLS false")
	}
	addr := serve(t, f)
	withCert := func(ca *testnet.CA, client bool) *tls.Config {
		c := e.client()
		c.Certificates = []tls.Certificate{ca.Issue(t, testnet.LeafOptions{Hosts: []string{"operator"}, Client: client}).TLSCertificate(t)}
		return c
	}
	if _, err := dial(addr, withCert(clientCA, true)); err != nil {
		t.Fatalf("client certificate from the client CA: %v", err)
	}
	for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		c := e.client()
		c.MaxVersion = v
		if _, err := dial(addr, c); err == nil {
			t.Errorf("TLS %x: served a client without a certificate", v)
		}
		c = withCert(otherCA, true)
		c.MaxVersion = v
		if _, err := dial(addr, c); err == nil {
			t.Errorf("TLS %x: served a client certificate from another CA", v)
		}
	}
	if _, err := dial(addr, withCert(clientCA, false)); err == nil {
		t.Error("served a certificate not meant for clients (server auth only)")
	}
	// No resumption: a session the client caches is not resumed, so every
	// connection's client certificate is checked against the CAs in force.
	c := withCert(clientCA, true)
	c.ClientSessionCache = tls.NewLRUClientSessionCache(4)
	for range 2 {
		conn, err := tls.Dial("tcp", addr, c)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(conn)
		if conn.ConnectionState().DidResume {
			t.Error("a session was resumed")
		}
		conn.Close()
	}
	// The CA file replaced: the old CA's clients are refused from the next
	// handshake, the new one's served.
	write(t, e.clientCA, otherCA.PEM)
	if err := f.Poll(); err != nil {
		t.Fatal(err)
	}
	if _, err := dial(addr, withCert(clientCA, true)); err == nil {
		t.Error("a client of the removed CA was served")
	}
	if _, err := dial(addr, withCert(otherCA, true)); err != nil {
		t.Errorf("a client of the new CA: %v", err)
	}
}
