// Package tlscert serves a listener's TLS certificate from PEM files and
// follows their changes without dropping a connection.
//
// [Load] reads a certificate chain and its private key (and, for mutual TLS,
// a file of client CA certificates) and builds an immutable [tls.Config]
// from them. [Files.ServerConfig] is the config to serve with: its
// GetConfigForClient hands every new handshake the config in force, so a
// connection already set up keeps the certificate it was set up with and
// every handshake after a change gets the new one. [Files.Poll] reads the
// files again and swaps in a new config when their content changed (by
// SHA-256, so an edit in place, an atomic rename and a same-size edit that
// keeps the modification time are all seen). [ClientConfig] is the other
// side: a client's config from a CA file and a client certificate, read once.
//
// # What is never put in force
//
// A pair that does not load never replaces the one in force: a file that
// cannot be read or is over [keyfile.MaxFileSize], a certificate file
// without a certificate, a key that does not match the certificate, a
// certificate that has expired or whose validity starts more than
// [NotBeforeLeeway] from now, a client CA file without a certificate. At start ([Load]) that is an error
// naming the configuration field ("admin_tls.key_file: ..."); found by Poll,
// it is logged once per broken content and reported to OnLoad, and the files
// are read again as soon as they change. Because a certificate and its key
// are usually written one after the other, a content that fails to load is
// given one more poll before it is reported: a rotation caught between its
// two writes is not an error.
//
// # Security properties
//
// TLS 1.2 and 1.3 only, with Go's default cipher suites, curves and
// signature algorithms (no list of keygate's own). With a client CA file
// every handshake must present a certificate that chains to one of its
// certificates ([tls.RequireAndVerifyClientCert]) and TLS session resumption
// is off, so each connection is verified against the CAs in force, and a CA
// removed from the file admits no resumed session afterwards. The private key
// stays in memory only inside the [tls.Certificate]; it is never logged.
package tlscert

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keygate/keygate/internal/keyfile"
)

// NotBeforeLeeway is how far in the future a certificate's validity may
// start and still be put in force: issuers' and this host's clocks differ
// by a little, and most CAs backdate certificates anyway.
const NotBeforeLeeway = 5 * time.Minute

// Sentinel errors, wrapped in the errors Load, Poll and ClientConfig return.
var (
	// ErrExpired: the certificate's validity ended before now.
	ErrExpired = errors.New("the certificate has expired")
	// ErrNotYetValid: the certificate's validity starts more than
	// NotBeforeLeeway from now.
	ErrNotYetValid = errors.New("the certificate is not valid yet")
	// ErrNoCertificate: a file meant to hold certificates holds none.
	ErrNoCertificate = errors.New("no PEM CERTIFICATE block")
	// ErrUnpaired: a client certificate without its key, or a key
	// without its certificate.
	ErrUnpaired = errors.New("a client certificate and its private key go together")
)

// Config says which files to serve and how.
type Config struct {
	// Name is the configuration section the files come from ("tls",
	// "admin_tls"): errors name the field as Name.cert_file and so on.
	Name string
	// CertFile holds the certificate and then any intermediates (PEM);
	// KeyFile its private key (PEM: PKCS #1, PKCS #8 or SEC 1). They may be
	// one file.
	CertFile, KeyFile string
	// ClientCAFile, if set, holds the CA certificates (PEM) client
	// certificates must chain to; every handshake must present one.
	ClientCAFile string
	// NextProtos are the ALPN protocols offered, in order of preference
	// (an http.Server needs "h2" here to speak HTTP/2).
	NextProtos []string
	// Logger receives certificate changes at Info and failed loads at
	// Error (default slog.Default()).
	Logger *slog.Logger
	// Now is the clock validity is checked against and client certificates
	// are verified with (default time.Now).
	Now func() time.Time
	// OnLoad, if set, is called after Load's load and every load Poll
	// reports, successful or not. It must not block.
	OnLoad func(LoadEvent)
}

// LoadEvent reports one load to metrics.
type LoadEvent struct {
	OK       bool
	NotAfter time.Time // the end of the validity of the certificate in force after the load
}

// Files is a listener's certificate, read from files and read again by
// Poll. Its methods are safe for concurrent use.
type Files struct {
	cfg  Config
	base *tls.Config
	cur  atomic.Pointer[loaded]

	mu      sync.Mutex // one load at a time; guards what follows
	sums    sums       // the content of the last load reported, good or bad
	pending *sums      // a content that failed once and gets one more poll
}

