package audit

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// MaxLineLen caps a line, newline included. The longest valid line is well
// under it.
const MaxLineLen = 16 << 10

// ErrMalformed is returned by ParseLine for a line that is not in the
// canonical form (see the package documentation).
var ErrMalformed = errors.New("malformed audit line")

// An Entry is one parsed line.
type Entry struct {
	Node string
	Seq  uint64
	Prev Hash
	Time time.Time
	Type LineType

	// Record is the record of a TypeRecord line; its Time is Entry.Time.
	Record Record

	// KeyID and Sig are a TypeCheckpoint line's.
	KeyID string
	Sig   []byte

	// Start, PrevFile and Unsigned are a TypeOpen line's: how it begins
	// or continues the chain, the file before (rotate, segment) and how
	// many lines after the last checkpoint it found (restart).
	Start    Start
	PrevFile string
	Unsigned uint64

	// Hash is the hash the line claims; HashMatches reports whether it is
	// the hash of the line's body.
	Hash Hash

	body    Hash   // the hash of the body as read
	message []byte // what a checkpoint signs
}

// HashMatches reports whether the line's hash member is the SHA-256 of its
// body.
func (e *Entry) HashMatches() bool { return e.Hash == e.body }

// checkSignature reports whether a checkpoint's signature verifies under pub.
func (e *Entry) checkSignature(pub ed25519.PublicKey) bool {
	return e.Type == TypeCheckpoint && ed25519.Verify(pub, e.message, e.Sig)
}

// ParseLine parses one line, without its newline. It accepts only the
// canonical form: a line it returns re-encodes to the same bytes. It does
// not check the hash (see Entry.HashMatches), the chain or signatures;
// Verify does.
func ParseLine(line []byte) (*Entry, error) {
	if len(line) >= MaxLineLen {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrMalformed, MaxLineLen)
	}
	p := parser{b: line}
	e := &Entry{}
	p.lit(`{"v":1,"node":`)
	e.Node = p.str()
	p.lit(`,"seq":`)
	e.Seq = p.uint()
	p.lit(`,"prev":`)
	p.hash(&e.Prev)
	p.lit(`,"time":`)
	e.Time = p.time()
	p.lit(`,"type":`)
	switch p.str() {
	case "record":
		e.Type = TypeRecord
		p.record(&e.Record)
		e.Record.Time = e.Time
	case "checkpoint":
		e.Type = TypeCheckpoint
		p.lit(`,"kid":`)
		e.KeyID = p.str()
		if !p.bad {
			e.message = checkpointMessage(nil, line[:p.i])
		}
		p.lit(`,"sig":`)
		e.Sig = p.base64()
	case "open":
		e.Type = TypeOpen
		p.lit(`,"start":`)
		e.Start = Start(p.enum(startNames[:]))
		if p.has(`,"prevfile":`) {
			e.PrevFile = p.str()
		}
		if p.has(`,"unsigned":`) {
			e.Unsigned = p.uint()
		}
	default:
		p.bad = true
	}
	bodyEnd := p.i
	p.lit(`,"hash":`)
	p.hash(&e.Hash)
	p.lit(`}`)
	if p.bad || p.i != len(line) {
		return nil, fmt.Errorf("%w: unexpected input at byte %d", ErrMalformed, min(p.i, len(line))+1)
	}
	if err := e.check(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	// Canonical form: whatever the parser let through must re-encode to
	// the very bytes read (member order, omitted empty members, sorted
	// hmac names, number and time formats).
	if !bytes.Equal(e.appendBody(make([]byte, 0, bodyEnd)), line[:bodyEnd]) {
		return nil, fmt.Errorf("%w: not in canonical form", ErrMalformed)
	}
	h := sha256.New()
	h.Write(line[:bodyEnd])
	h.Write([]byte{'}'})
	h.Sum(e.body[:0])
	return e, nil
}

// check applies the rules the parser's grammar does not.
func (e *Entry) check() error {
	if err := checkID(e.Node, true); err != nil {
		return fmt.Errorf("node: %v", err)
	}
	if e.Seq == 0 {
		return errors.New("seq 0")
	}
	switch e.Type {
	case TypeRecord:
		return e.Record.Validate()
	case TypeCheckpoint:
		if len(e.KeyID) != 16 || !parseHex(make([]byte, 8), e.KeyID) {
			return errors.New("kid is not 16 hex digits")
		}
		if len(e.Sig) != ed25519.SignatureSize {
			return errors.New("sig is not an Ed25519 signature")
		}
	case TypeOpen:
		if e.Start == 0 {
			return errors.New("unknown start")
		}
		if err := checkID(e.PrevFile, false); err != nil {
			return fmt.Errorf("prevfile: %v", err)
		}
	}
	return checkTime(e.Time)
}

