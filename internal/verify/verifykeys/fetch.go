package verifykeys

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Fetch results, as FetchError.Result and FetchEvent.Result report them.
const (
	ResultOK           = "ok"
	ResultHTTPError    = "http_error"    // a status other than 200
	ResultTimeout      = "timeout"       // the fetch took longer than its timeout
	ResultTooLarge     = "too_large"     // the body exceeded its limit
	ResultBadJSON      = "bad_json"      // not a JWKS (or discovery document) at all
	ResultNoKeys       = "no_keys"       // a JWKS without one usable key
	ResultNetwork      = "network"       // connection refused, DNS, TLS, reset...
	ResultBadDiscovery = "bad_discovery" // issuer mismatch, missing or insecure jwks_uri
)

var (
	// ErrTooLarge is the cause of a fetch whose body exceeds its limit.
	ErrTooLarge = errors.New("response body too large")
	// ErrNoKeys is the cause of a fetch whose JWKS holds no usable key.
	ErrNoKeys = errors.New("JWKS has no usable key")
	// ErrIssuerMismatch is the cause of a discovery document naming another
	// issuer than the one configured.
	ErrIssuerMismatch = errors.New("discovery document names another issuer")
	// ErrInsecureURL refuses a URL that is neither https nor http to a
	// loopback host.
	ErrInsecureURL = errors.New("URL must be https unless its host is a loopback address")
	// ErrClosed is returned by Start after Close.
	ErrClosed = errors.New("key source closed")
)

// FetchError is a failed JWKS or discovery fetch. Result classifies it for
// metrics; Err, when set, is the cause (a transport error, a jose error, or
// one of this package's sentinels).
type FetchError struct {
	URL        string // the URL fetched, with any password redacted
	Result     string // one of the Result constants, never ResultOK
	StatusCode int    // the HTTP status, for ResultHTTPError
	Err        error
}

func (e *FetchError) Error() string {
	if e.Result == ResultHTTPError && e.StatusCode != 0 {
		return fmt.Sprintf("GET %s: status %d", e.URL, e.StatusCode)
	}
	if e.Err == nil {
		return fmt.Sprintf("GET %s: %s", e.URL, e.Result)
	}
	return fmt.Sprintf("GET %s: %s: %v", e.URL, e.Result, e.Err)
}

func (e *FetchError) Unwrap() error { return e.Err }

// resultOf returns the Result that err stands for.
func resultOf(err error) string {
	if err == nil {
		return ResultOK
	}
	if fe := (*FetchError)(nil); errors.As(err, &fe) {
		return fe.Result
	}
	return ResultNetwork
}

const (
	userAgent = "keygate"
	// maxDiscoveryBody caps a discovery document.
	maxDiscoveryBody = 1 << 20
	// maxErrorDrain is how much of a non-200 body is read so that the
	// connection can be reused; a longer one closes the connection.
	maxErrorDrain = 4 << 10
)

// get fetches rawURL and returns its body, at most maxBody bytes, and the
// response header. Every error is a *FetchError. A body over maxBody is not
// read further: closing the unread body closes the connection.
func get(ctx context.Context, client *http.Client, rawURL string, maxBody int64) ([]byte, http.Header, error) {
	shown := redact(rawURL)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, nil, &FetchError{URL: shown, Result: ResultNetwork, Err: err}
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent)
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, &FetchError{URL: shown, Result: classify(ctx, err), Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.CopyN(io.Discard, resp.Body, maxErrorDrain)
		return nil, nil, &FetchError{URL: shown, Result: ResultHTTPError, StatusCode: resp.StatusCode}
	}
	if resp.ContentLength > maxBody {
		return nil, nil, &FetchError{URL: shown, Result: ResultTooLarge, Err: ErrTooLarge}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return nil, nil, &FetchError{URL: shown, Result: classify(ctx, err), Err: err}
	}
	if int64(len(body)) > maxBody {
		return nil, nil, &FetchError{URL: shown, Result: ResultTooLarge, Err: ErrTooLarge}
	}
	return body, resp.Header, nil
}

// classify tells a timeout from other transport failures.
func classify(ctx context.Context, err error) string {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return ResultTimeout
	}
	if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		return ResultTimeout
	}
	return ResultNetwork
}

// redact hides a password in a URL before it is logged or reported.
func redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(invalid URL)"
	}
	return u.Redacted()
}

// CheckURL accepts an absolute https URL, or an http URL whose host is a
// loopback address (tests, local identity providers).
func CheckURL(rawURL string) (*url.URL, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			err = ue.Err // without the URL, which may hold a password
		}
		return nil, fmt.Errorf("invalid URL: %w", err)
	}
	if u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("%s is not an absolute http(s) URL", u.Redacted())
	}
	if u.Scheme == "http" && !isLoopback(u.Hostname()) {
		return nil, fmt.Errorf("%s: %w", u.Redacted(), ErrInsecureURL)
	}
	return u, nil
}

// isLoopback reports whether host is a loopback IP address or "localhost".
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// newClient returns an HTTP client with bounded dialing, TLS handshake and
// header waits, TLS 1.2 or later, and redirects limited to five that stay on
// https (or loopback http).
func newClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = 5 * time.Second
	t.ResponseHeaderTimeout = 10 * time.Second
	t.IdleConnTimeout = 90 * time.Second
	t.MaxIdleConnsPerHost = 2
	t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	return &http.Client{
		Transport: t,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return errors.New("stopped after 5 redirects")
			}
			_, err := CheckURL(req.URL.String())
			return err
		},
	}
}

// sharedClient serves Discover calls that pass no client.
var sharedClient = sync.OnceValue(newClient)
