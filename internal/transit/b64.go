package transit

import (
	"encoding/base64"
	"encoding/binary"
	"slices"
)

// Standard padded base64 (RFC 4648 §4), the encoding of every "vault:vN:"
// payload except jws signatures. encoding/base64 costs as much as AES-GCM
// itself on the encrypt and decrypt paths, so these two functions do the
// same work with bigger steps: the encoder turns 6 bytes into 8 characters
// with four lookups of 12 bits each in a 4096-entry table of character
// pairs, the decoder turns 8 characters into 6 bytes with lookups in tables
// of pre-shifted 6-bit values, checking validity once per input through an
// error bit. The decoder is strict: padding required, padding bits zero, no
// line breaks (exactly base64.StdEncoding.Strict() on input without '\r'
// and '\n', which FuzzBase64 checks).

const b64Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

// b64Pairs[v] holds the two characters for the 12-bit value v, the first
// in the low byte (little-endian memory order).
var b64Pairs [4096]uint16

// b64Dec[k][c] is the 6-bit value of character c placed at sextet k of a
// 24-bit group, or b64Bad for a character outside the alphabet.
var b64Dec [4][256]uint32

const b64Bad = 1 << 24

func init() {
	for v := range b64Pairs {
		b64Pairs[v] = uint16(b64Alphabet[v>>6]) | uint16(b64Alphabet[v&63])<<8
	}
	for k := range b64Dec {
		for c := range b64Dec[k] {
			b64Dec[k][c] = b64Bad
		}
	}
	for i := range 64 {
		c := b64Alphabet[i]
		b64Dec[0][c] = uint32(i) << 18
		b64Dec[1][c] = uint32(i) << 12
		b64Dec[2][c] = uint32(i) << 6
		b64Dec[3][c] = uint32(i)
	}
}

// appendB64 appends the standard padded base64 of src to dst.
func appendB64(dst, src []byte) []byte {
	n := base64.StdEncoding.EncodedLen(len(src))
	dst = slices.Grow(dst, n)
	out := dst[len(dst) : len(dst)+n]
	s, o := src, out
	for len(s) >= 14 && len(o) >= 16 {
		// Two steps per iteration; each reads 8 bytes and uses 6.
		v := binary.BigEndian.Uint64(s)
		w := binary.BigEndian.Uint64(s[6:])
		binary.LittleEndian.PutUint64(o, uint64(b64Pairs[v>>52&0xfff])|
			uint64(b64Pairs[v>>40&0xfff])<<16|uint64(b64Pairs[v>>28&0xfff])<<32|uint64(b64Pairs[v>>16&0xfff])<<48)
		binary.LittleEndian.PutUint64(o[8:], uint64(b64Pairs[w>>52&0xfff])|
			uint64(b64Pairs[w>>40&0xfff])<<16|uint64(b64Pairs[w>>28&0xfff])<<32|uint64(b64Pairs[w>>16&0xfff])<<48)
		s, o = s[12:], o[16:]
	}
	si, di := len(src)-len(s), len(out)-len(o)
	for ; si+8 <= len(src); si, di = si+6, di+8 {
		v := binary.BigEndian.Uint64(src[si:])
		binary.LittleEndian.PutUint64(out[di:], uint64(b64Pairs[v>>52&0xfff])|
			uint64(b64Pairs[v>>40&0xfff])<<16|uint64(b64Pairs[v>>28&0xfff])<<32|uint64(b64Pairs[v>>16&0xfff])<<48)
	}
	for ; si+3 <= len(src); si, di = si+3, di+4 {
		v := uint(src[si])<<16 | uint(src[si+1])<<8 | uint(src[si+2])
		binary.LittleEndian.PutUint32(out[di:], uint32(b64Pairs[v>>12&0xfff])|uint32(b64Pairs[v&0xfff])<<16)
	}
	switch len(src) - si {
	case 1:
		v := uint(src[si])
		out[di], out[di+1], out[di+2], out[di+3] = b64Alphabet[v>>2], b64Alphabet[v<<4&63], '=', '='
	case 2:
		v := uint(src[si])<<8 | uint(src[si+1])
		out[di], out[di+1], out[di+2], out[di+3] = b64Alphabet[v>>10], b64Alphabet[v>>4&63], b64Alphabet[v<<2&63], '='
	}
	return dst[:len(dst)+n]
}

