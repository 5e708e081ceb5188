//go:build unix

package node

import (
	"os"
	"syscall"
)

// lockDir takes an exclusive lock on dir/LockFile, so that nodes starting
// at once on one data directory set it up one after the other (and agree
// on one first signing key). unlock releases it.
func lockDir(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(dir+string(os.PathSeparator)+LockFile, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing releases it anyway
		f.Close()
	}, nil
}
