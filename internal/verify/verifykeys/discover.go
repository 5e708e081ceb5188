package verifykeys

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// wellKnown is the OpenID Connect discovery path (Discovery 1.0 §4).
const wellKnown = "/.well-known/openid-configuration"

// discoveryURL is where issuer's discovery document lives.
func discoveryURL(issuer string) string {
	return strings.TrimSuffix(issuer, "/") + wellKnown
}

// Discover fetches issuer's OpenID Connect discovery document and returns
// its jwks_uri. The issuer must be https, or http to a loopback host; the
// document is read up to 1 MiB, must name exactly issuer as its "issuer"
// (Discovery 1.0 §4.3: no trailing-slash or case folding), and its jwks_uri
// must be https too, or http to a loopback host. ctx bounds the whole
// exchange; a nil client uses one with sane transport timeouts. Every
// failure is a *FetchError.
func Discover(ctx context.Context, client *http.Client, issuer string) (string, error) {
	if client == nil {
		client = sharedClient()
	}
	if err := checkIssuer(issuer); err != nil {
		return "", err
	}
	where := discoveryURL(issuer)
	body, _, err := get(ctx, client, where, maxDiscoveryBody)
	if err != nil {
		return "", err
	}
	shown := redact(where)
	var doc struct {
		Issuer  *string `json:"issuer"`
		JWKSURI *string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return "", &FetchError{URL: shown, Result: ResultBadJSON, Err: err}
	}
	switch {
	case doc.Issuer == nil:
		return "", &FetchError{URL: shown, Result: ResultBadDiscovery, Err: errors.New(`no "issuer"`)}
	case *doc.Issuer != issuer:
		// The document's issuer is public and may be of any length; it is
		// quoted, not trusted.
		return "", &FetchError{URL: shown, Result: ResultBadDiscovery,
			Err: fmt.Errorf("%w: %.200q, want %q", ErrIssuerMismatch, *doc.Issuer, issuer)}
	case doc.JWKSURI == nil || *doc.JWKSURI == "":
		return "", &FetchError{URL: shown, Result: ResultBadDiscovery, Err: errors.New(`no "jwks_uri"`)}
	}
	if _, err := CheckURL(*doc.JWKSURI); err != nil {
		return "", &FetchError{URL: shown, Result: ResultBadDiscovery, Err: fmt.Errorf("jwks_uri: %w", err)}
	}
	return *doc.JWKSURI, nil
}

// checkIssuer accepts an issuer identifier: an https URL (or http to a
// loopback host) without query or fragment (Discovery 1.0 §2).
func checkIssuer(issuer string) error {
	u, err := CheckURL(issuer)
	if err != nil {
		return fmt.Errorf("issuer URL: %w", err)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("issuer %s has a query, fragment or user info", u.Redacted())
	}
	return nil
}

// NewDiscovered returns a Remote whose JWKS URL is found by discovery from
// issuer; cfg.URL must be empty. Its Start discovers first, retrying with
// the fetch backoff until ctx ends, then fetches the keys as any Remote.
// The jwks_uri, once found, is kept until rediscoverAfter fetches from it in
// a row fail; the next attempt then discovers it again, so a provider that
// moves its keys is followed.
func NewDiscovered(issuer string, cfg RemoteConfig) (*Remote, error) {
	if cfg.URL != "" {
		return nil, errors.New("a discovered source takes no URL")
	}
	if err := checkIssuer(issuer); err != nil {
		return nil, err
	}
	return newRemote(cfg, issuer)
}

// Open makes and starts an issuer's remote source: by OIDC discovery of
// issuer when discovery is set, else from cfg.URL. It waits for the first
// fetch (bounded by the fetch timeout and ctx); if that fails the source
// keeps trying in the background, and the failure is only logged, since
// the source reports itself not ready until it has keys. It fails only
// when the configuration is refused or the source was closed.
func Open(ctx context.Context, issuer string, discovery bool, cfg RemoteConfig) (*Remote, error) {
	var r *Remote
	var err error
	if discovery {
		r, err = NewDiscovered(issuer, cfg)
	} else {
		r, err = NewRemote(cfg)
	}
	if err != nil {
		return nil, err
	}
	r.spanIss = issuer
	if err := r.Start(ctx); err != nil {
		if errors.Is(err, ErrClosed) {
			return nil, err
		}
		r.log.Warn("issuer keys not loaded yet; retrying in the background", "err", err) // the logger names the issuer
	}
	return r, nil
}