// appendUnB64 appends the decoding of src (standard, padded, strict) to dst.
// On invalid input it returns dst unchanged and false.
func appendUnB64[T string | []byte](dst []byte, src T) ([]byte, bool) {
	n := len(src)
	if n%4 != 0 {
		return dst, false
	}
	if n == 0 {
		return dst, true
	}
	pad := 0
	if src[n-1] == '=' {
		pad = 1
		if src[n-2] == '=' {
			pad = 2
		}
	}
	size := n/4*3 - pad
	start := len(dst)
	dst = slices.Grow(dst, size)
	out := dst[start : start+size]
	body := n - 4 // the last quantum may hold padding
	var acc uint32
	s, o := src[:body], out
	for len(s) >= 16 && len(o) >= 12 {
		a := b64Dec[0][s[0]] | b64Dec[1][s[1]] | b64Dec[2][s[2]] | b64Dec[3][s[3]]
		b := b64Dec[0][s[4]] | b64Dec[1][s[5]] | b64Dec[2][s[6]] | b64Dec[3][s[7]]
		c := b64Dec[0][s[8]] | b64Dec[1][s[9]] | b64Dec[2][s[10]] | b64Dec[3][s[11]]
		d := b64Dec[0][s[12]] | b64Dec[1][s[13]] | b64Dec[2][s[14]] | b64Dec[3][s[15]]
		acc |= a | b | c | d
		o[0], o[1], o[2], o[3], o[4], o[5] = byte(a>>16), byte(a>>8), byte(a), byte(b>>16), byte(b>>8), byte(b)
		o[6], o[7], o[8], o[9], o[10], o[11] = byte(c>>16), byte(c>>8), byte(c), byte(d>>16), byte(d>>8), byte(d)
		s, o = s[16:], o[12:]
	}
	si, di := body-len(s), len(out)-len(o)
	for ; si+8 <= body; si, di = si+8, di+6 {
		a := b64Dec[0][src[si]] | b64Dec[1][src[si+1]] | b64Dec[2][src[si+2]] | b64Dec[3][src[si+3]]
		b := b64Dec[0][src[si+4]] | b64Dec[1][src[si+5]] | b64Dec[2][src[si+6]] | b64Dec[3][src[si+7]]
		acc |= a | b
		o := out[di : di+6 : di+6]
		o[0], o[1], o[2], o[3], o[4], o[5] = byte(a>>16), byte(a>>8), byte(a), byte(b>>16), byte(b>>8), byte(b)
	}
	for ; si < body; si, di = si+4, di+3 {
		a := b64Dec[0][src[si]] | b64Dec[1][src[si+1]] | b64Dec[2][src[si+2]] | b64Dec[3][src[si+3]]
		acc |= a
		out[di], out[di+1], out[di+2] = byte(a>>16), byte(a>>8), byte(a)
	}
	s0, s1, s2, s3 := src[body], src[body+1], src[body+2], src[body+3]
	switch pad {
	case 0:
		a := b64Dec[0][s0] | b64Dec[1][s1] | b64Dec[2][s2] | b64Dec[3][s3]
		acc |= a
		out[di], out[di+1], out[di+2] = byte(a>>16), byte(a>>8), byte(a)
	case 1:
		a := b64Dec[0][s0] | b64Dec[1][s1] | b64Dec[2][s2]
		acc |= a | a<<24 // the low 8 bits (padding bits) must be zero
		out[di], out[di+1] = byte(a>>16), byte(a>>8)
	default:
		a := b64Dec[0][s0] | b64Dec[1][s1]
		acc |= a | a<<16 // the low 16 bits (padding bits) must be zero
		out[di] = byte(a >> 16)
	}
	if acc&^(1<<24-1) != 0 {
		clear(out)
		return dst[:start], false
	}
	return dst[:start+size], true
}
