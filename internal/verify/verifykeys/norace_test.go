//go:build !race

package verifykeys

const raceEnabled = false
