// Package vaultauth authenticates a request to one of keygate's Vault-shaped
// APIs (transit, the KV secret store, Vault's sys and token endpoints): it
// reads the bearer token from Authorization: Bearer or X-Vault-Token,
// verifies it with the token service's own keys, and reads the caller's
// tenant from its tenant claim. Its refusals are Vault's 403, their text
// saying which problem it is and their code naming it for the audit record.
//
// Authenticate allocates nothing of its own, so that the transit API's hot
// path stays allocation-free.
package vaultauth

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/keygate/keygate/internal/httperr"
	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/verify"
	"github.com/keygate/keygate/jose"
)

// Verifier checks a bearer token: the token service's own tokens only
// (verify.Pipeline over the node's signing keys). An external identity
// provider's token could claim any tenant.
type Verifier interface {
	Verify(ctx context.Context, token string) (*verify.Result, error)
}

// Vault's 403 for each way a request fails to authenticate, its text saying
// which (Vault clients show it), its code the audit reason.
var (
	ErrNoToken = &httperr.Error{Status: http.StatusForbidden, Code: "no_token",
		Description: "permission denied: no token (send it as X-Vault-Token or Authorization: Bearer)"}
	ErrNotBearer = &httperr.Error{Status: http.StatusForbidden, Code: "malformed_authorization",
		Description: "permission denied: the Authorization header is not Bearer <token>"}
	ErrTwoTokens = &httperr.Error{Status: http.StatusForbidden, Code: "conflicting_tokens",
		Description: "permission denied: more than one token (X-Vault-Token and Authorization must carry the same one, once)"}
	ErrNoTenant = &httperr.Error{Status: http.StatusForbidden, Code: "no_tenant",
		Description: "permission denied: the token names no tenant (its tenant claim is missing or not a tenant name)"}
)

// Authenticate verifies the request's bearer token, from Authorization:
// Bearer or X-Vault-Token (the same token; a request carrying two that
// differ is refused), and returns it with the caller's tenant, read from
// its tenant claim (a token without one is refused). A refusal is an
// *httperr.Error (403); any other error is a failure of the verifier (a
// 500 to the caller).
func Authenticate(ctx context.Context, hdr http.Header, v Verifier) (*verify.Result, string, error) {
	tok, err := Token(hdr)
	if err != nil {
		return nil, "", err
	}
	res, err := v.Verify(ctx, tok)
	if err != nil {
		if verify.ReasonOf(err) == "" && ctx.Err() == nil {
			return nil, "", err // not a refusal of the token: a failure (500)
		}
		return nil, "", TokenRefused(err)
	}
	tenant, ok := TenantOf(res)
	if !ok {
		return nil, "", ErrNoTenant
	}
	return res, tenant, nil
}

// Token returns the request's bearer token, from Authorization: Bearer or
// X-Vault-Token: one of them, or both carrying the same token, once.
func Token(hdr http.Header) (string, error) {
	var tok string
	switch auth := hdr["Authorization"]; len(auth) {
	case 0:
	case 1:
		t, ok := CutBearer(auth[0])
		if !ok {
			return "", ErrNotBearer
		}
		tok = t
	default:
		return "", ErrTwoTokens
	}
	switch vt := hdr["X-Vault-Token"]; {
	case len(vt) > 1:
		return "", ErrTwoTokens
	case len(vt) == 1 && tok != "" && vt[0] != tok:
		return "", ErrTwoTokens
	case len(vt) == 1:
		tok = vt[0]
	}
	if tok == "" {
		return "", ErrNoToken
	}
	return tok, nil
}

// TokenRefused is the answer to a token the verifier refused: Vault's 403,
// its text saying why (the reason and the check that failed, never the
// token), and the reason as the audit record's and the metrics'.
func TokenRefused(err error) *httperr.Error {
	reason := verify.ReasonOf(err)
	if reason == "" { // the request's context ended while verifying
		reason = "canceled"
	}
	desc := "permission denied: token refused: " + strings.ReplaceAll(reason, "_", " ")
	var je *jose.Error
	var ve *verify.Error
	switch {
	case errors.As(err, &ve) && ve.Detail != "":
		desc += " (" + ve.Detail + ")"
	case errors.As(err, &je) && je.Detail != "":
		desc += " (" + je.Detail + ")"
	}
	return &httperr.Error{Status: http.StatusForbidden, Code: reason, Description: desc}
}

// CutBearer returns the token of an Authorization header with the Bearer
// scheme (RFC 6750 §2.1; the scheme compared case-insensitively).
func CutBearer(v string) (string, bool) {
	if len(v) < 7 || !strings.EqualFold(v[:7], "Bearer ") {
		return "", false
	}
	return strings.TrimSpace(v[7:]), true
}

// TenantOf is the token's tenant claim: a string naming a valid tenant.
// A token without one is no tenant's (every token the token service signs
// names its tenant, the default one included), and is refused rather than
// taken for the default tenant's.
func TenantOf(res *verify.Result) (string, bool) {
	raw, ok := res.Token.Claims.Raw("tenant")
	if !ok {
		return "", false
	}
	if string(raw) == `"`+store.DefaultTenant+`"` {
		return store.DefaultTenant, true
	}
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	t := string(raw[1 : len(raw)-1])
	if store.ValidTenantName(t) != nil {
		return "", false
	}
	return t, true
}

// Principal is the caller as an audit record names them: the token's
// client_id, else its subject.
func Principal(res *verify.Result) string {
	if client, _ := res.Token.Claims.StringClaim("client_id"); client != "" {
		return client
	}
	return res.Subject
}

// ErrWrapping refuses a request for a wrapped answer: keygate does not
// wrap, and answering in the clear a client that meant to hand a wrapping
// token on would show the secret to whoever it was handed to.
var ErrWrapping = &httperr.Error{Status: http.StatusBadRequest, Code: "wrapping_unsupported",
	Description: "response wrapping (X-Vault-Wrap-TTL) is not supported"}

// WantsWrapping reports whether a request asks for a wrapped answer: an
// X-Vault-Wrap-TTL header with a value, as Vault reads it.
func WantsWrapping(hdr http.Header) bool {
	for _, v := range hdr.Values("X-Vault-Wrap-Ttl") {
		if strings.TrimSpace(v) != "" {
			return true
		}
	}
	return false
}
