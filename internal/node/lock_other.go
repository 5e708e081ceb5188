//go:build !unix

package node

// lockDir is a no-op where flock is not available: concurrent first starts
// on one data directory may then create two signing keys, which converge
// at the next key-schedule tick.
func lockDir(string) (unlock func(), err error) { return func() {}, nil }
