package passwordpolicy

import (
	"bytes"
	"crypto/rand"
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

const fourRules = `length = 20
rule "charset" {
  charset = "abcdefghijklmnopqrstuvwxyz"
  min-chars = 1
}
rule "charset" {
  charset = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
  min-chars = 1
}
rule "charset" {
  charset = "0123456789"
  min-chars = 1
}
rule "charset" {
  charset = "!@#$%^&*"
  min-chars = 1
}`

func TestParse(t *testing.T) {
	for _, c := range []struct {
		name, doc string
		length    int
		rules     int
		chars     int
		err       string // "" for none
	}{
		{"Vault's example", fourRules, 20, 4, 26 + 26 + 10 + 8, ""},
		{"JSON", `{"length": 8, "rule": [{"charset": {"charset": "ab", "min-chars": 2}}]}`, 8, 1, 2, ""},
		{"no min-chars", "length = 4\nrule \"charset\" { charset = \"aab\" }", 4, 1, 2, ""},
		{"overlapping charsets", "length = 6\nrule \"charset\" { charset = \"abc\" }\nrule \"charset\" { charset = \"cde\" }", 6, 2, 5, ""},
		{"unicode", "length = 5\nrule \"charset\" { charset = \"äöü€\" }", 5, 1, 4, ""},
		{"too short", "length = 3\nrule \"charset\" { charset = \"a\" }", 0, 0, 0, "length must be 4 to 100, not 3"},
		{"too long", "length = 101\nrule \"charset\" { charset = \"a\" }", 0, 0, 0, "length must be 4 to 100"},
		{"no length", "rule \"charset\" { charset = \"a\" }", 0, 0, 0, "length must be 4 to 100, not 0"},
		{"length a string", "length = \"8\"\nrule \"charset\" { charset = \"a\" }", 0, 0, 0, "length must be a whole number"},
		{"no rule", "length = 8", 0, 0, 0, "no charset rule"},
		{"empty charset", "length = 8\nrule \"charset\" { charset = \"\" }", 0, 0, 0, "needs a charset"},
		{"no charset field", "length = 8\nrule \"charset\" { min-chars = 1 }", 0, 0, 0, "needs a charset"},
		{"other rule", "length = 8\nrule \"regex\" { pattern = \"a\" }", 0, 0, 0, `unknown rule "regex"`},
		{"unknown field", "length = 8\nsize = 3\nrule \"charset\" { charset = \"a\" }", 0, 0, 0, `unknown field "size"`},
		{"unknown rule field", "length = 8\nrule \"charset\" { charset = \"a\"\nmax-chars = 2 }", 0, 0, 0, `unknown field "max-chars"`},
		{"negative min", "length = 8\nrule \"charset\" { charset = \"a\"\nmin-chars = -1 }", 0, 0, 0, "min-chars must be a whole number, 0 or more"},
		{"mins over length", "length = 4\nrule \"charset\" { charset = \"a\"\nmin-chars = 3 }\nrule \"charset\" { charset = \"b\"\nmin-chars = 2 }", 0, 0, 0, "add up to 5, more than the length 4"},
		{"control character", "length = 8\nrule \"charset\" { charset = \"a\\tb\" }", 0, 0, 0, "not a printable character"},
		{"not HCL", "length = = 8", 0, 0, 0, "invalid password policy"},
		{"huge", strings.Repeat("#", MaxDocBytes+1), 0, 0, 0, "longer than"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := Parse(c.doc)
			if c.err != "" {
				if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one holding %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Length != c.length || len(p.Rules) != c.rules || len(p.chars) != c.chars {
				t.Errorf("length %d, %d rules, %d characters; want %d, %d, %d", p.Length, len(p.Rules), len(p.chars), c.length, c.rules, c.chars)
			}
		})
	}
}

func TestGenerate(t *testing.T) {
	for i, doc := range []string{
		fourRules,
		// Few random strings satisfy it, so it is built rule by rule.
		"length = 4\nrule \"charset\" { charset = \"a\"\nmin-chars = 1 }\nrule \"charset\" { charset = \"b\"\nmin-chars = 1 }\n" +
			"rule \"charset\" { charset = \"c\"\nmin-chars = 1 }\nrule \"charset\" { charset = \"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZdefghijklmnopqrstuvwxyz!@#$%^&*()-_=+\"\nmin-chars = 1 }",
		"length = 100\nrule \"charset\" { charset = \"äöü€\"\nmin-chars = 50 }",
	} {
		p, err := Parse(doc)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for range 200 {
			pw, err := p.Generate(rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			if n := utf8.RuneCountInString(pw); n != p.Length {
				t.Fatalf("%q: %d characters, want %d", pw, n, p.Length)
			}
			if !p.satisfied([]rune(pw)) {
				t.Fatalf("%q breaks a rule of\n%s", pw, doc)
			}
			for _, c := range pw {
				if !slices.Contains(p.chars, c) {
					t.Fatalf("%q holds %q, from no rule", pw, c)
				}
			}
			seen[pw] = true
		}
		// The second policy has about 1,700 passwords, so 200 draws repeat
		// some (about 11 expected); the others have far more than 200².
		if want := []int{200, 150, 200}[i]; len(seen) < want {
			t.Errorf("policy %d: %d distinct passwords of 200, want at least %d", i, len(seen), want)
		}
	}
}

// Every character of a one-rule policy comes up about equally often.
func TestGenerateUniform(t *testing.T) {
	p, err := Parse("length = 100\nrule \"charset\" { charset = \"abcdefghij\" }")
	if err != nil {
		t.Fatal(err)
	}
	counts := map[rune]int{}
	for range 100 {
		pw, err := p.Generate(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range pw {
			counts[c]++
		}
	}
	for c, n := range counts { // 1,000 expected each; 6 standard deviations is about ±570
		if n < 800 || n > 1200 {
			t.Errorf("%q drawn %d times of 10,000, want about 1,000", c, n)
		}
	}
}

func TestGenerateRandomFails(t *testing.T) {
	p, err := Parse(fourRules)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Generate(bytes.NewReader(make([]byte, 5))); err == nil || !strings.Contains(err.Error(), "random source") {
		t.Errorf("a random source that runs dry: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(fourRules)
	f.Add(`{"length": 8, "rule": [{"charset": {"charset": "ab", "min-chars": 2}}]}`)
	f.Add("length = 4\nrule \"charset\" { charset = \"\\u00e4\" }")
	f.Fuzz(func(t *testing.T, doc string) {
		p, err := Parse(doc)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		pw, err := p.Generate(rand.Reader)
		if err != nil || utf8.RuneCountInString(pw) != p.Length || !p.satisfied([]rune(pw)) {
			t.Fatalf("policy %q: password %q, %v", doc, pw, err)
		}
	})
}
