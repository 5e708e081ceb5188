package vaultapi

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestDecode(t *testing.T) {
	var q request
	body := `{"plaintext":"aGk=","key_version":2,"prehashed":true,"context":null,"x":{"a":[1,{"b":null}]},
		"esc":"a\"b\u00e9\ud83d\ude00","batch_input":[{"plaintext":"YQ==","reference":"r1"},{}]}`
	if err := q.decode([]byte(body)); err != nil {
		t.Fatal(err)
	}
	if m := q.get("plaintext"); m == nil || string(m.text) != "aGk=" {
		t.Errorf("plaintext: %v", m)
	}
	if n, err := q.get("key_version").integer(); n != 2 || err != nil {
		t.Errorf("key_version: %d %v", n, err)
	}
	if b, err := q.get("prehashed").boolean(); !b || err != nil {
		t.Errorf("prehashed: %v %v", b, err)
	}
	if q.get("context") != nil {
		t.Error("a null member is present")
	}
	if s, _ := q.get("esc").str(); string(s) != "a\"bé😀" {
		t.Errorf("escaped string: %q", s)
	}
	items, ok, err := q.batch()
	if !ok || err != nil || len(items) != 2 {
		t.Fatalf("batch: %v %v %v", items, ok, err)
	}
	if r, _, _ := itemStr(q.members(items[0]), "reference"); string(r) != "r1" {
		t.Errorf("reference: %q", r)
	}
	if len(q.members(items[1])) != 0 {
		t.Error("second item has members")
	}
	for _, empty := range []string{"", "  \n", "null", " null "} {
		if err := q.decode([]byte(empty)); err != nil || len(q.top) != 0 {
			t.Errorf("%q: %v", empty, err)
		}
	}
}

