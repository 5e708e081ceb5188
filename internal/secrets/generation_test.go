package secrets

import (
	"errors"
	"testing"
)

// TestUnwrapValue: a value opens in a path of its own generation; one of
// another generation, or without one in a path with one, does not; a path
// without a generation (made before them, or rewritten by an earlier
// version) reads every value.
func TestUnwrapValue(t *testing.T) {
	data := []byte(`{"v":1}`)
	for _, tc := range []struct {
		name     string
		sealedIn int64 // the generation the value was sealed in (0: none, the data alone)
		readIn   int64
		ok       bool
	}{
		{"same generation", 7, 7, true},
		{"another generation", 7, 8, false},
		{"no generation in a path with one", 0, 7, false},
		{"none in none", 0, 0, true},
		{"one in a path without", 7, 0, true},
	} {
		got, err := unwrapValue(tc.readIn, wrapValue(tc.sealedIn, data))
		switch {
		case tc.ok && (err != nil || string(got) != string(data)):
			t.Errorf("%s: %q, %v; want the data", tc.name, got, err)
		case !tc.ok && !errors.Is(err, ErrGeneration):
			t.Errorf("%s: %q, %v; want ErrGeneration", tc.name, got, err)
		}
	}
	for _, pt := range [][]byte{nil, {}, {valueTag}, {valueTag, 0, 0, 0}, []byte("[1]")} {
		if _, err := unwrapValue(0, pt); !errors.Is(err, ErrGeneration) {
			t.Errorf("unwrapValue(0, %q): %v, want ErrGeneration", pt, err)
		}
	}
	if g := newGeneration(); g <= 0 {
		t.Errorf("newGeneration() = %d, want positive", g)
	}
}
