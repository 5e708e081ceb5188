package jose

import "encoding/binary"

// A strict base64url decoder (RFC 4648 §5, no padding) for the request path.
// encoding/base64 is correct but checks each character separately and skips
// CR and LF; this one looks up four characters in four pre-shifted tables and
// checks them all at once, and accepts nothing but the URL alphabet.

const b64Invalid = 0xFF000000

var b64Tables = func() (t [4][256]uint32) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	for i := range t {
		for c := range t[i] {
			t[i][c] = b64Invalid
		}
	}
	for v, c := range []byte(alphabet) {
		t[0][c] = uint32(v) << 18
		t[1][c] = uint32(v) << 12
		t[2][c] = uint32(v) << 6
		t[3][c] = uint32(v)
	}
	return t
}()

// decodedLen is the exact decoded size of n base64url characters (without
// padding), or -1 when no valid encoding has that length.
func decodedLen(n int) int {
	if n%4 == 1 {
		return -1
	}
	return n/4*3 + (n%4*3)/4
}

// decodeB64 decodes src into dst, which must hold decodedLen(len(src)) bytes.
// It refuses any character outside the URL alphabet (padding included) and
// non-zero trailing bits, so every byte string has exactly one encoding.
func decodeB64(dst []byte, src string) bool {
	t0, t1, t2, t3 := &b64Tables[0], &b64Tables[1], &b64Tables[2], &b64Tables[3]
	var bad uint32
	// While dst has room for it, the six bytes of eight characters are
	// written with one eight-byte store; its last two bytes, zero, are
	// overwritten by the next step.
	for len(src) >= 8 && len(dst) >= 8 {
		x := t0[src[0]] | t1[src[1]] | t2[src[2]] | t3[src[3]]
		y := t0[src[4]] | t1[src[5]] | t2[src[6]] | t3[src[7]]
		bad |= x | y
		binary.BigEndian.PutUint64(dst, uint64(x)<<40|uint64(y&0xFFFFFF)<<16)
		dst, src = dst[6:], src[8:]
	}
	for len(src) >= 8 && len(dst) >= 6 {
		x := t0[src[0]] | t1[src[1]] | t2[src[2]] | t3[src[3]]
		y := t0[src[4]] | t1[src[5]] | t2[src[6]] | t3[src[7]]
		bad |= x | y
		_ = dst[5]
		dst[0], dst[1], dst[2] = byte(x>>16), byte(x>>8), byte(x)
		dst[3], dst[4], dst[5] = byte(y>>16), byte(y>>8), byte(y)
		dst, src = dst[6:], src[8:]
	}
	for len(src) >= 4 && len(dst) >= 3 {
		x := t0[src[0]] | t1[src[1]] | t2[src[2]] | t3[src[3]]
		bad |= x
		dst[0], dst[1], dst[2] = byte(x>>16), byte(x>>8), byte(x)
		dst, src = dst[3:], src[4:]
	}
	switch len(src) {
	case 0:
	case 2:
		if len(dst) < 1 {
			return false
		}
		x := t0[src[0]] | t1[src[1]]
		bad |= x
		if x&0xFFFF != 0 { // the last 4 of the 12 bits must be zero
			return false
		}
		dst[0] = byte(x >> 16)
	case 3:
		if len(dst) < 2 {
			return false
		}
		x := t0[src[0]] | t1[src[1]] | t2[src[2]]
		bad |= x
		if x&0xFF != 0 { // the last 2 of the 18 bits must be zero
			return false
		}
		dst[0], dst[1] = byte(x>>16), byte(x>>8)
	default:
		return false
	}
	return bad&b64Invalid == 0
}
