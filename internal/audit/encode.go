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
	var x [2 * sha256.Size]byte
	return appendHeaderHex(dst, node, seq, prev.appendHex(x[:0]))
}

// appendHeaderHex is appendHeader with the previous hash already in hex:
// the writer has it from the line before, whose hash member it is.
func appendHeaderHex(dst []byte, node string, seq uint64, prevHex []byte) []byte {
	dst = append(dst, `{"v":1,"node":"`...)
	dst = append(dst, node...)
	dst = append(dst, `","seq":`...)
	dst = strconv.AppendUint(dst, seq, 10)
	dst = append(dst, `,"prev":"`...)
	dst = append(dst, prevHex...)
	return append(dst, `",`...)
}

// hexPairs holds every byte's two lower-case hex digits, so that a hash is
// encoded a byte, not a nibble, at a time: a line has three (prev, hash
// and usually a digest).
var hexPairs = func() (t [256][2]byte) {
	const digits = "0123456789abcdef"
	for i := range t {
		t[i] = [2]byte{digits[i>>4], digits[i&15]}
	}
	return t
}()

// appendHex appends h in lower-case hex, as hex.AppendEncode does.
func (h *Hash) appendHex(dst []byte) []byte { return appendHex32(dst, (*[32]byte)(h)) }

func appendHex32(dst []byte, b *[32]byte) []byte {
	dst = slices.Grow(dst, 64)
	n := len(dst)
	dst = dst[:n+64]
	out := (*[64]byte)(dst[n:])
	for i, c := range b {
		p := hexPairs[c]
		out[2*i], out[2*i+1] = p[0], p[1]
	}
	return dst
}

func appendTimeType(dst []byte, t time.Time, typ LineType) []byte {
	dst = append(dst, `"time":"`...)
	dst = appendTime(dst, t)
	dst = append(dst, `","type":"`...)
	dst = append(dst, typeNames[typ]...)
	return append(dst, '"')
}

// appendTime appends t in timeLayout; a record's time is checked to be in
// years 1 to 9999, where the layout is fixed width. It reads the date off
// the Unix time in one pass (civil from days), not through Time.Date and
// Time.Clock, each of which redoes the calendar: every record pays it
// (BenchmarkAppendTime compares it with Time.AppendFormat).
func appendTime(dst []byte, t time.Time) []byte {
	// Days since 0000-03-01, so that a year ends with February's leap
	// day; not negative from year 1 on.
	const unixToMarch0 = 719468
	sec := t.Unix()
	days := sec / 86400
	if sec%86400 < 0 {
		days--
	}
	daySec := int(sec - days*86400)
	z := uint64(days + unixToMarch0)
	era := z / 146097
	doe := z - era*146097                                  // day of the 400-year era
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365 // year of the era
	doy := doe - (365*yoe + yoe/4 - yoe/100)               // day of the year from March 1
	mp := (5*doy + 2) / 153                                // month from March, 0 to 11
	d := int(doy - (153*mp+2)/5 + 1)
	y, mo := int(yoe+era*400), int(mp)+3
	if mo > 12 {
		y, mo = y+1, mo-12
	}
	dst = appendDigits(dst, y, 4)
	dst = append(dst, '-')
	dst = appendDigits(dst, mo, 2)
	dst = append(dst, '-')
	dst = appendDigits(dst, d, 2)
	dst = append(dst, 'T')
	dst = appendDigits(dst, daySec/3600, 2)
	dst = append(dst, ':')
	dst = appendDigits(dst, daySec/60%60, 2)
	dst = append(dst, ':')
	dst = appendDigits(dst, daySec%60, 2)
	dst = append(dst, '.')
	dst = appendDigits(dst, t.Nanosecond(), 9)
	return append(dst, 'Z')
}

// appendDigits appends v, which is not negative, in exactly n (at most 9)
// digits, two at a time.
func appendDigits(dst []byte, v, n int) []byte {
	var b [9]byte
	i := n
	for ; i >= 2; i -= 2 {
		q := v / 100
		p := decimalPairs[v-q*100]
		b[i-2], b[i-1] = p[0], p[1]
		v = q
	}
	if i == 1 {
		b[0] = byte('0' + v%10)
	}
	return append(dst, b[:n]...)
}

// decimalPairs holds 00 to 99.
var decimalPairs = func() (t [100][2]byte) {
	for i := range t {
		t[i] = [2]byte{byte('0' + i/10), byte('0' + i%10)}
	}
	return t
}()

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

// appendHashed writes the map in byte order of its names. The entries are
// taken with their values in one pass over the map and sorted by
// insertion (there are at most MaxHashed), not looked up again by name.
func appendHashed(dst []byte, m map[string]Digest) []byte {
	type entry struct {
		name string
		d    Digest
	}
	var buf [MaxHashed]entry
	es := buf[:0]
	for name, d := range m {
		if len(es) == len(buf) {
			break // Validate refuses more; the line is never written
		}
		es = append(es, entry{name, d})
		for i := len(es) - 1; i > 0 && es[i].name < es[i-1].name; i-- {
			es[i], es[i-1] = es[i-1], es[i]
		}
	}
	dst = append(dst, `,"hmac":{`...)
	for i := range es {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '"')
		dst = append(dst, es[i].name...)
		dst = append(dst, `":"`...)
		dst = es[i].d.appendText(dst)
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
	buf = h.appendHex(buf)
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
