//go:build !race

package rootkey

const raceEnabled = false