// appendBody encodes e's body without its closing brace and hash member.
func (e *Entry) appendBody(dst []byte) []byte {
	dst = appendHeader(dst, e.Node, e.Seq, &e.Prev)
	switch e.Type {
	case TypeRecord:
		dst = appendRecord(dst, &e.Record)
	case TypeCheckpoint:
		dst = appendCheckpoint(dst, e.Time, e.KeyID)
		dst = appendSig(dst, e.Sig)
	case TypeOpen:
		dst = appendOpen(dst, e.Time, e.Start, e.PrevFile, e.Unsigned)
	}
	return dst
}

// appendLine encodes e as a whole line, with the hash it claims, without
// the newline.
func (e *Entry) appendLine(dst []byte) []byte {
	dst = e.appendBody(dst)
	dst = append(dst, `,"hash":"`...)
	dst = append(dst, e.Hash.String()...)
	return append(dst, `"}`...)
}

// parser reads the fixed grammar of a line. After the first mismatch bad
// is set and every method returns a zero value.
type parser struct {
	b   []byte
	i   int
	bad bool
}

func (p *parser) lit(s string) {
	if !p.has(s) {
		p.bad = true
	}
}

// has consumes s if the input continues with it.
func (p *parser) has(s string) bool {
	if p.bad || !bytes.HasPrefix(p.b[p.i:], []byte(s)) {
		return false
	}
	p.i += len(s)
	return true
}

// str reads a string of identifier bytes: no escapes are ever written.
func (p *parser) str() string {
	if p.bad || p.i >= len(p.b) || p.b[p.i] != '"' {
		p.bad = true
		return ""
	}
	j := p.i + 1
	for j < len(p.b) && idByte(p.b[j]) {
		j++
	}
	if j >= len(p.b) || p.b[j] != '"' {
		p.bad = true
		return ""
	}
	s := string(p.b[p.i+1 : j])
	p.i = j + 1
	return s
}

// uint reads a decimal without leading zeros that fits in a uint64.
func (p *parser) uint() uint64 {
	if p.bad {
		return 0
	}
	var v uint64
	j := p.i
	for j < len(p.b) && p.b[j] >= '0' && p.b[j] <= '9' {
		d := uint64(p.b[j] - '0')
		if v > (1<<64-1-d)/10 {
			p.bad = true
			return 0
		}
		v = v*10 + d
		j++
	}
	if j == p.i || p.b[p.i] == '0' && j-p.i > 1 {
		p.bad = true
		return 0
	}
	p.i = j
	return v
}

func (p *parser) hash(h *Hash) {
	if s := p.str(); !p.bad && !parseHex(h[:], s) {
		p.bad = true
	}
}

func (p *parser) time() time.Time {
	s := p.str()
	if p.bad {
		return time.Time{}
	}
	t, err := time.Parse(timeLayout, s)
	if err != nil {
		p.bad = true
	}
	return t
}

func (p *parser) base64() []byte {
	s := p.str()
	if p.bad {
		return nil
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		p.bad = true
	}
	return b
}

// enum reads a string and returns its index in names (index 0, the empty
// name, is never matched).
func (p *parser) enum(names []string) int {
	s := p.str()
	for i := 1; i < len(names); i++ {
		if s == names[i] {
			return i
		}
	}
	p.bad = true
	return 0
}

func (p *parser) record(r *Record) {
	if p.has(`,"req":`) {
		r.RequestID = p.str()
	}
	if p.has(`,"tenant":`) {
		r.Tenant = p.str()
	}
	if p.has(`,"principal":{"kind":`) {
		r.Principal.Kind = PrincipalKind(p.enum(principalNames[:]))
		if p.has(`,"id":`) {
			r.Principal.ID = p.str()
		}
		p.lit(`}`)
	}
	p.lit(`,"op":`)
	r.Operation = Operation(p.str())
	if p.has(`,"key":{"name":`) {
		r.Key.Name = p.str()
		if p.has(`,"version":`) {
			v := p.uint()
			if v > maxVersion {
				p.bad = true
			}
			r.Key.Version = int(v)
		}
		p.lit(`}`)
	}
	p.lit(`,"result":`)
	r.Result = Result(p.enum(resultNames[:]))
	if p.has(`,"reason":`) {
		r.Reason = Reason(p.str())
	}
	if p.has(`,"status":`) {
		v := p.uint()
		if v > 599 {
			p.bad = true
		}
		r.Status = int(v)
	}
	if p.has(`,"remote":`) {
		a, err := netip.ParseAddr(p.str())
		if err != nil {
			p.bad = true
		}
		r.Remote = a
	}
	if p.has(`,"count":`) {
		r.Count = p.uint()
		p.lit(`,"since":`)
		r.Since = p.time()
	}
	if p.has(`,"hmac":{`) {
		r.Hashed = make(map[string]Digest)
		for !p.bad {
			name := p.str()
			p.lit(`:`)
			d, ok := parseDigest(p.str())
			if !ok || len(r.Hashed) == MaxHashed {
				p.bad = true
			}
			r.Hashed[name] = d
			if !p.has(`,`) {
				break
			}
		}
		p.lit(`}`)
	}
}
