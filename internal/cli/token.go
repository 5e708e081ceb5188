package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/keygate/keygate/internal/keyfile"
	"github.com/keygate/keygate/internal/mint"
	"github.com/keygate/keygate/internal/verify/verifykeys"
	"github.com/keygate/keygate/jose"
)

// maxInput caps a token read from stdin or given to inspect.
const maxInput = 1 << 20

// signFlags are the flags of token sign.
type signFlags struct {
	key, secretFile, kid string
	alg                  algFlag
	claims               mint.Claims
	aud                  stringsFlag
	extra                claimsFlag
	nbf                  time.Duration // valid from now+nbf
}

func (f *signFlags) register(fs *flagSet) {
	fs.StringVar(&f.key, "key", "", "private key `FILE`: PEM (PKCS#8, PKCS#1, SEC 1) or private JWK")
	fs.StringVar(&f.secretFile, "secret-file", "", "HMAC secret `FILE` (raw bytes), for HS256, HS384, HS512")
	fs.Var(&f.alg, "alg", "signing `ALG` (default: the one the key implies; HS256 for a secret)")
	fs.StringVar(&f.kid, "kid", "", "header `KID` (default: the JWK's kid, else the key's thumbprint; none for a secret)")
	fs.StringVar(&f.claims.Issuer, "iss", "", "issuer claim")
	fs.StringVar(&f.claims.Subject, "sub", "", "subject claim")
	fs.Var(&f.aud, "aud", "audience claim (repeatable)")
	fs.DurationVar(&f.claims.TTL, "ttl", time.Hour, "lifetime: exp is nbf+ttl; negative: a token that expired that long ago\n(it was valid for the hour before), for testing refusals")
	fs.DurationVar(&f.nbf, "nbf", 0, "valid from now+`offset` (iat and nbf); positive: a token not yet valid, for testing refusals")
	fs.StringVar(&f.claims.Scope, "scope", "", "space-separated scope claim")
	f.extra = claimsFlag{}
	fs.Var(f.extra, "claim", "extra claim `name=value` (repeatable); value is JSON if it parses, else a string")
}

func (f *signFlags) signer(fs *flagSet) (*jose.Signer, error) {
	switch {
	case (f.key == "") == (f.secretFile == ""):
		return nil, usageErrorf(fs.Name(), "give exactly one of --key and --secret-file")
	case f.claims.TTL == 0:
		return nil, usageErrorf(fs.Name(), "--ttl must not be 0 (negative: an expired token)")
	case f.secretFile != "":
		return keyfile.LoadSecretSigner(f.secretFile, jose.Alg(f.alg), f.kid)
	}
	return keyfile.LoadSigner(f.key, jose.Alg(f.alg), f.kid)
}

func (a *app) tokenSign(_ context.Context, args []string) error {
	fs := a.flags("keygate token sign", "(--key FILE | --secret-file FILE) [flags]",
		"Prints a signed compact JWT with iat, nbf, exp and a random 128-bit jti set.")
	var f signFlags
	f.register(fs)
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	signer, err := f.signer(fs)
	if err != nil {
		return err
	}
	f.claims.Audience, f.claims.Extra = f.aud, f.extra
	at := a.now().Add(f.nbf)
	if f.claims.TTL < 0 {
		// Expired ttl ago, after an hour of validity.
		exp := at.Add(f.claims.TTL)
		at, f.claims.TTL = exp.Add(-time.Hour), time.Hour
	}
	token, err := mint.Sign(signer, f.claims, at, a.random)
	if errors.Is(err, mint.ErrReservedClaim) {
		return usageErrorf(fs.Name(), "--claim %v; use --iss, --sub, --aud, --scope or --ttl", err)
	}
	if err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	fmt.Fprintln(a.stdout, token)
	return nil
}

// verifyFlags are the flags of token verify.
type verifyFlags struct {
	key, jwks, secretFile, kid string
	algs                       algsFlag
	aud                        stringsFlag
	expected                   jose.Expected
	require                    string
}

