package audit

import (
	"encoding/hex"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestAppendTimeMatchesTheLayout(t *testing.T) {
	east := time.FixedZone("east", 5*3600+30*60)
	cases := []struct {
		name string
		t    time.Time
	}{
		{"first instant", time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"last instant", time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)},
		{"leap day", time.Date(2024, 2, 29, 12, 0, 0, 1, time.UTC)},
		{"zone east of UTC, day before in UTC", time.Date(2026, 1, 1, 3, 0, 0, 500, east)},
		{"local time", time.Date(2026, 11, 26, 12, 15, 13, 123456789, time.Local)},
		{"monotonic reading", time.Now()},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 1000 {
		sec := rng.Int64N(time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC).Unix()-time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).Unix()) +
			time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
		cases = append(cases, struct {
			name string
			t    time.Time
		}{fmt.Sprintf("random %d", i), time.Unix(sec, rng.Int64N(1e9))})
	}
	for _, c := range cases {
		want := c.t.UTC().Format(timeLayout)
		if got := string(appendTime([]byte("x"), c.t)); got != "x"+want {
			t.Fatalf("%s (%v): got %q, want %q", c.name, c.t, got[1:], want)
		}
	}
}

func BenchmarkAppendTime(b *testing.B) {
	now := time.Now()
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	b.Run("appendTime", func(b *testing.B) {
		for b.Loop() {
			buf = appendTime(buf[:0], now)
		}
	})
	b.Run("AppendFormat", func(b *testing.B) {
		for b.Loop() {
			buf = now.UTC().AppendFormat(buf[:0], timeLayout)
		}
	})
}

func TestAppendHexMatchesEncodingHex(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 1000 {
		var h Hash
		for i := range h {
			h[i] = byte(rng.Uint32())
		}
		if got, want := string(h.appendHex([]byte("x"))), "x"+hex.EncodeToString(h[:]); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
}

func TestAppendHashedInNameOrder(t *testing.T) {
	k := testHMACKey(t)
	rng := rand.New(rand.NewPCG(7, 8))
	for n := 1; n <= MaxHashed; n++ {
		m := map[string]Digest{}
		for len(m) < n {
			m[fmt.Sprintf("h%d", rng.IntN(100))] = k.Sum(fmt.Sprint(rng.Int()))
		}
		names := slices.Sorted(maps.Keys(m))
		want := `,"hmac":{`
		for i, name := range names {
			if i > 0 {
				want += ","
			}
			want += `"` + name + `":"` + m[name].String() + `"`
		}
		want += "}"
		if got := string(appendHashed(nil, m)); got != want {
			t.Fatalf("%d names: got %s, want %s", n, got, want)
		}
	}
}