func TestDecodeRefused(t *testing.T) {
	deep := strings.Repeat("[", maxDepth+2) + strings.Repeat("]", maxDepth+2)
	many := "{" + strings.Repeat(`"a":1,`, 0)
	for i := range maxMembers + 1 {
		if i > 0 {
			many += ","
		}
		many += `"m` + itoa(i) + `":1`
	}
	many += "}"
	for name, body := range map[string]string{
		"not an object":     `["plaintext"]`,
		"string":            `"x"`,
		"duplicate":         `{"plaintext":"a","plaintext":"b"}`,
		"duplicate in item": `{"batch_input":[{"a":1,"a":2}]}`,
		"trailing":          `{"a":1} x`,
		"two objects":       `{}{}`,
		"unterminated":      `{"a":"b`,
		"bad escape":        `{"a":"\x"}`,
		"bad unicode":       `{"a":"\u12g4"}`,
		"control char":      "{\"a\":\"\x01\"}",
		"invalid utf-8":     "{\"a\":\"\xff\"}",
		"leading zero":      `{"a":01}`,
		"bare dot":          `{"a":1.}`,
		"bad literal":       `{"a":tru}`,
		"missing colon":     `{"a" 1}`,
		"missing value":     `{"a":}`,
		"trailing comma":    `{"a":1,}`,
		"deep":              `{"a":` + deep + `}`,
		"too many members":  many,
		"batch of strings":  `{"batch_input":["a"]}`,
		"truncated batch":   `{"batch_input":[{"a":1}`,
		"null then more":    `null 1`,
	} {
		var q request
		err := q.decode([]byte(body))
		var br badRequest
		if !errors.As(err, &br) {
			t.Errorf("%s: %v, want a 400", name, err)
		}
	}
	var q request
	if err := q.decode([]byte(`{"batch_input":"x"}`)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := q.batch(); !errors.Is(err, errBatch) {
		t.Errorf("batch_input a string: %v", err)
	}
}

// TestWeakDecoding: parameters convert as Vault's field decoding does.
func TestWeakDecoding(t *testing.T) {
	m := func(body string) *member {
		var q request
		if err := q.decode([]byte(`{"v":` + body + `}`)); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return q.get("v")
	}
	for body, want := range map[string]int{`3`: 3, `"3"`: 3, `"0x10"`: 16, `""`: 0, `true`: 1, `false`: 0, `-2`: -2} {
		if n, err := m(body).integer(); n != want || err != nil {
			t.Errorf("integer %s: %d %v", body, n, err)
		}
	}
	for _, body := range []string{`1.5`, `1e3`, `"x"`, `[1]`, `{}`, `"99999999999999999999"`} {
		if _, err := m(body).integer(); err == nil {
			t.Errorf("integer %s: no error", body)
		}
	}
	for body, want := range map[string]bool{`true`: true, `false`: false, `"true"`: true, `"1"`: true, `"f"`: false, `""`: false, `1`: true, `0`: false} {
		if b, err := m(body).boolean(); b != want || err != nil {
			t.Errorf("boolean %s: %v %v", body, b, err)
		}
	}
	for _, body := range []string{`2`, `"yes"`, `[]`} {
		if _, err := m(body).boolean(); err == nil {
			t.Errorf("boolean %s: no error", body)
		}
	}
	for body, want := range map[string]string{`"s"`: "s", `12`: "12", `true`: "1", `false`: "0"} {
		if s, err := m(body).str(); string(s) != want || err != nil {
			t.Errorf("str %s: %q %v", body, s, err)
		}
	}
	if _, err := m(`{}`).str(); err == nil {
		t.Error("str of an object: no error")
	}
	if _, err := m(`1`).strictStr(); err == nil {
		t.Error("strictStr of a number: no error")
	}
	for body, want := range map[string]time.Duration{`3600`: time.Hour, `"3600"`: time.Hour, `"2h"`: 2 * time.Hour,
		`"90m"`: 90 * time.Minute, `"1d"`: 24 * time.Hour, `""`: 0, `"3600s"`: time.Hour} {
		if d, err := m(body).seconds(); d != want || err != nil {
			t.Errorf("seconds %s: %v %v", body, d, err)
		}
	}
	for _, body := range []string{`"-1h"`, `-5`, `"x"`, `true`, `"1e400"`} {
		if _, err := m(body).seconds(); err == nil {
			t.Errorf("seconds %s: no error", body)
		}
	}
}

// FuzzDecode: the decoder never panics; it accepts only what
// encoding/json also reads as an object, and then reads the same top-level
// string members.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"plaintext":"aGk=","context":"YQ=="}`, `{"batch_input":[{"plaintext":"YQ==","reference":"r"}]}`,
		`{"a":"\u00e9\n","b":[1,2,{"c":null}],"d":-1.5e3,"e":true}`, `null`, ``, `{"a":1,"a":2}`, `[]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var q request
		if err := q.decode(body); err != nil {
			var br badRequest
			if !errors.As(err, &br) {
				t.Fatalf("an error that is not a 400: %v", err)
			}
			return
		}
		var v any
		if err := json.Unmarshal(body, &v); err != nil && len(strings.TrimSpace(string(body))) > 0 {
			t.Fatalf("accepted what encoding/json refuses: %v", err)
		}
		obj, _ := v.(map[string]any)
		for _, m := range q.top {
			if m.kind != kString {
				continue
			}
			if s, ok := obj[string(m.name)].(string); !ok || s != string(m.text) {
				t.Fatalf("member %q: %q, encoding/json reads %v", m.name, m.text, obj[string(m.name)])
			}
		}
	})
}

// TestDecodeAllocations: a small encrypt body decodes without allocating.
func TestDecodeAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are checked without -race")
	}
	body := []byte(`{"plaintext":"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+Pw=="}`)
	var q request
	q.decode(body)
	if n := testing.AllocsPerRun(100, func() { q.decode(body) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

// TestPlainRun checks the eight-bytes-at-a-time scan against a byte at a
// time: for every byte value at every place in a run of plain bytes, it
// stops exactly at a special byte and passes a plain one.
func TestPlainRun(t *testing.T) {
	special := func(c byte) bool { return c < 0x20 || c >= 0x80 || c == '"' || c == '\\' }
	for c := range 256 {
		for at := range 24 {
			b := []byte(strings.Repeat("Ab9+/=~x", 3))
			b[at] = byte(c)
			want := len(b) / 8 * 8 // what it leaves to the table: the tail under eight bytes
			for i, x := range b[:want] {
				if special(x) {
					want = i
					break
				}
			}
			if got := plainRun(b); got != want {
				t.Fatalf("byte %#x at %d: plainRun = %d, want %d", c, at, got, want)
			}
		}
	}
}

// TestRequestID checks the id is a version-4 UUID as Vault's request_id
// (random bits in every digit but the version's and the variant's).
func TestRequestID(t *testing.T) {
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	var or [36]byte
	for range 200 {
		var id requestID
		id.fill()
		s := id.String()
		if !uuid.MatchString(s) {
			t.Fatalf("%q is not a version-4 UUID", s)
		}
		if seen[s] {
			t.Fatalf("%q twice", s)
		}
		seen[s] = true
		for i := range id {
			or[i] |= id[i] ^ '0'
		}
	}
	// Each free digit took a value other than '0' at least once: none is stuck.
	for i, x := range or {
		if x == 0 {
			t.Errorf("digit %d is always 0", i)
		}
	}
}

// TestHex8 checks the word-at-a-time hex digits against fmt's.
func TestHex8(t *testing.T) {
	vals := []uint32{0, 1, 9, 10, 15, 16, 0x9a9a9a9a, 0xabcdef01, 0x12345678, 0xffffffff, 0xa0a0a0a0, 0x09090909}
	for i := range 1000 {
		vals = append(vals, uint32(i)*2654435761)
	}
	for _, v := range vals {
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], hex8(v))
		if got, want := string(b[:]), fmt.Sprintf("%08x", v); got != want {
			t.Fatalf("hex8(%#x) = %q, want %q", v, got, want)
		}
	}
}
