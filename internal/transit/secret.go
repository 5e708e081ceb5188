package transit

import "fmt"

// noCompare makes a struct non-comparable, so that secrets are never
// compared with == (which is not constant time) by accident.
type noCompare [0]func()

// Secret holds secret bytes handed to the caller on purpose: a data key's
// plaintext, an exported key. It prints as "[redacted]" in every fmt verb
// and in logs; the bytes come out only through Reveal and AppendBase64, whose
// names say what they do.
type Secret struct {
	_ noCompare
	b []byte
}

func newSecret(b []byte) Secret { return Secret{b: b} }

// Reveal returns the secret bytes themselves (not a copy). The caller writes
// them where they must go and keeps no other reference.
func (s Secret) Reveal() []byte { return s.b }

// Len is the number of secret bytes.
func (s Secret) Len() int { return len(s.b) }

// AppendBase64 appends the standard base64 encoding of the secret to dst.
func (s Secret) AppendBase64(dst []byte) []byte { return appendB64(dst, s.b) }

// Zeroize overwrites the secret bytes.
func (s Secret) Zeroize() { clear(s.b) }

// String, GoString and Format never print the bytes.
func (s Secret) String() string                { return "[redacted]" }
func (s Secret) GoString() string              { return "transit.Secret{[redacted]}" }
func (s Secret) Format(f fmt.State, verb rune) { fmt.Fprint(f, "[redacted]") }
func (s Secret) MarshalText() ([]byte, error)  { return []byte("[redacted]"), nil }
