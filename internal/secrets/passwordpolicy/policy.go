// Package passwordpolicy reads Vault's password policies — a length and
// "charset" rules, each with a minimum count, in HCL or JSON as Vault
// takes them — and generates passwords from them with crypto/rand, as
// Vault's sys/policies/password/:name/generate does: uniformly over the
// strings of that length from the rules' characters that satisfy every
// rule.
package passwordpolicy

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/hcl"
)

// Limits, as Vault's where it has them.
const (
	MinLength   = 4
	MaxLength   = 100
	MaxDocBytes = 16 << 10 // a policy document
	MaxRules    = 32
	MaxCharset  = 1024 // distinct characters in one rule
)

// ErrInvalid wraps every refusal of a policy document; the text says what.
var ErrInvalid = errors.New("invalid password policy")

// Policy is a parsed password policy.
type Policy struct {
	Length int
	Rules  []Rule
	chars  []rune // every rule's characters, once each, in order of appearance
}

// Rule is one "charset" rule: at least MinChars of the password's
// characters are from Charset.
type Rule struct {
	Charset  []rune
	MinChars int
}

// Parse reads a policy document (HCL or JSON).
func Parse(doc string) (p *Policy, err error) {
	if len(doc) > MaxDocBytes {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrInvalid, MaxDocBytes)
	}
	defer func() { // the HCL parser is not ours: whatever it does, bad input is an error
		if r := recover(); r != nil {
			p, err = nil, fmt.Errorf("%w: unreadable document", ErrInvalid)
		}
	}()
	var m map[string]any
	if err := hcl.Decode(&m, doc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return fromMap(m)
}

func fromMap(m map[string]any) (*Policy, error) {
	p := &Policy{}
	for k, v := range m {
		switch k {
		case "length":
			n, ok := v.(int)
			if !ok {
				return nil, fmt.Errorf("%w: length must be a whole number", ErrInvalid)
			}
			p.Length = n
		case "rule":
			if err := p.addRules(v); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("%w: unknown field %q (want length and rule \"charset\" blocks)", ErrInvalid, k)
		}
	}
	return p, p.check()
}

// addRules reads the rule blocks: HCL decodes `rule "charset" {…}` as a
// list of one-key maps, each holding a list of the block's bodies.
func (p *Policy) addRules(v any) error {
	blocks, ok := v.([]map[string]any)
	if !ok {
		return fmt.Errorf("%w: rule must be a block: rule \"charset\" { … }", ErrInvalid)
	}
	for _, b := range blocks {
		for kind, body := range b {
			if kind != "charset" {
				return fmt.Errorf("%w: unknown rule %q (want \"charset\")", ErrInvalid, kind)
			}
			bodies, ok := body.([]map[string]any)
			if !ok {
				return fmt.Errorf("%w: rule \"charset\" must be a block", ErrInvalid)
			}
			for _, f := range bodies {
				r, err := charsetRule(f)
				if err != nil {
					return err
				}
				p.Rules = append(p.Rules, r)
			}
		}
	}
	return nil
}

func charsetRule(f map[string]any) (Rule, error) {
	var r Rule
	set := false
	for k, v := range f {
		switch k {
		case "charset":
			s, ok := v.(string)
			if !ok {
				return r, fmt.Errorf("%w: charset must be a string", ErrInvalid)
			}
			cs, err := runes(s)
			if err != nil {
				return r, err
			}
			r.Charset, set = cs, true
		case "min-chars":
			n, ok := v.(int)
			if !ok || n < 0 {
				return r, fmt.Errorf("%w: min-chars must be a whole number, 0 or more", ErrInvalid)
			}
			r.MinChars = n
		default:
			return r, fmt.Errorf("%w: unknown field %q in a charset rule (want charset and min-chars)", ErrInvalid, k)
		}
	}
	if !set || len(r.Charset) == 0 {
		return r, fmt.Errorf("%w: a charset rule needs a charset", ErrInvalid)
	}
	return r, nil
}

