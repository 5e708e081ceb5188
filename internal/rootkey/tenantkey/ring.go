package tenantkey

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/keygate/keygate/internal/rootkey"
)

// A tenant's row holds its data keys as one value sealed under the root
// key: a ring of versions, one of them current. A tenant whose key was
// never rotated holds the 32 bytes of version 1 alone, as every tenant
// did before data keys had versions; a ring that had a rotation is
//
//	ringFormat | current (4 bytes, big-endian) | (version (4) | key (32))...
//
// with the versions ascending. The two cannot be confused: the ring is
// never 32 bytes long.

// ringFormat is the first byte of a ring with versions.
const ringFormat = 2

// MaxVersions is the most data key versions a tenant's ring holds: a
// rotation adds one and, once every record is rewrapped, the older ones
// are retired, so a ring holds two at most but for rotations started
// while others run.
const MaxVersions = 16

// ErrRing: a tenant's sealed data key opened, but what it holds is not a
// ring of data keys.
var ErrRing = errors.New("tenant data key ring is malformed")

// ring is a tenant's data keys in the clear, as its row holds them.
type ring struct {
	current  uint32
	versions []uint32 // ascending
	keys     [][]byte // keys[i] is version versions[i]'s, rootkey.KeySize bytes
}

// parseRing reads what a tenant's sealed data key holds. The ring it
// returns shares raw's bytes.
func parseRing(raw []byte) (ring, error) {
	if len(raw) == rootkey.KeySize {
		return ring{current: 1, versions: []uint32{1}, keys: [][]byte{raw}}, nil
	}
	const entry = 4 + rootkey.KeySize
	if len(raw) < 1+4+entry || raw[0] != ringFormat || (len(raw)-5)%entry != 0 {
		return ring{}, fmt.Errorf("%w: %d bytes", ErrRing, len(raw))
	}
	n := (len(raw) - 5) / entry
	if n > MaxVersions {
		return ring{}, fmt.Errorf("%w: %d versions, at most %d", ErrRing, n, MaxVersions)
	}
	r := ring{current: binary.BigEndian.Uint32(raw[1:5])}
	for i := range n {
		e := raw[5+i*entry : 5+(i+1)*entry]
		v := binary.BigEndian.Uint32(e)
		if v == 0 || (i > 0 && v <= r.versions[i-1]) {
			return ring{}, fmt.Errorf("%w: versions not ascending from 1", ErrRing)
		}
		r.versions = append(r.versions, v)
		r.keys = append(r.keys, e[4:])
	}
	if !slices.Contains(r.versions, r.current) {
		return ring{}, fmt.Errorf("%w: current version %d is not in it", ErrRing, r.current)
	}
	return r, nil
}

// encode is the ring as a tenant's row holds it (before sealing): the
// bare key while version 1 is the only one, so that a tenant never
// rotated keeps the format every node reads.
func (r ring) encode() []byte {
	if len(r.versions) == 1 && r.versions[0] == 1 {
		return slices.Clone(r.keys[0])
	}
	out := make([]byte, 5, 5+len(r.versions)*(4+rootkey.KeySize))
	out[0] = ringFormat
	binary.BigEndian.PutUint32(out[1:], r.current)
	for i, v := range r.versions {
		out = binary.BigEndian.AppendUint32(out, v)
		out = append(out, r.keys[i]...)
	}
	return out
}

// SealedVersion returns the data key version a value Key.Seal returned
// was sealed under, read from its first bytes (it is not secret), and
// false for what is not a sealed value.
func SealedVersion(sealed []byte) (uint32, bool) {
	switch {
	case len(sealed) >= overhead1 && sealed[0] == keyFormat:
		return 1, true
	case len(sealed) >= overhead2 && sealed[0] == versionedFormat:
		v := binary.BigEndian.Uint32(sealed[1:5])
		return v, v != 0
	}
	return 0, false
}
