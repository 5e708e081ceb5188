package jose

import "testing"

// TestHasRegistered: Has answers for the registered claims, spelled plainly
// or with escapes, from what the parse recorded, and agrees with Raw;
// Validate's iss check does too.
func TestHasRegistered(t *testing.T) {
	registered := []string{"iss", "sub", "aud", "exp", "nbf", "iat", "jti"}
	for _, payload := range []string{
		`{}`,
		`{"iss":"a","sub":"b","aud":"c","exp":1,"nbf":1,"iat":1,"jti":"d"}`,
		`{"\u0069ss":"a","s\u0075b":"b","exp":1}`,
		`{"other":1,"isss":2,"is":3,"EXP":4}`,
	} {
		var c Claims
		var arena []byte
		if err := c.parse([]byte(payload), &arena); err != nil {
			t.Fatalf("%s: %v", payload, err)
		}
		for _, n := range registered {
			_, raw := c.Raw(n)
			if c.Has(n) != raw {
				t.Errorf("%s: Has(%q) = %v, Raw finds it: %v", payload, n, c.Has(n), raw)
			}
		}
		_, iss := c.Raw("iss")
		err := c.Validate(&Expected{Issuer: "a"}, testNow)
		if got := err != errNoIssuer; got != iss {
			t.Errorf("%s: Validate with an expected issuer: %v, but iss present: %v", payload, err, iss)
		}
	}
	if (&Claims{Issuer: "a", Expiry: NumericDate{Unix: 1, Valid: true}}).Has("exp") {
		t.Error("Has reports a claim of Claims that no parse filled")
	}
}
