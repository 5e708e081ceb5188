//go:build !race

package keyring

const raceEnabled = false
