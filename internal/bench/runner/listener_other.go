//go:build !linux

package runner

import "errors"

// ListenerPID needs Linux's /proc.
func ListenerPID(string) (int, error) {
	return 0, errors.New("finding a listening process needs Linux's /proc")
}
