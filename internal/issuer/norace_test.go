//go:build !race

package issuer

const raceEnabled = false
