//go:build race

package verify

// raceEnabled: the race detector allocates on its own, so allocation
// counts are checked without it.
const raceEnabled = true
