package transit

import (
	"encoding/base64"
	"slices"
	"strconv"
)

// The text forms Vault writes: "vault:v" + decimal version + ":" + payload,
// where the payload is standard padded base64 of nonce‖ciphertext‖tag (for
// encryption), of the signature (asn1 marshaling) or of the HMAC. Signatures
// with jws marshaling carry unpadded base64url instead.
const textPrefix = "vault:v"

// urlB64 reads jws signatures (unpadded base64url, zero padding bits).
var urlB64 = base64.RawURLEncoding.Strict()

// Ciphertext is a parsed "vault:vN:base64" text: the key version and the
// decoded payload (for encryption, nonce‖ciphertext‖tag; for RSA keys, the
// RSA-OAEP ciphertext).
type Ciphertext struct {
	Version int
	Data    []byte
}

// ParseCiphertext reads a "vault:vN:base64" text strictly: the exact prefix,
// a version from 1 to MaxVersion in canonical decimal (no sign, no leading
// zero; Vault's legacy "v0" is refused), one colon, and canonical padded
// standard base64 (no line breaks, zero padding bits) of at least one byte.
// Anything ParseCiphertext accepts, AppendText writes back byte for byte.
func ParseCiphertext(s string) (Ciphertext, error) {
	v, payload, err := splitText(s)
	if err != nil {
		return Ciphertext{}, err
	}
	data, err := decodeStd(nil, payload)
	if err != nil {
		return Ciphertext{}, err
	}
	if len(data) == 0 {
		return Ciphertext{}, errShort
	}
	return Ciphertext{Version: v, Data: data}, nil
}

// AppendText appends "vault:vN:" and the standard base64 of Data to dst.
func (c Ciphertext) AppendText(dst []byte) []byte {
	dst = appendPrefix(dst, c.Version)
	return appendB64(dst, c.Data)
}

// String returns the text form.
func (c Ciphertext) String() string { return string(c.AppendText(nil)) }

// appendPrefix appends "vault:vN:".
func appendPrefix(dst []byte, version int) []byte {
	dst = append(dst, textPrefix...)
	dst = strconv.AppendUint(dst, uint64(version), 10)
	return append(dst, ':')
}

// prefixLen is len(appendPrefix(nil, version)).
func prefixLen(version int) int {
	n := len(textPrefix) + 2
	for v := version; v >= 10; v /= 10 {
		n++
	}
	return n
}

// splitText splits a versioned text into its version and payload without
// allocating.
func splitText[T string | []byte](s T) (int, T, error) {
	var zero T
	if len(s) < len(textPrefix) || string(s[:len(textPrefix)]) != textPrefix {
		return 0, zero, errNoPrefix
	}
	s = s[len(textPrefix):]
	v, i := 0, 0
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		if i == 10 { // more digits than MaxVersion has
			return 0, zero, errBadVersion
		}
		v = v*10 + int(s[i]-'0')
	}
	if i == 0 || s[0] == '0' || v > MaxVersion {
		return 0, zero, errBadVersion
	}
	if i == len(s) || s[i] != ':' {
		return 0, zero, errNoSeparator
	}
	return v, s[i+1:], nil
}

// decodeStd appends the strict standard base64 decoding of src to dst.
// Go's decoder skips '\r' and '\n'; they are refused here, so that a text
// has exactly one spelling.
func decodeStd[T string | []byte](dst []byte, src T) ([]byte, error) {
	out, ok := appendUnB64(dst, src)
	if !ok {
		return dst, errBadBase64
	}
	return out, nil
}

func decodeB64[T string | []byte](enc *base64.Encoding, dst []byte, src T) ([]byte, error) {
	for i := 0; i < len(src); i++ {
		if src[i] == '\r' || src[i] == '\n' {
			return dst, errBadBase64
		}
	}
	n := len(dst)
	need := enc.DecodedLen(len(src))
	dst = slices.Grow(dst, need)
	m, err := enc.Decode(dst[n:n+need], []byte(src))
	if err != nil {
		return dst[:n], errBadBase64
	}
	return dst[:n+m], nil
}
