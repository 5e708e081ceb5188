//go:build !race

package vaultapi

const raceEnabled = false
