package audit

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// A Hash is the SHA-256 of a line's canonical body. It prints as 64
// lower-case hex digits.
type Hash [sha256.Size]byte

// String returns the hash in lower-case hex.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// ParseHash reads 64 lower-case hex digits.
func ParseHash(s string) (Hash, error) {
	var h Hash
	if len(s) != 2*len(h) || !parseHex(h[:], s) {
		return h, errors.New("a hash is 64 lower-case hex digits")
	}
	return h, nil
}

// parseHex decodes len(dst)*2 lower-case hex digits of s into dst.
func parseHex(dst []byte, s string) bool {
	if len(s) != 2*len(dst) {
		return false
	}
	for i := range s {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	_, err := hex.Decode(dst, []byte(s))
	return err == nil
}

// An Anchor is one line of a chain, by seq and hash, kept apart from the
// log (Log.LastCheckpoint) so that Verify can detect a truncation that the
// file alone cannot show.
type Anchor struct {
	Seq  uint64
	Hash Hash
}

// LineType is what a line is.
type LineType uint8

// The line types.
const (
	TypeRecord     LineType = iota + 1 // an audit Record
	TypeCheckpoint                     // a signed checkpoint
	TypeOpen                           // a writer began or continued the chain
)

var typeNames = [...]string{"", "record", "checkpoint", "open"}

func (t LineType) String() string { return enumName(typeNames[:], t, "LineType") }

// Start says how an open line begins or continues the chain.
type Start uint8

// The starts.
const (
	StartNew     Start = iota + 1 // a new chain: seq 1, prev all zeros, a new file
	StartRestart                  // a writer restarted and continues the chain in the same file
	StartRotate                   // the first line of the next file; prevfile names the one before
	StartSegment                  // a new chain (prev all zeros, seq continuing) after a tail that did not verify
)

var startNames = [...]string{"", "new", "restart", "rotate", "segment"}

func (s Start) String() string { return enumName(startNames[:], s, "Start") }

// enumName is the name of v, a value of the enumeration typ.
func enumName[T ~uint8](names []string, v T, typ string) string {
	if int(v) >= len(names) {
		return typ + "(" + strconv.Itoa(int(v)) + ")"
	}
	return names[v]
}

// FileName is the name of the file whose first line has seq:
// audit-<seq as 20 digits>.jsonl, so names sort in chain order. A rotate
// line names the file before it this way.
func FileName(seq uint64) string {
	return fmt.Sprintf("audit-%020d.jsonl", seq)
}

// newFile reports whether a line with this start begins a file.
func (s Start) newFile() bool { return s != StartRestart }

// timeLayout is the one time format: UTC, nanoseconds, fixed width.
const timeLayout = "2006-01-02T15:04:05.000000000Z"

// checkpointDomain prefixes the message a checkpoint signs.
const checkpointDomain = "keygate audit checkpoint v1\n"

// appendHeader starts a line's body: {"v":1,"node":..,"seq":..,"prev":"..",
func appendHeader(dst []byte, node string, seq uint64, prev *Hash) []byte {
	dst = append(dst, `{"v":1,"node":"`...)
	dst = append(dst, node...)
	dst = append(dst, `","seq":`...)
	dst = strconv.AppendUint(dst, seq, 10)
	dst = append(dst, `,"prev":"`...)
	dst = hex.AppendEncode(dst, prev[:])
	return append(dst, `",`...)
}

func appendTimeType(dst []byte, t time.Time, typ LineType) []byte {
	dst = append(dst, `"time":"`...)
	dst = appendTime(dst, t)
	dst = append(dst, `","type":"`...)
	dst = append(dst, typeNames[typ]...)
	return append(dst, '"')
}

// appendTime appends t in timeLayout; a record's time is checked to be in
// years 1 to 9999, where the layout is fixed width. It is Time.AppendFormat's
// result at less than half its cost (BenchmarkAppendTime), which every
// record pays.
func appendTime(dst []byte, t time.Time) []byte {
	t = t.UTC()
	y, mo, d := t.Date()
	h, mi, s := t.Clock()
	dst = appendDigits(dst, y, 4)
	dst = append(dst, '-')
	dst = appendDigits(dst, int(mo), 2)
	dst = append(dst, '-')
	dst = appendDigits(dst, d, 2)
	dst = append(dst, 'T')
	dst = appendDigits(dst, h, 2)
	dst = append(dst, ':')
	dst = appendDigits(dst, mi, 2)
	dst = append(dst, ':')
	dst = appendDigits(dst, s, 2)
	dst = append(dst, '.')
	dst = appendDigits(dst, t.Nanosecond(), 9)
	return append(dst, 'Z')
}

// appendDigits appends v, which is not negative, in exactly n digits.
func appendDigits(dst []byte, v, n int) []byte {
	var b [9]byte
	for i := n - 1; i >= 0; i-- {
		b[i] = byte('0' + v%10)
		v /= 10
	}
	return append(dst, b[:n]...)
}

func appendStr(dst []byte, name, v string) []byte {
	dst = append(dst, ',', '"')
	dst = append(dst, name...)
	dst = append(dst, `":"`...)
	dst = append(dst, v...)
	return append(dst, '"')
}

func appendUint(dst []byte, name string, v uint64) []byte {
	dst = append(dst, ',', '"')
	dst = append(dst, name...)
	dst = append(dst, `":`...)
	return strconv.AppendUint(dst, v, 10)
}

// appendRecord appends a record's members (everything after the header)
// to dst. r must be valid.
func appendRecord(dst []byte, r *Record) []byte {
	dst = appendTimeType(dst, r.Time, TypeRecord)
	if r.RequestID != "" {
		dst = appendStr(dst, "req", r.RequestID)
	}
	if r.Tenant != "" {
		dst = appendStr(dst, "tenant", r.Tenant)
	}
	if r.Principal.Kind != PrincipalNone {
		dst = append(dst, `,"principal":{"kind":"`...)
		dst = append(dst, r.Principal.Kind.String()...)
		dst = append(dst, '"')
		if r.Principal.ID != "" {
			dst = appendStr(dst, "id", r.Principal.ID)
		}
		dst = append(dst, '}')
	}
	dst = appendStr(dst, "op", string(r.Operation))
	if r.Key.Name != "" {
		dst = append(dst, `,"key":{"name":"`...)
		dst = append(dst, r.Key.Name...)
		dst = append(dst, '"')
		if r.Key.Version != 0 {
			dst = appendUint(dst, "version", uint64(r.Key.Version))
		}
		dst = append(dst, '}')
	}
	dst = appendStr(dst, "result", r.Result.String())
	if r.Reason != "" {
		dst = appendStr(dst, "reason", string(r.Reason))
	}
	if r.Status != 0 {
		dst = appendUint(dst, "status", uint64(r.Status))
	}
	if r.Remote.IsValid() {
		dst = append(dst, `,"remote":"`...)
		dst = r.Remote.AppendTo(dst)
		dst = append(dst, '"')
	}
	if r.Count != 0 {
		dst = appendUint(dst, "count", r.Count)
		dst = append(dst, `,"since":"`...)
		dst = appendTime(dst, r.Since)
		dst = append(dst, '"')
	}
	if len(r.Hashed) > 0 {
		dst = appendHashed(dst, r.Hashed)
	}
	return dst
}

// appendHashed writes the map in byte order of its names.
func appendHashed(dst []byte, m map[string]Digest) []byte {
	var buf [MaxHashed]string
	names := buf[:0]
	for name := range m {
		names = append(names, name)
	}
	slices.Sort(names)
	dst = append(dst, `,"hmac":{`...)
	for i, name := range names {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '"')
		dst = append(dst, name...)
		dst = append(dst, `":"`...)
		dst = m[name].appendText(dst)
		dst = append(dst, '"')
	}
	return append(dst, '}')
}

