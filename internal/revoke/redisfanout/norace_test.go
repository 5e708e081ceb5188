//go:build !race

package redisfanout

const raceEnabled = false
