package bench

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/keyfile"
	"github.com/keygate/keygate/internal/mint"
	"github.com/keygate/keygate/jose"
)

func writeFile(t *testing.T, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func statusOf(t *testing.T, h http.Handler, token string) int {
	t.Helper()
	r := benchRequest("GET", "/", nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code
}

func mintWith(t testing.TB, s *jose.Signer, edit func(*mint.Claims)) string {
	t.Helper()
	c := RealisticClaims()
	now := time.Now()
	if edit != nil {
		edit(&c)
	}
	if c.TTL < 0 { // expired: issued long enough ago that exp is past the leeway
		now, c.TTL = now.Add(c.TTL-time.Hour), time.Hour
	}
	tok, err := mint.Sign(s, c, now, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// The naive modes check tokens for real: what they accept and refuse is
// what keygate's middleware accepts and refuses on the same cases.
func TestNaiveTokenModes(t *testing.T) {
	es, esPriv, err := newSigner(jose.ES256)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM, err := jose.MarshalPublicPEM(esPriv.Public())
	if err != nil {
		t.Fatal(err)
	}
	other, _, _ := newSigner(jose.ES256)
	secret, _ := keyfile.GenerateSecret(jose.HS256)
	hs, _ := jose.NewSigner(jose.HS256, "", secret)
	otherHS, _ := jose.NewSigner(jose.HS256, "", make([]byte, 32))
	expired := func(c *mint.Claims) { c.TTL = -time.Hour }
	wrongAud := func(c *mint.Claims) { c.Audience = []string{"https://elsewhere.example"} }
	wrongIss := func(c *mint.Claims) { c.Issuer = "https://evil.example/" }

	type tc struct {
		name  string
		token string
		want  int
	}
	modes := []struct {
		mode  string
		key   []byte
		cases []tc
	}{
		{ModeNaiveES256, pubPEM, []tc{
			{"valid", mintWith(t, es, nil), 200},
			{"expired", mintWith(t, es, expired), 401},
			{"wrong audience", mintWith(t, es, wrongAud), 401},
			{"wrong issuer", mintWith(t, es, wrongIss), 401},
			{"other key", mintWith(t, other, nil), 401},
			{"HS256 token", mintWith(t, hs, nil), 401},
			{"no token", "", 401},
		}},
		{ModeNaiveHS256, secret, []tc{
			{"valid", mintWith(t, hs, nil), 200},
			{"expired", mintWith(t, hs, expired), 401},
			{"wrong audience", mintWith(t, hs, wrongAud), 401},
			{"other secret", mintWith(t, otherHS, nil), 401},
			{"ES256 token", mintWith(t, es, nil), 401},
		}},
		{ModeMiddlewareHS256, secret, []tc{
			{"valid", mintWith(t, hs, nil), 200},
			{"expired", mintWith(t, hs, expired), 401},
			{"wrong audience", mintWith(t, hs, wrongAud), 401},
			{"other secret", mintWith(t, otherHS, nil), 401},
			{"ES256 token", mintWith(t, es, nil), 401},
		}},
	}
	for _, m := range modes {
		h, err := NaiveHandler(m.mode, writeFile(t, m.key))
		if err != nil {
			t.Fatalf("%s: %v", m.mode, err)
		}
		for _, c := range m.cases {
			if got := statusOf(t, h, c.token); got != c.want {
				t.Errorf("%s: %s: status %d, want %d", m.mode, c.name, got, c.want)
			}
		}
	}
}

func TestNaiveDecrypt(t *testing.T) {
	saved := NaiveScrypt.N
	NaiveScrypt.N = 1 << 10 // the real cost is the point of the mode, not of this test
	t.Cleanup(func() { NaiveScrypt.N = saved })
	pass := []byte("correct horse battery staple")
	h, err := NaiveHandler(ModeNaiveDecrypt, writeFile(t, pass))
	if err != nil {
		t.Fatal(err)
	}
	pt := []byte("64 bytes of a password manager entry ..........................!")
	body, err := NaiveSeal(pass, pt)
	if err != nil {
		t.Fatal(err)
	}
	// Flip a bit of the sealed bytes themselves: a changed base64 letter can
	// change only the unused bits of the last one and decode the same.
	var sealed struct{ Ciphertext []byte }
	if err := json.Unmarshal(body, &sealed); err != nil {
		t.Fatal(err)
	}
	sealed.Ciphertext[len(sealed.Ciphertext)/2] ^= 0x01
	tb, _ := json.Marshal(sealed)
	tamper := strings.Replace(string(tb), `"Ciphertext"`, `"ciphertext"`, 1)
	for _, c := range []struct {
		name, body string
		want       int
	}{
		{"sealed", string(body), 200},
		{"tampered", tamper, 400},
		{"not JSON", "{", 400},
		{"short", `{"ciphertext":"AAAA"}`, 400},
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, benchRequest("POST", "/", strings.NewReader(c.body)))
		if w.Code != c.want {
			t.Errorf("%s: status %d, want %d (%s)", c.name, w.Code, c.want, w.Body)
			continue
		}
		if c.want == 200 {
			var out struct{ Plaintext string }
			json.Unmarshal(w.Body.Bytes(), &out)
			if got, _ := base64.StdEncoding.DecodeString(out.Plaintext); string(got) != string(pt) {
				t.Errorf("%s: plaintext %q", c.name, got)
			}
		}
	}
}

func TestNaiveHandlerRefuses(t *testing.T) {
	if _, err := NaiveHandler(ModeNaiveES256, writeFile(t, []byte("not a PEM"))); err == nil {
		t.Error("naive-es256 took a key file with no PEM")
	}
	if _, err := NaiveHandler(ModeMiddlewareHS256, writeFile(t, []byte("short"))); err == nil {
		t.Error("middleware-hs256 took a 5-byte secret")
	}
	if _, err := NaiveHandler("noop", writeFile(t, []byte("x"))); err == nil {
		t.Error("NaiveHandler took a reference mode")
	}
}

func FuzzNaiveVerify(f *testing.F) {
	s, _ := jose.NewSigner(jose.HS256, "", make([]byte, 32))
	f.Add(mintWith(f, s, nil))
	f.Add("a.b.c")
	f.Fuzz(func(t *testing.T, tok string) {
		for _, alg := range []string{"HS256", "ES256"} {
			naiveVerify(tok, alg, func() (any, error) { return make([]byte, 32), nil }, time.Now()) //nolint:errcheck // must not panic
		}
	})
}
