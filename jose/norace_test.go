//go:build !race

package jose

const raceEnabled = false