// loaded is one good load: the config handed to handshakes and its leaf.
type loaded struct {
	config *tls.Config
	leaf   *x509.Certificate
}

// sums identifies the files' content: each file's SHA-256, or missing.
type sums [3]struct {
	sum     [sha256.Size]byte
	missing bool
}

// Load reads the files and returns them ready to serve; it fails, naming
// the field at fault, unless they load (see the package documentation).
func Load(cfg Config) (*Files, error) {
	switch {
	case cfg.CertFile == "":
		return nil, fmt.Errorf("%s.cert_file: is required", cfg.Name)
	case cfg.KeyFile == "":
		return nil, fmt.Errorf("%s.key_file: is required", cfg.Name)
	}
	cfg.NextProtos = slices.Clone(cfg.NextProtos)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	f := &Files{cfg: cfg}
	f.base = &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: cfg.NextProtos,
		Time:       cfg.Now,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return f.cur.Load().config, nil
		},
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	data, s := f.read()
	l, err := f.build(data)
	data.clear()
	f.sums = s
	if err != nil {
		return nil, err
	}
	f.install(l)
	return f, nil
}

// ServerConfig returns a config to serve with (http.Server.TLSConfig, or
// tls.NewListener): every handshake gets the certificate in force. Each
// call returns a new one, since http.Server.ServeTLS changes the one it is
// given.
func (f *Files) ServerConfig() *tls.Config { return f.base.Clone() }

// MutualTLS reports whether handshakes must present a client certificate.
func (f *Files) MutualTLS() bool { return f.cfg.ClientCAFile != "" }

// Poll reads the files and, if their content differs from the last load's,
// loads them. It returns the error of a load it reports, and nil when
// nothing changed, the new files are in force, or a failed content waits
// for its second poll.
func (f *Files) Poll() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	data, s := f.read()
	defer data.clear()
	if s == f.sums {
		f.pending = nil
		return nil
	}
	l, err := f.build(data)
	if err == nil {
		f.sums, f.pending = s, nil
		f.install(l)
		return nil
	}
	if f.pending == nil || *f.pending != s {
		// Perhaps half a rotation: the certificate written and not yet the
		// key. Look again on the next poll before calling it an error.
		f.pending = &s
		f.cfg.Logger.Debug("tls: certificate files changed but do not load yet; reading them again on the next poll", "err", err)
		return nil
	}
	f.sums, f.pending = s, nil
	old := f.cur.Load().leaf
	f.cfg.Logger.Error("tls: certificate files failed to load; the certificate in force keeps serving",
		"err", err, "serving_serial", old.SerialNumber.Text(16), "serving_not_after", old.NotAfter)
	f.report(LoadEvent{OK: false, NotAfter: old.NotAfter})
	return err
}

func (f *Files) paths() [3]string {
	return [3]string{f.cfg.CertFile, f.cfg.KeyFile, f.cfg.ClientCAFile}
}

// files are the contents read, or why a file could not be read.
type files [3]readResult

// clear overwrites what was read: the key file's PEM (or a combined
// file's); the key itself lives on in the tls.Certificate only.
func (d *files) clear() {
	for i := range d {
		clear(d[i].b)
	}
}

// read returns the files' contents (an error in place of one that could
// not be read) and their sums.
func (f *Files) read() (data files, s sums) {
	for i, p := range f.paths() {
		if p == "" {
			continue
		}
		b, err := keyfile.Read(p)
		if err != nil {
			data[i].err, s[i].missing = err, true
			continue
		}
		data[i].b, s[i].sum = b, sha256.Sum256(b)
	}
	return data, s
}

type readResult struct {
	b   []byte
	err error
}

