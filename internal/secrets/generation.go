package secrets

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
)

// A path's generation tells its values from those of an earlier path of
// the same name. A value's additional data binds its tenant, path and
// version, but a path deleted (DeleteMetadata) and written again numbers
// its versions from 1 again: without more, a value of the deleted path,
// kept by someone with the database, would open as the new path's. So a
// path made now draws a random generation, kept in its sealed metadata,
// and each of its values is sealed with the generation in front of the
// data; a read refuses a value whose generation is not its path's. The
// rewrap of a tenant's records (RecordAD) opens and seals the whole, so
// it keeps the generation without knowing it.
//
// A path made before generations has none (0), and its values are the
// data alone (JSON, so they begin with '{'): such a value opens only in a
// path without a generation. A path without a generation also takes a
// value with one, whatever it is: a node of an earlier version, while a
// fleet is upgraded, rewrites a path's metadata without its generation,
// and the path's values must still read (such a path is as it was before
// generations, no worse).

// valueTag begins a value sealed with its path's generation, which the
// next 8 bytes hold (big-endian); the data follows.
const valueTag = 0x01

const valueHeader = 1 + 8

// ErrGeneration: a value does not belong to its path as it is now (it was
// the value of a deleted path of the same name, or of no path at all).
var ErrGeneration = errors.New("value of another generation of the path")

// newGeneration draws a path's generation: positive, never 0 (none).
func newGeneration() int64 {
	var b [8]byte
	for {
		rand.Read(b[:]) //nolint:errcheck // crypto/rand never fails
		if g := int64(binary.BigEndian.Uint64(b[:]) >> 1); g != 0 {
			return g
		}
	}
}

// wrapValue is what is sealed for data in a path of generation gen.
func wrapValue(gen int64, data []byte) []byte {
	if gen == 0 {
		return data
	}
	out := make([]byte, valueHeader, valueHeader+len(data))
	out[0] = valueTag
	binary.BigEndian.PutUint64(out[1:], uint64(gen))
	return append(out, data...)
}

// unwrapValue is the data of an opened value pt of a path of generation
// gen; a value of another generation is ErrGeneration.
func unwrapValue(gen int64, pt []byte) ([]byte, error) {
	switch {
	case len(pt) > 0 && pt[0] == '{' && gen == 0:
		return pt, nil
	case len(pt) < valueHeader || pt[0] != valueTag:
		return nil, ErrGeneration
	case gen != 0 && binary.BigEndian.Uint64(pt[1:valueHeader]) != uint64(gen):
		return nil, ErrGeneration
	}
	return pt[valueHeader:], nil
}
