package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/keygate/keygate/internal/operr"
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
	case se != nil && se.status == http.StatusUnauthorized && req.Header.Get("Authorization") != "" &&
		strings.Contains(se.header.Get("WWW-Authenticate"), `realm="keygate-admin"`):
		// The listener answers a wrong token as it answers none; the CLI
		// always sends one, so it was refused.
		return operr.Errorf("%s: 401: the admin token was refused (give the node's admin token: --admin-token-file FILE or KEYGATE_ADMIN_TOKEN; "+
			"dev mode writes it to <data_dir>/admin.token)", req.URL.Path)
	case se != nil && bareNotFound(se):
		if servesMetrics(c, req) {
			return operr.Errorf("%s: %d: the node at %s has no admin API (it runs no token service: a gateway-only node)", req.URL.Path, se.status, req.URL.Host)
		}
		hint := ""
		if _, port, _ := net.SplitHostPort(req.URL.Host); port != adminPort {
			hint = " (did you mean :" + adminPort + "?)"
		}
		return operr.Errorf("%s: %d: %s is not keygate's admin listener%s", req.URL.Path, se.status, req.URL.Host, hint)
	}
	return err
}

// adminPort is the default admin listener's port.
const adminPort = "9090"

// bareNotFound reports whether se is a 404 or 405 that is not the admin
// API's (which has an error code, or a request id as every authenticated
// admin request does): the traffic listener's, another server's, or the
// admin listener of a node without an admin API.
func bareNotFound(se *statusError) bool {
	return (se.status == http.StatusNotFound || se.status == http.StatusMethodNotAllowed) &&
		se.code == "" && se.header.Get("X-Request-Id") == ""
}

// servesMetrics reports whether the server req went to has /metrics, as
// keygate's admin listener has (answered, or refused without the metrics
// token) and its traffic listener has not.
func servesMetrics(c *http.Client, req *http.Request) bool {
	ctx, cancel := context.WithTimeout(req.Context(), 5*time.Second)
	defer cancel()
	u := *req.URL
	u.Path, u.RawQuery = "/metrics", ""
	probe, err := http.NewRequestWithContext(ctx, http.MethodHead, u.String(), nil)
	if err != nil {
		return false
	}
	resp, err := c.Do(probe)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized
}

// httpToHTTPS is what net/http answers a plain HTTP request to a TLS
// listener.
const httpToHTTPS = "Client sent an HTTP request to an HTTPS server.\n"
