//go:build race

package secrets

// raceEnabled: the race detector adds allocations of its own, so
// allocation counts are checked without it.
const raceEnabled = true
