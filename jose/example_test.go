package jose_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/keygate/keygate/jose"
)

func Example() {
	priv, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	signer, _ := jose.NewSigner(jose.ES256, "2026-11", priv)
	token, _ := signer.SignClaims(map[string]any{
		"iss": "https://issuer.example.com/", "sub": "alice", "aud": "orders",
		"exp": time.Now().Add(time.Hour).Unix(), "scope": "read:orders",
	})

	// A verifier trusts a key set, an explicit algorithm list and explicit claims.
	keys := jose.NewKeySet(signer.Key())
	v, _ := jose.NewVerifier(keys, []jose.Alg{jose.ES256}, jose.Expected{
		Issuer: "https://issuer.example.com/", Audience: []string{"orders"},
		Require: []string{"exp"}, Leeway: time.Minute,
	})
	tok, err := v.Verify(token)
	fmt.Println(tok.Claims.Subject, tok.Claims.HasScope("read:orders"), err)

	// Every rejection carries a machine-readable reason.
	_, err = v.Verify(token[:len(token)-4] + "AAAA")
	fmt.Println(jose.ReasonOf(err))
	// Output:
	// alice true <nil>
	// bad_signature
}