// runes returns s's characters once each, refusing what a password should
// not hold.
func runes(s string) ([]rune, error) {
	if !utf8.ValidString(s) {
		return nil, fmt.Errorf("%w: charset is not UTF-8", ErrInvalid)
	}
	var out []rune
	for _, c := range s {
		if !unicode.IsGraphic(c) || unicode.IsSpace(c) && c != ' ' {
			return nil, fmt.Errorf("%w: charset holds %U, which is not a printable character", ErrInvalid, c)
		}
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
		if len(out) > MaxCharset {
			return nil, fmt.Errorf("%w: a charset of more than %d characters", ErrInvalid, MaxCharset)
		}
	}
	return out, nil
}

func (p *Policy) check() error {
	switch {
	case p.Length < MinLength || p.Length > MaxLength:
		return fmt.Errorf("%w: length must be %d to %d, not %d", ErrInvalid, MinLength, MaxLength, p.Length)
	case len(p.Rules) == 0:
		return fmt.Errorf("%w: no charset rule", ErrInvalid)
	case len(p.Rules) > MaxRules:
		return fmt.Errorf("%w: more than %d rules", ErrInvalid, MaxRules)
	}
	need := 0
	for _, r := range p.Rules {
		need += r.MinChars
		for _, c := range r.Charset {
			if !slices.Contains(p.chars, c) {
				p.chars = append(p.chars, c)
			}
		}
	}
	if need > p.Length {
		return fmt.Errorf("%w: the rules' min-chars add up to %d, more than the length %d", ErrInvalid, need, p.Length)
	}
	return nil
}

// maxTries bounds the draws Generate makes before it builds a password
// rule by rule: a policy whose rules few random strings satisfy (length 4
// with four rules of one character each) still gets one.
const maxTries = 1000

// Generate returns a password: the first of up to maxTries uniform draws
// from the policy's characters that satisfies every rule, else one built
// from each rule's minimum and shuffled.
func (p *Policy) Generate(rnd io.Reader) (string, error) {
	out := make([]rune, p.Length)
	for range maxTries {
		for i := range out {
			c, err := pick(rnd, p.chars)
			if err != nil {
				return "", err
			}
			out[i] = c
		}
		if p.satisfied(out) {
			return string(out), nil
		}
	}
	return p.build(rnd, out)
}

func (p *Policy) satisfied(pw []rune) bool {
	for _, r := range p.Rules {
		n := 0
		for _, c := range pw {
			if slices.Contains(r.Charset, c) {
				n++
			}
		}
		if n < r.MinChars {
			return false
		}
	}
	return true
}

func (p *Policy) build(rnd io.Reader, out []rune) (string, error) {
	i := 0
	for _, r := range p.Rules {
		for range r.MinChars {
			c, err := pick(rnd, r.Charset)
			if err != nil {
				return "", err
			}
			out[i] = c
			i++
		}
	}
	for ; i < len(out); i++ {
		c, err := pick(rnd, p.chars)
		if err != nil {
			return "", err
		}
		out[i] = c
	}
	for j := len(out) - 1; j > 0; j-- { // Fisher–Yates
		k, err := uniform(rnd, j+1)
		if err != nil {
			return "", err
		}
		out[j], out[k] = out[k], out[j]
	}
	return string(out), nil
}

func pick(rnd io.Reader, set []rune) (rune, error) {
	i, err := uniform(rnd, len(set))
	if err != nil {
		return 0, err
	}
	return set[i], nil
}

// uniform returns a number in [0, n) from rnd without modulo bias: two
// bytes, drawn again while they fall in the incomplete last block.
func uniform(rnd io.Reader, n int) (int, error) {
	if n <= 0 || n > math.MaxUint16 {
		return 0, fmt.Errorf("cannot draw from %d choices", n)
	}
	limit := (1 << 16) / n * n
	var b [2]byte
	for {
		if _, err := io.ReadFull(rnd, b[:]); err != nil {
			return 0, fmt.Errorf("random source: %w", err)
		}
		if v := int(b[0])<<8 | int(b[1]); v < limit {
			return v % n, nil
		}
	}
}
