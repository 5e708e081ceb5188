// Package vaultauthtest is the Vault APIs' tests' token service: a
// verify.Pipeline over a key generated for the test binary, and tokens
// minted with it the way keygate's token service mints them (a tenant
// claim, a client_id, scopes), so that handlers are tested with the real
// verifier rather than a stub.
package vaultauthtest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/mint"
	"github.com/keygate/keygate/internal/verify"
	"github.com/keygate/keygate/internal/verify/verifykeys"
	"github.com/keygate/keygate/jose"
)

// Issuer and Audience of the tokens.
const (
	Issuer   = "https://kg.test"
	Audience = "https://api.kg.test"
)

// Service mints tokens and verifies them.
type Service struct {
	signer   *jose.Signer
	Verifier *verify.Pipeline
}

// staticKeys is a key source that never changes.
type staticKeys struct{ set *jose.KeySet }

func (s staticKeys) Current() *jose.KeySet                { return s.set }
func (s staticKeys) Refetch(context.Context) *jose.KeySet { return s.set }
func (s staticKeys) Status() verifykeys.Status            { return verifykeys.Status{Keys: s.set.Len()} }

// New returns a token service with a fresh P-256 key.
func New(tb testing.TB) *Service {
	tb.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.ES256, "test-1", priv)
	if err != nil {
		tb.Fatal(err)
	}
	pipe, err := verify.New(verify.Config{Policies: []verify.Policy{{Issuer: Issuer,
		Keys: staticKeys{jose.NewKeySet(signer.Key())}, Algorithms: []jose.Alg{jose.ES256}, Audiences: []string{Audience}}}})
	if err != nil {
		tb.Fatal(err)
	}
	return &Service{signer: signer, Verifier: pipe}
}

// Token mints a token of tenant's client principal with scopes, valid
// for an hour.
func (s *Service) Token(tb testing.TB, tenant, principal string, scopes ...string) string {
	tb.Helper()
	extra := map[string]json.RawMessage{"client_id": json.RawMessage(strconv.Quote(principal)),
		"tenant": json.RawMessage(strconv.Quote(tenant))}
	return s.Mint(tb, mint.Claims{Subject: principal, Scope: strings.Join(scopes, " "), TTL: time.Hour, Extra: extra})
}

// Mint signs c, its issuer and audience filled in when empty.
func (s *Service) Mint(tb testing.TB, c mint.Claims) string {
	tb.Helper()
	if c.Issuer == "" {
		c.Issuer = Issuer
	}
	if c.Audience == nil {
		c.Audience = []string{Audience}
	}
	tok, err := mint.Sign(s.signer, c, time.Now(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}
