//go:build !race

package httpaudit

const raceEnabled = false