func (f *verifyFlags) register(fs *flagSet) {
	fs.StringVar(&f.key, "key", "", "verification key `FILE`: PEM (public or private) or JWK")
	fs.StringVar(&f.jwks, "jwks", "", "JWKS `FILE or URL` (https, or http to this host); the token's kid and alg pick the key")
	fs.StringVar(&f.secretFile, "secret-file", "", "HMAC secret `FILE` (raw bytes)")
	fs.Var(&f.algs, "alg", "accepted `ALG` (required, repeatable)")
	fs.StringVar(&f.kid, "kid", "", "with --key or --secret-file, the `KID` the token must carry (default: not checked)")
	fs.StringVar(&f.expected.Issuer, "iss", "", "required issuer")
	fs.Var(&f.aud, "aud", "accepted audience (repeatable; any one must match)")
	fs.DurationVar(&f.expected.Leeway, "leeway", 60*time.Second, "clock skew tolerated for exp, nbf and iat")
	fs.StringVar(&f.require, "require", "exp", "comma-separated `claims` that must be present")
}

func (f *verifyFlags) check(fs *flagSet) error {
	sources := 0
	for _, s := range []string{f.key, f.jwks, f.secretFile} {
		if s != "" {
			sources++
		}
	}
	switch {
	case sources != 1:
		return usageErrorf(fs.Name(), "give exactly one of --key, --jwks and --secret-file")
	case len(f.algs) == 0:
		return usageErrorf(fs.Name(), "--alg is required: name the algorithms you accept")
	case f.kid != "" && f.jwks != "":
		return usageErrorf(fs.Name(), "--kid does not apply to --jwks")
	}
	return nil
}

func (f *verifyFlags) verifier(ctx context.Context, now func() time.Time) (*jose.Verifier, error) {
	var resolver jose.KeyResolver
	if jwksURL(f.jwks) {
		set, err := fetchJWKS(ctx, f.jwks, f.algs)
		if err != nil {
			return nil, err
		}
		resolver = set
	} else {
		keys, err := f.loadKeys()
		if err != nil {
			return nil, err
		}
		resolver = jose.NewKeySet(keys...)
		if f.jwks == "" && f.kid == "" {
			resolver = anyKID(keys)
		}
	}
	f.expected.Audience = f.aud
	if f.require != "" {
		for name := range strings.SplitSeq(f.require, ",") {
			f.expected.Require = append(f.expected.Require, strings.TrimSpace(name))
		}
	}
	return jose.NewVerifier(resolver, f.algs, f.expected, jose.WithClock(now))
}

func (f *verifyFlags) loadKeys() ([]*jose.Key, error) {
	switch {
	case f.secretFile != "":
		return keyfile.LoadSecretKeys(f.secretFile, f.algs, f.kid)
	case f.jwks != "":
		return keyfile.LoadKeys(f.jwks, f.algs, "")
	}
	return keyfile.LoadKeys(f.key, f.algs, f.kid)
}

// jwksURL reports whether --jwks names a URL rather than a file.
func jwksURL(s string) bool {
	return strings.HasPrefix(s, "https://") || strings.HasPrefix(s, "http://")
}

// Bounds of a JWKS fetched by token verify.
const (
	jwksFetchTimeout = 10 * time.Second
	jwksMaxBody      = 1 << 20
)

