package runner

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/keygate/keygate/internal/bench/loadgen"
)

// FetchProfile saves the profile at url (a /debug/pprof/ endpoint; for
// CPU, ?seconds=N blocks that long) to path and returns its heaviest
// functions. token is the admin bearer token, if the endpoint needs one.
func FetchProfile(ctx context.Context, url, token, path string, top int) ([]loadgen.ProfileFunc, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("profile: %s answered %s", url, resp.Status)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	return TopFunctions(b, top)
}

// value is the sample value TopFunctions ranks by, by the profile's last
// sample type name: CPU time for a CPU profile, bytes allocated for a heap
// profile.
var preferredValue = []string{"cpu", "alloc_space"}

// TopFunctions reads a pprof profile (gzipped or not) and returns its n
// heaviest functions by flat share, with their cumulative share.
func TopFunctions(b []byte, n int) ([]loadgen.ProfileFunc, error) {
	if len(b) > 2 && b[0] == 0x1f && b[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("profile: %w", err)
		}
		if b, err = io.ReadAll(io.LimitReader(zr, 1<<30)); err != nil {
			return nil, fmt.Errorf("profile: %w", err)
		}
	}
	p, err := parseProfile(b)
	if err != nil {
		return nil, err
	}
	vi := len(p.types) - 1
	for i, t := range p.types {
		if slices.Contains(preferredValue, p.str(t)) {
			vi = i
		}
	}
	if vi < 0 {
		return nil, errors.New("profile: no sample types")
	}
	flat, cum := map[string]int64{}, map[string]int64{}
	var total int64
	for _, s := range p.samples {
		if vi >= len(s.values) {
			continue
		}
		v := s.values[vi]
		total += v
		seen := map[string]bool{}
		for i, loc := range s.locs {
			for j, fn := range p.locs[loc] {
				name := p.str(p.funcs[fn])
				if i == 0 && j == 0 {
					flat[name] += v
				}
				if !seen[name] {
					seen[name] = true
					cum[name] += v
				}
			}
		}
	}
	if total == 0 {
		return []loadgen.ProfileFunc{}, nil
	}
	names := make([]string, 0, len(cum))
	for name := range cum {
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int {
		if d := flat[b] - flat[a]; d != 0 {
			return int(d / max(1, abs(d)))
		}
		if d := cum[b] - cum[a]; d != 0 {
			return int(d / max(1, abs(d)))
		}
		return cmpString(a, b)
	})
	out := make([]loadgen.ProfileFunc, 0, min(n, len(names)))
	for _, name := range names[:min(n, len(names))] {
		out = append(out, loadgen.ProfileFunc{Function: name,
			Flat: 100 * float64(flat[name]) / float64(total), Cum: 100 * float64(cum[name]) / float64(total)})
	}
	return out, nil
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// profile is the part of profile.proto TopFunctions reads.
type profile struct {
	types   []int64             // sample_type[i].type, string indexes
	samples []sample            // sample
	locs    map[uint64][]uint64 // location id -> function ids, innermost first
	funcs   map[uint64]int64    // function id -> name string index
	strs    []string
}

type sample struct {
	locs   []uint64
	values []int64
}

func (p *profile) str(i int64) string {
	if i < 0 || i >= int64(len(p.strs)) {
		return "?"
	}
	return p.strs[i]
}

var errProto = errors.New("profile: malformed protobuf")

// fields calls f with each field of the message b.
func fields(b []byte, f func(num protowire.Number, typ protowire.Type, v uint64, bs []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errProto
		}
		b = b[n:]
		var v uint64
		var bs []byte
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			bs, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return errProto
		}
		b = b[n:]
		if err := f(num, typ, v, bs); err != nil {
			return err
		}
	}
	return nil
}

// uints reads a repeated uint64 field, packed or not.
func uints(dst []uint64, typ protowire.Type, v uint64, bs []byte) ([]uint64, error) {
	if typ == protowire.VarintType {
		return append(dst, v), nil
	}
	for len(bs) > 0 {
		x, n := protowire.ConsumeVarint(bs)
		if n < 0 {
			return nil, errProto
		}
		dst, bs = append(dst, x), bs[n:]
	}
	return dst, nil
}

func parseProfile(b []byte) (*profile, error) {
	p := &profile{locs: map[uint64][]uint64{}, funcs: map[uint64]int64{}}
	err := fields(b, func(num protowire.Number, typ protowire.Type, _ uint64, bs []byte) error {
		switch num {
		case 1: // sample_type
			var t int64
			err := fields(bs, func(n protowire.Number, _ protowire.Type, v uint64, _ []byte) error {
				if n == 1 {
					t = int64(v)
				}
				return nil
			})
			p.types = append(p.types, t)
			return err
		case 2: // sample
			var s sample
			err := fields(bs, func(n protowire.Number, typ protowire.Type, v uint64, bs []byte) error {
				var err error
				switch n {
				case 1:
					s.locs, err = uints(s.locs, typ, v, bs)
				case 2:
					var vals []uint64
					vals, err = uints(nil, typ, v, bs)
					for _, x := range vals {
						s.values = append(s.values, int64(x))
					}
				}
				return err
			})
			p.samples = append(p.samples, s)
			return err
		case 4: // location
			var id uint64
			var fns []uint64
			err := fields(bs, func(n protowire.Number, _ protowire.Type, v uint64, bs []byte) error {
				switch n {
				case 1:
					id = v
				case 4: // line
					return fields(bs, func(n protowire.Number, _ protowire.Type, v uint64, _ []byte) error {
						if n == 1 {
							fns = append(fns, v)
						}
						return nil
					})
				}
				return nil
			})
			p.locs[id] = fns
			return err
		case 5: // function
			var id uint64
			var name int64
			err := fields(bs, func(n protowire.Number, _ protowire.Type, v uint64, _ []byte) error {
				switch n {
				case 1:
					id = v
				case 2:
					name = int64(v)
				}
				return nil
			})
			p.funcs[id] = name
			return err
		case 6: // string_table
			if typ != protowire.BytesType {
				return errProto
			}
			p.strs = append(p.strs, string(bs))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}
