package vaultapi

// RaceEnabled tells the external tests whether allocation counts mean
// anything.
const RaceEnabled = raceEnabled
