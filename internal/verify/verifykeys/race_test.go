//go:build race

package verifykeys

// raceEnabled: the race detector adds allocations of its own, so allocation
// counts are checked without it.
const raceEnabled = true
