package bench

import (
	"crypto/ecdsa"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/keygate/keygate/internal/keyfile"
	"github.com/keygate/keygate/jose"
)

// BenchmarkNaiveVerify shows that naiveVerify costs what golang-jwt v5's
// ParseWithClaims into MapClaims costs (the library the reports used,
// kept out of keygate's binary), key parsing aside:
//
//	go test -run '^$' -bench NaiveVerify -benchmem ./internal/bench
func BenchmarkNaiveVerify(b *testing.B) {
	for _, alg := range []jose.Alg{jose.HS256, jose.ES256} {
		var s *jose.Signer
		var key any
		if alg == jose.HS256 {
			secret, _ := keyfile.GenerateSecret(alg)
			s, _ = jose.NewSigner(alg, "", secret)
			key = secret
		} else {
			priv, _ := keyfile.Generate(alg, 0)
			s, _ = jose.NewSigner(alg, "", priv)
			key = priv.Public().(*ecdsa.PublicKey)
		}
		tok := mintWith(b, s, nil)
		keyFunc := func() (any, error) { return key, nil }
		b.Run(alg.String()+"/naive", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := naiveVerify(tok, alg.String(), keyFunc, time.Now()); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(alg.String()+"/golang-jwt", func(b *testing.B) {
			b.ReportAllocs()
			kf := func(*jwt.Token) (any, error) { return key, nil }
			for b.Loop() {
				if _, err := jwt.ParseWithClaims(tok, jwt.MapClaims{}, kf, jwt.WithValidMethods([]string{alg.String()}),
					jwt.WithIssuer(issuer), jwt.WithAudience(audience), jwt.WithExpirationRequired()); err != nil {
					b.Fatal(strings.TrimSpace(err.Error()))
				}
			}
		})
	}
}
