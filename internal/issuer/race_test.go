//go:build race

package issuer

// raceEnabled: the race detector drops sync.Pool items at random and adds
// allocations of its own, so allocation counts are checked without it.
const raceEnabled = true
