package secrets

import (
	"bytes"
	"strconv"
	"time"
)

// decodeMeta is unmarshalMeta's fast path: it reads the metadata as
// pathMeta.marshal writes it (encoding/json's output: no white space, the
// members known, each once) without reflection, and reports false for
// anything else — a string with an escape, an unknown or repeated member,
// white space, a number out of range —, which encoding/json then decodes
// (or refuses). Every read that misses the cache and every write decodes
// a path's metadata.
func decodeMeta(b []byte) (*pathMeta, bool) {
	d := metaDecoder{b: b}
	var m pathMeta
	if !d.byte('{') {
		return nil, false
	}
	if d.byte('}') {
		return &m, d.end()
	}
	var seen uint16
	for {
		key, ok := d.plainString()
		if !ok || !d.byte(':') {
			return nil, false
		}
		var bit uint16
		switch string(key) {
		case "cas_required":
			bit, ok = 1<<0, d.boolean(&m.CASRequired)
		case "max_versions":
			bit, ok = 1<<1, d.integer(&m.MaxVersions)
		case "delete_version_after":
			var ns int64
			bit, ok = 1<<2, d.int64(&ns)
			m.DeleteVersionAfter = time.Duration(ns)
		case "custom_metadata":
			bit, ok = 1<<3, d.custom(&m.Custom)
		case "created":
			bit, ok = 1<<4, d.int64(&m.Created)
		case "updated":
			bit, ok = 1<<5, d.int64(&m.Updated)
		case "current":
			bit, ok = 1<<6, d.integer(&m.Current)
		case "versions":
			bit, ok = 1<<7, d.versions(&m.Versions)
		case "gen":
			bit, ok = 1<<8, d.int64(&m.Gen)
		default:
			return nil, false
		}
		if !ok || seen&bit != 0 {
			return nil, false
		}
		seen |= bit
		if d.byte('}') {
			return &m, d.end()
		}
		if !d.byte(',') {
			return nil, false
		}
	}
}

type metaDecoder struct {
	b []byte
	i int
}

func (d *metaDecoder) end() bool { return d.i == len(d.b) }

// byte consumes c if it is next.
func (d *metaDecoder) byte(c byte) bool {
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// plainString reads a string of printable ASCII without escapes; anything
// else (an escape, a character past ASCII, which encoding/json would check
// as UTF-8) is for the slow path.
func (d *metaDecoder) plainString() ([]byte, bool) {
	if !d.byte('"') {
		return nil, false
	}
	start := d.i
	for d.i < len(d.b) {
		switch c := d.b[d.i]; {
		case c == '"':
			d.i++
			return d.b[start : d.i-1], true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, false
		}
		d.i++
	}
	return nil, false
}

func (d *metaDecoder) boolean(v *bool) bool {
	switch {
	case bytes.HasPrefix(d.b[d.i:], []byte("true")):
		*v, d.i = true, d.i+4
	case bytes.HasPrefix(d.b[d.i:], []byte("false")):
		*v, d.i = false, d.i+5
	default:
		return false
	}
	return true
}

// int64 reads an integer as encoding/json writes one: -?(0|[1-9][0-9]*).
func (d *metaDecoder) int64(v *int64) bool {
	start := d.i
	d.byte('-')
	digits := d.i
	for d.i < len(d.b) && '0' <= d.b[d.i] && d.b[d.i] <= '9' {
		d.i++
	}
	if d.i == digits || (d.b[digits] == '0' && d.i > digits+1) {
		return false
	}
	if d.i < len(d.b) && (d.b[d.i] == '.' || d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		return false
	}
	n, err := strconv.ParseInt(string(d.b[start:d.i]), 10, 64)
	*v = n
	return err == nil
}

func (d *metaDecoder) integer(v *int) bool {
	var n int64
	if !d.int64(&n) || int64(int(n)) != n {
		return false
	}
	*v = int(n)
	return true
}

// custom reads custom metadata: an object of plain strings.
func (d *metaDecoder) custom(m *map[string]string) bool {
	if !d.byte('{') {
		return false
	}
	c := map[string]string{}
	*m = c
	if d.byte('}') {
		return true
	}
	for {
		k, ok := d.plainString()
		if !ok || !d.byte(':') {
			return false
		}
		v, ok := d.plainString()
		if !ok {
			return false
		}
		if _, dup := c[string(k)]; dup {
			return false
		}
		c[string(k)] = string(v)
		if d.byte('}') {
			return true
		}
		if !d.byte(',') {
			return false
		}
	}
}

// versions reads the versions' array: objects of "v", "c", "d" and "x".
func (d *metaDecoder) versions(vs *[]versionMeta) bool {
	if !d.byte('[') {
		return false
	}
	out := []versionMeta{}
	if d.byte(']') {
		*vs = out
		return true
	}
	for {
		var v versionMeta
		if !d.byte('{') {
			return false
		}
		var seen uint8
		for !d.byte('}') {
			if seen != 0 && !d.byte(',') {
				return false
			}
			k, ok := d.plainString()
			if !ok || !d.byte(':') {
				return false
			}
			var bit uint8
			switch string(k) {
			case "v":
				bit, ok = 1<<0, d.integer(&v.Version)
			case "c":
				bit, ok = 1<<1, d.int64(&v.Created)
			case "d":
				bit, ok = 1<<2, d.int64(&v.Deleted)
			case "x":
				bit, ok = 1<<3, d.boolean(&v.Destroyed)
			default:
				return false
			}
			if !ok || seen&bit != 0 {
				return false
			}
			seen |= bit
		}
		out = append(out, v)
		if d.byte(']') {
			*vs = out
			return true
		}
		if !d.byte(',') {
			return false
		}
	}
}
