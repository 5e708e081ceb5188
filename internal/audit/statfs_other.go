//go:build !linux

package audit

import "errors"

// statfs is implemented on Linux only; elsewhere the free space is not
// watched (FileSink.Space fails with errors.ErrUnsupported).
func statfs(string) (free, total uint64, err error) { return 0, 0, errors.ErrUnsupported }
