//go:build !race

package transitapi

const raceEnabled = false