// appendOpen appends an open line's members.
func appendOpen(dst []byte, t time.Time, start Start, prevFile string, unsigned uint64) []byte {
	dst = appendTimeType(dst, t, TypeOpen)
	dst = appendStr(dst, "start", start.String())
	if prevFile != "" {
		dst = appendStr(dst, "prevfile", prevFile)
	}
	if unsigned != 0 {
		dst = appendUint(dst, "unsigned", unsigned)
	}
	return dst
}

// appendCheckpoint appends a checkpoint's members up to, not including, its
// signature.
func appendCheckpoint(dst []byte, t time.Time, keyID string) []byte {
	dst = appendTimeType(dst, t, TypeCheckpoint)
	return appendStr(dst, "kid", keyID)
}

// appendSig appends a checkpoint's signature member.
func appendSig(dst []byte, sig []byte) []byte {
	dst = append(dst, `,"sig":"`...)
	dst = base64.RawURLEncoding.AppendEncode(dst, sig)
	return append(dst, '"')
}

// finishLine closes the body begun at body[start:] (which ends with its
// last member), hashes it and appends the hash member and the newline. It
// returns the extended buffer and the hash.
func finishLine(buf []byte, start int) ([]byte, Hash) {
	buf = append(buf, '}')
	h := Hash(sha256.Sum256(buf[start:]))
	buf = buf[:len(buf)-1]
	buf = append(buf, `,"hash":"`...)
	buf = hex.AppendEncode(buf, h[:])
	return append(buf, "\"}\n"...), h
}

// checkpointMessage is what a checkpoint signs: the domain string and the
// checkpoint's body without its sig and hash members.
func checkpointMessage(dst, bodyWithoutSig []byte) []byte {
	dst = append(dst, checkpointDomain...)
	dst = append(dst, bodyWithoutSig...)
	return append(dst, '}')
}

// signCheckpoint appends the signature member to a checkpoint body begun at
// buf[start:], using scratch for the message.
func signCheckpoint(buf []byte, start int, k *SigningKey, scratch []byte) ([]byte, []byte) {
	scratch = checkpointMessage(scratch[:0], buf[start:])
	return appendSig(buf, ed25519.Sign(k.priv, scratch)), scratch
}