// build parses what read returned into a config to put in force.
func (f *Files) build(data files) (*loaded, error) {
	field := func(name string, err error) error { return fmt.Errorf("%s.%s: %w", f.cfg.Name, name, err) }
	for i, name := range []string{"cert_file", "key_file", "client_ca_file"} {
		if data[i].err != nil {
			return nil, field(name, data[i].err)
		}
	}
	chain, err := parseCertificates(data[0].b)
	if err != nil {
		return nil, field("cert_file", fmt.Errorf("%s: %w", f.cfg.CertFile, err))
	}
	leaf := chain[0]
	now := f.cfg.Now()
	switch {
	case now.After(leaf.NotAfter):
		return nil, field("cert_file", fmt.Errorf("%s: %w (not after %s)", f.cfg.CertFile, ErrExpired, leaf.NotAfter.UTC().Format(time.RFC3339)))
	case leaf.NotBefore.After(now.Add(NotBeforeLeeway)):
		return nil, field("cert_file", fmt.Errorf("%s: %w (not before %s)", f.cfg.CertFile, ErrNotYetValid, leaf.NotBefore.UTC().Format(time.RFC3339)))
	}
	// The certificate file parsed, so what X509KeyPair finds wrong is the
	// key: none, unparsable, or not the certificate's.
	pair, err := tls.X509KeyPair(data[0].b, data[1].b)
	if err != nil {
		return nil, field("key_file", fmt.Errorf("%s (for the certificate in %s): %w", f.cfg.KeyFile, f.cfg.CertFile, err))
	}
	pair.Leaf = leaf
	c := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{pair},
		NextProtos:   f.cfg.NextProtos,
		Time:         f.cfg.Now,
	}
	if f.cfg.ClientCAFile != "" {
		pool, err := certPool(data[2].b)
		if err != nil {
			return nil, field("client_ca_file", fmt.Errorf("%s: %w", f.cfg.ClientCAFile, err))
		}
		c.ClientAuth, c.ClientCAs, c.SessionTicketsDisabled = tls.RequireAndVerifyClientCert, pool, true
	}
	return &loaded{config: c, leaf: leaf}, nil
}

// ClientConfig is the config of a TLS client (TLS 1.2 at least): it
// verifies the server's certificate against the CA certificates (PEM) in
// caFile, or the system's when caFile is "", and presents the certificate
// in certFile with its private key in keyFile, or none when both are "".
// Every file is read at once; the key's PEM is cleared once parsed. A
// certificate without its key, or a key without its certificate, is
// [ErrUnpaired].
func ClientConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		b, err := keyfile.Read(caFile)
		if err != nil {
			return nil, err
		}
		if tc.RootCAs, err = certPool(b); err != nil {
			return nil, fmt.Errorf("%s: %w", caFile, err)
		}
	}
	if (certFile == "") != (keyFile == "") {
		return nil, fmt.Errorf("%w (certificate %q, key %q)", ErrUnpaired, certFile, keyFile)
	}
	if certFile == "" {
		return tc, nil
	}
	certPEM, err := keyfile.Read(certFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := keyfile.Read(keyFile)
	if err != nil {
		return nil, err
	}
	defer clear(keyPEM)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s, %s: %w", certFile, keyFile, err)
	}
	tc.Certificates = []tls.Certificate{pair}
	return tc, nil
}

// certPool is a pool of every certificate of a PEM file (see
// parseCertificates), for a server's ClientCAs or a client's RootCAs.
func certPool(b []byte) (*x509.CertPool, error) {
	cas, err := parseCertificates(b)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	for _, ca := range cas {
		pool.AddCert(ca)
	}
	return pool, nil
}

// parseCertificates parses every CERTIFICATE block of a PEM file, refusing
// a file with none or with one that does not parse. Other blocks (a private
// key in a combined file) are skipped.
func parseCertificates(b []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", len(out)+1, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, ErrNoCertificate
	}
	return out, nil
}

// install puts l in force and reports it. f.mu must be held.
func (f *Files) install(l *loaded) {
	old := f.cur.Swap(l)
	attrs := []any{"cert_file", f.cfg.CertFile, "serial", l.leaf.SerialNumber.Text(16),
		"subject", l.leaf.Subject.String(), "dns_names", l.leaf.DNSNames, "not_after", l.leaf.NotAfter}
	if old != nil {
		f.cfg.Logger.Info("tls: certificate files changed; new connections get the new certificate", attrs...)
	}
	if fi, err := os.Stat(f.cfg.KeyFile); err == nil && fi.Mode().Perm()&0o004 != 0 {
		f.cfg.Logger.Warn("tls: the private key file is readable by every user of this host; make it 0600 or 0640",
			"key_file", f.cfg.KeyFile, "mode", fi.Mode().Perm().String())
	}
	f.report(LoadEvent{OK: true, NotAfter: l.leaf.NotAfter})
}

func (f *Files) report(ev LoadEvent) {
	if f.cfg.OnLoad != nil {
		f.cfg.OnLoad(ev)
	}
}
