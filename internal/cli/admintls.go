package cli

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/keygate/keygate/internal/tlscert"
)

// adminTLSFlags say how the admin commands reach an admin listener that
// serves TLS: the CAs its certificate chains to (default the system's, or
// SSL_CERT_FILE), and the client certificate it requires with
// admin_tls.client_ca_file.
type adminTLSFlags struct {
	caFile, certFile, keyFile string
}

func (f *adminTLSFlags) register(fs *flagSet) {
	fs.StringVar(&f.caFile, "admin-ca", "", "CA certificates `file` (PEM) the admin listener's certificate chains to (default the system's)")
	fs.StringVar(&f.certFile, "admin-cert", "", "client certificate `file` (PEM) for an admin listener that requires one (admin_tls.client_ca_file)")
	fs.StringVar(&f.keyFile, "admin-key", "", "private key `file` of --admin-cert")
}

// client returns the HTTP client for the admin listener.
func (f *adminTLSFlags) client() (*http.Client, error) {
	if f.caFile == "" && f.certFile == "" && f.keyFile == "" {
		return httpClient, nil
	}
	tc, err := tlscert.ClientConfig(f.caFile, f.certFile, f.keyFile)
	if err != nil {
		return nil, fmt.Errorf("--admin-ca, --admin-cert, --admin-key: %w", err)
	}
	// HTTP/1.1: an HTTP/2 client hides why a handshake failed.
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}, nil
}

// send sends req to the admin listener and decodes its JSON answer into
// out (see doJSON). A request that failed in TLS gets what to do added to
// its error: a plain-HTTP URL for a listener that speaks HTTPS, or no
// client certificate for one that requires it.
func (f *adminTLSFlags) send(req *http.Request, out any) error {
	c, err := f.client()
	if err != nil {
		return err
	}
	err = sendJSON(c, req, out)
	// A TLS alert from the server arrives as a *net.OpError with Op
	// "remote error" (crypto/tls); in TLS 1.3 a refused client
	// certificate is reported so, on the first read.
	var oe *net.OpError
	var se *statusError
	switch {
	case errors.As(err, &oe) && oe.Op == "remote error" && f.certFile == "":
		return fmt.Errorf("%w (the admin listener may require a client certificate: give --admin-cert and --admin-key)", err)
	case errors.As(err, &se) && se.status == http.StatusBadRequest && req.URL.Scheme == "http" && string(se.body) == httpToHTTPS:
		return fmt.Errorf("%s: the admin listener serves HTTPS: use --admin https://%s", req.URL.Path, req.URL.Host)
	}
	return err
}

// httpToHTTPS is what net/http answers a plain HTTP request to a TLS
// listener.
const httpToHTTPS = "Client sent an HTTP request to an HTTPS server.\n"