// fetchJWKS fetches the JWKS at rawURL once, as the gateway's remote key
// source does (https, or http to a loopback host; bounded in time and
// size), keeping the keys of algs.
func fetchJWKS(ctx context.Context, rawURL string, algs []jose.Alg) (*jose.KeySet, error) {
	if _, err := verifykeys.CheckURL(rawURL); err != nil {
		return nil, fmt.Errorf("--jwks: %w", err)
	}
	src, err := verifykeys.NewRemote(verifykeys.RemoteConfig{URL: rawURL, Algorithms: algs, Timeout: jwksFetchTimeout,
		MaxBody: jwksMaxBody, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, fmt.Errorf("--jwks: %w", err)
	}
	defer src.Close()
	ctx, cancel := context.WithTimeout(ctx, jwksFetchTimeout+time.Second)
	defer cancel()
	set := src.Refetch(ctx)
	if set.Len() == 0 {
		if st := src.Status(); st.LastError != nil {
			return nil, fmt.Errorf("--jwks %s: %w", src.URL(), st.LastError)
		}
		return nil, fmt.Errorf("--jwks %s: no key for %s", src.URL(), (*algsFlag)(&algs).String())
	}
	return set, nil
}

// anyKID resolves a key by alg alone: the user named the key file, so the
// token's kid need not match it.
type anyKID []*jose.Key

var _ jose.KeyResolver = anyKID(nil)

func (ks anyKID) ResolveKey(_ string, alg jose.Alg) (*jose.Key, error) {
	for _, k := range ks {
		if k.Alg() == alg {
			return k, nil
		}
	}
	return nil, &jose.Error{Reason: jose.ReasonUnknownKID, Detail: "no key given fits the token's alg"}
}

func (a *app) tokenVerify(ctx context.Context, args []string) error {
	fs := a.flags("keygate token verify", "(--key FILE | --jwks FILE|URL | --secret-file FILE) --alg ALG [flags] TOKEN",
		"Verifies TOKEN (\"-\" reads it from stdin) and prints its claims as JSON, or prints\n"+
			"\"rejected: <reason>: <detail>\" to stderr and exits 1.")
	var f verifyFlags
	f.register(fs)
	pos, err := fs.parse(args, 1, 1)
	if err != nil {
		return err
	}
	if err := f.check(fs); err != nil {
		return err
	}
	v, err := f.verifier(ctx, a.now)
	if err != nil {
		return err
	}
	token, err := a.tokenArg(pos[0])
	if err != nil {
		return err
	}
	t, err := v.Verify(token)
	if err != nil {
		fmt.Fprintf(a.stderr, "rejected: %s\n", describe(err))
		return silentError{err}
	}
	return a.printJSON(t.Claims.JSON())
}

// describe renders a rejection as "<reason>: <detail>".
func describe(err error) string {
	var je *jose.Error
	if !errors.As(err, &je) {
		return "error: " + err.Error()
	}
	detail := je.Detail
	if detail == "" {
		detail = je.Error()
	}
	return je.Reason.String() + ": " + detail
}

func (a *app) tokenInspect(_ context.Context, args []string) error {
	fs := a.flags("keygate token inspect", "[--json] TOKEN",
		"Prints TOKEN's header and claims (\"-\" reads it from stdin) WITHOUT verifying its\n"+
			"signature or claims: do not trust what it shows. With --json it prints the claims alone\n"+
			"as one JSON object (keygate token inspect --json T | jq -r .jti), the warning on stderr.")
	asJSON := fs.Bool("json", false, "print the claims as one JSON object, for jq")
	pos, err := fs.parse(args, 1, 1)
	if err != nil {
		return err
	}
	token, err := a.tokenArg(pos[0])
	if err != nil {
		return err
	}
	var t jose.Token
	if err := jose.ParseInto(&t, token, maxInput); err != nil {
		return fmt.Errorf("cannot parse token: %w", err)
	}
	if *asJSON {
		fmt.Fprintln(a.stderr, "UNVERIFIED: neither the signature nor the claims have been checked.")
		return a.printJSON(t.Claims.JSON())
	}
	fmt.Fprintln(a.stdout, "UNVERIFIED: neither the signature nor the claims have been checked.")
	fmt.Fprintln(a.stdout, "header (UNVERIFIED):")
	if err := a.printJSON(t.Header.JSON()); err != nil {
		return err
	}
	fmt.Fprintln(a.stdout, "claims (UNVERIFIED):")
	return a.printJSON(t.Claims.JSON())
}

// tokenArg returns the token argument, reading stdin for "-".
func (a *app) tokenArg(arg string) (string, error) {
	if arg != "-" {
		return strings.TrimSpace(arg), nil
	}
	b, err := io.ReadAll(io.LimitReader(a.stdin, maxInput+1))
	if err != nil {
		return "", fmt.Errorf("read token from stdin: %w", err)
	}
	if len(b) > maxInput {
		return "", fmt.Errorf("token on stdin is over %d bytes", maxInput)
	}
	return strings.TrimSpace(string(b)), nil
}
