//go:build !race

package extauthz

const raceEnabled = false
