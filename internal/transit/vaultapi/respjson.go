package vaultapi

import (
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
	"strconv"
)

// Responses are Vault's envelope around the operation's data, appended to
// the request's pooled buffer: the hot operations write their data by
// appending (their strings are base64 and Vault's "vault:vN:" texts, which
// need no escaping), the others marshal a value with encoding/json.

// requestID is a random UUID (version 4), as Vault's request_id. It names
// a request in logs and audit records and protects nothing, so it comes
// from math/rand/v2 (a per-thread ChaCha8), not the system's source.
type requestID [36]byte

// fill sets id to a new random id, in place (an id returned by value and
// copied cost as much as its digits).
func (id *requestID) fill() {
	a, b := rand.Uint64(), rand.Uint64()
	a = a&^(0xf<<12) | 4<<12   // version 4
	b = b&^(0x3<<62) | 0x2<<62 // variant 10
	// 8-4-4-4-12 digits from four words of eight.
	hi, lo := hex8(uint32(a>>32)), hex8(uint32(a))
	binary.BigEndian.PutUint64(id[0:8], hi)
	binary.BigEndian.PutUint32(id[9:13], uint32(lo>>32))
	binary.BigEndian.PutUint32(id[14:18], uint32(lo))
	hi, lo = hex8(uint32(b>>32)), hex8(uint32(b))
	binary.BigEndian.PutUint32(id[19:23], uint32(hi>>32))
	binary.BigEndian.PutUint32(id[24:28], uint32(hi))
	binary.BigEndian.PutUint64(id[28:36], lo)
	id[8], id[13], id[18], id[23] = '-', '-', '-', '-'
}

// hex8 is v's eight lowercase hex digits, the first in the top byte,
// made eight at a time: each nibble is spread into a byte of its own, and
// a byte holding 10 or more (which adding 6 carries into bit 4) gets the
// distance from '9'+1 to 'a' on top of '0'.
func hex8(v uint32) uint64 {
	x := uint64(v)
	x = (x | x<<16) & 0x0000ffff0000ffff
	x = (x | x<<8) & 0x00ff00ff00ff00ff
	x = (x | x<<4) & 0x0f0f0f0f0f0f0f0f
	letters := (x + 0x0606060606060606) >> 4 & 0x0101010101010101
	return x + 0x3030303030303030 + letters*('a'-'9'-1)
}

func (id *requestID) String() string { return string(id[:]) }

// appendHead appends the envelope up to the data's value: the request id
// is the audit log's when the request is audited (ext), so that the
// answer's request_id, its X-Request-Id and its record name it alike, and
// else id.
func appendHead(b []byte, id *requestID, ext string) []byte {
	b = append(b, `{"request_id":"`...)
	if ext != "" {
		b = append(b, ext...)
	} else {
		b = append(b, id[:]...)
	}
	return append(b, `","lease_id":"","renewable":false,"lease_duration":0,"data":`...)
}

// appendTail appends the envelope after the data.
func appendTail(b []byte, warnings []string) []byte {
	b = append(b, `,"wrap_info":null,"warnings":`...)
	if len(warnings) == 0 {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, w := range warnings {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, w)
		}
		b = append(b, ']')
	}
	return append(b, `,"auth":null}`+"\n"...)
}

// appendString appends s as a JSON string, escaped as encoding/json
// escapes it (HTML-safe): printable ASCII is copied and line breaks, tabs,
// quotes and backslashes escaped in place (PEM keys have line breaks, and
// go no further than this buffer); anything else goes through
// encoding/json.
func appendString[S ~string | ~[]byte](b []byte, s S) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\n' && c != '\r' && c != '\t' || c >= 0x7f || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(string(s)) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// appendKey appends "name": after a comma unless first.
func appendKey(b []byte, name string, first bool) []byte {
	if !first {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, name...)
	return append(b, '"', ':')
}

func appendInt(b []byte, name string, v int, first bool) []byte {
	return strconv.AppendInt(appendKey(b, name, first), int64(v), 10)
}

func appendBool(b []byte, name string, v bool, first bool) []byte {
	return strconv.AppendBool(appendKey(b, name, first), v)
}

func appendStr[S ~string | ~[]byte](b []byte, name string, v S, first bool) []byte {
	return appendString(appendKey(b, name, first), v)
}
