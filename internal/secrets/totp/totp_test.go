package totp

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"image/png"
	"os"
	"strings"
	"testing"
	"time"
)

type vectors struct {
	TOTP []struct {
		Time int64
		Alg  string
		Code string
	}
	Seeds map[string]string
	HOTP  []string
}

func readVectors(t *testing.T) vectors {
	t.Helper()
	b, err := os.ReadFile("testdata/rfc-vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v vectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestRFCVectors(t *testing.T) {
	v := readVectors(t)
	for _, c := range v.TOTP {
		k, err := New(Key{Secret: []byte(v.Seeds[c.Alg]), Algorithm: c.Alg, Digits: 8})
		if err != nil {
			t.Fatal(err)
		}
		at := time.Unix(c.Time, 0)
		if got := k.Code(at); got != c.Code {
			t.Errorf("%s at %d: %s, want %s", c.Alg, c.Time, got, c.Code)
		}
		if step, ok := k.Check(c.Code, at); !ok || step != k.Step(at) {
			t.Errorf("%s at %d: Check(%s) = %d, %v", c.Alg, c.Time, c.Code, step, ok)
		}
	}
	k, _ := New(Key{Secret: []byte(v.Seeds["SHA1"])})
	for i, want := range v.HOTP {
		if got := k.code(int64(i)); got != want {
			t.Errorf("HOTP counter %d: %s, want %s", i, got, want)
		}
	}
}

func TestCheckSkew(t *testing.T) {
	k, err := Generate(rand.Reader, 0, Key{Issuer: "keygate", AccountName: "ana"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_015, 0)
	for _, c := range []struct {
		name  string
		at    time.Time
		skew  int
		ok    bool
		delta int64
	}{
		{"now", now, 1, true, 0},
		{"one period ago", now.Add(-30 * time.Second), 1, true, -1},
		{"one period ahead", now.Add(30 * time.Second), 1, true, 1},
		{"two periods ago", now.Add(-60 * time.Second), 1, false, 0},
		{"one period ago, no skew", now.Add(-30 * time.Second), 0, false, 0},
	} {
		k.Skew = c.skew
		step, ok := k.Check(k.Code(c.at), now)
		if ok != c.ok || ok && step != k.Step(now)+c.delta {
			t.Errorf("%s: step %d, ok %v; want ok %v at %+d", c.name, step-k.Step(now), ok, c.ok, c.delta)
		}
	}
	if _, ok := k.Check("12345", now); ok {
		t.Error("a code of the wrong length matched")
	}
}

func TestURLRoundTrip(t *testing.T) {
	k, err := Generate(rand.Reader, 32, Key{Issuer: "Acme Co", AccountName: "ana@acme.example", Algorithm: "sha256", Digits: 8, Period: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	u := k.URL()
	if !strings.HasPrefix(u, "otpauth://totp/Acme%20Co:ana@acme.example?") {
		t.Errorf("URL %s", u)
	}
	back, err := ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back.Secret, k.Secret) || back.Algorithm != "SHA256" || back.Digits != 8 || back.Period != time.Minute ||
		back.Issuer != "Acme Co" || back.AccountName != "ana@acme.example" {
		t.Errorf("round trip: %+v, want %+v", back, k)
	}
}

func TestParseURL(t *testing.T) {
	for _, c := range []struct {
		url  string
		err  string
		want Key
	}{
		{"otpauth://totp/Example:alice@google.com?secret=JBSWY3DPEHPK3PXP&issuer=Example", "",
			Key{Issuer: "Example", AccountName: "alice@google.com", Algorithm: "SHA1", Digits: 6, Period: 30 * time.Second}},
		{"otpauth://totp/alice?secret=jbswy3dpehpk3pxp", "", Key{AccountName: "alice", Algorithm: "SHA1", Digits: 6, Period: 30 * time.Second}},
		{"otpauth://totp/a?secret=JBSWY3DPEHPK3PXP&algorithm=SHA512&digits=8&period=60", "",
			Key{AccountName: "a", Algorithm: "SHA512", Digits: 8, Period: time.Minute}},
		{"otpauth://hotp/a?secret=JBSWY3DPEHPK3PXP&counter=1", "only totp keys", Key{}},
		{"https://totp/a?secret=JBSWY3DPEHPK3PXP", "scheme must be otpauth", Key{}},
		{"otpauth://totp/a", "not base32", Key{}},
		{"otpauth://totp/a?secret=!!!", "not base32", Key{}},
		{"otpauth://totp/a?secret=JBSWY3DP", "must be 10 to 128 bytes, not 5", Key{}},
		{"otpauth://totp/a?secret=JBSWY3DPEHPK3PXP&digits=7", "digits must be 6 or 8", Key{}},
		{"otpauth://totp/a?secret=JBSWY3DPEHPK3PXP&digits=x", "digits must be a positive whole number", Key{}},
		{"otpauth://totp/a?secret=JBSWY3DPEHPK3PXP&period=0", "period must be a positive whole number", Key{}},
		{"otpauth://totp/a?secret=JBSWY3DPEHPK3PXP&period=999999999", "period must be whole seconds", Key{}},
		{"otpauth://totp/a?secret=JBSWY3DPEHPK3PXP&algorithm=MD5", "algorithm must be", Key{}},
		{"::", "not a URL", Key{}},
	} {
		k, err := ParseURL(c.url)
		if c.err != "" {
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v, want an error holding %q", c.url, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.url, err)
			continue
		}
		if k.Issuer != c.want.Issuer || k.AccountName != c.want.AccountName || k.Algorithm != c.want.Algorithm ||
			k.Digits != c.want.Digits || k.Period != c.want.Period || len(k.Secret) != 10 {
			t.Errorf("%s: %+v, want %+v", c.url, k, c.want)
		}
	}
}

func TestGenerateRefuses(t *testing.T) {
	for _, c := range []struct {
		size int
		key  Key
		err  string
	}{
		{8, Key{}, "key_size must be 16 to 128"},
		{129, Key{}, "key_size must be 16 to 128"},
		{0, Key{Skew: 2}, "skew must be 0 or 1"},
		{0, Key{Period: 1500 * time.Millisecond}, "period must be whole seconds"},
	} {
		if _, err := Generate(rand.Reader, c.size, c.key); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("size %d, %+v: %v, want %q", c.size, c.key, err, c.err)
		}
	}
	if _, err := Generate(bytes.NewReader(nil), 0, Key{}); err == nil || !strings.Contains(err.Error(), "random source") {
		t.Errorf("a dry random source: %v", err)
	}
}

func FuzzParseURL(f *testing.F) {
	f.Add("otpauth://totp/Example:alice@google.com?secret=JBSWY3DPEHPK3PXP&issuer=Example")
	f.Add("otpauth://totp/a?secret=JBSWY3DPEHPK3PXP&algorithm=SHA512&digits=8&period=60")
	f.Fuzz(func(t *testing.T, raw string) {
		k, err := ParseURL(raw)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("%q: error %v does not wrap ErrInvalid", raw, err)
			}
			return
		}
		if c := k.Code(time.Unix(1_700_000_000, 0)); len(c) != k.Digits {
			t.Fatalf("%q: code %q", raw, c)
		}
		if _, err := ParseURL(k.URL()); err != nil {
			t.Fatalf("%q: its own URL %s does not parse: %v", raw, k.URL(), err)
		}
	})
}

func TestQR(t *testing.T) {
	k, err := Generate(rand.Reader, 0, Key{Issuer: "keygate", AccountName: "ana@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := k.QR(200)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if r := img.Bounds(); r.Dx() != 200 || r.Dy() != 200 {
		t.Errorf("%v, want 200×200", r)
	}
	dark, light := 0, 0
	for y := range 200 {
		for x := range 200 {
			if r, _, _, _ := img.At(x, y).RGBA(); r < 0x8000 {
				dark++
			} else {
				light++
			}
		}
	}
	if dark < 200*200/5 || light < 200*200/5 {
		t.Errorf("%d dark and %d light pixels: not a QR code", dark, light)
	}
	again, _ := k.QR(200)
	if !bytes.Equal(b, again) {
		t.Error("the same key drew two different codes")
	}
	for _, size := range []int{0, -1, MaxQRSize + 1, 10} {
		if _, err := k.QR(size); err == nil || !errors.Is(err, ErrInvalid) {
			t.Errorf("size %d: %v", size, err)
		}
	}
}
