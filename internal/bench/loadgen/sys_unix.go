//go:build unix

package loadgen

import (
	"fmt"
	"syscall"
	"time"
)

func readCPU() cpuTimes {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return cpuTimes{}
	}
	return cpuTimes{
		user: time.Duration(ru.Utime.Nano()),
		sys:  time.Duration(ru.Stime.Nano()),
	}
}

// FileSlack is how many descriptors besides its connections the process is
// assumed to need (standard streams, the runtime's poller, a listener in
// tests).
const FileSlack = 64

// EnsureFileLimit makes room for conns connections: when the soft
// RLIMIT_NOFILE is below conns + FileSlack it raises it to the hard limit
// and reports the change (raised, with the limits before and after). It
// fails, naming the limits, when even the hard limit is too low.
func EnsureFileLimit(conns int) (raised bool, before, after uint64, err error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return false, 0, 0, fmt.Errorf("open-file limit: %w", err)
	}
	need := uint64(conns) + FileSlack
	if lim.Cur >= need {
		return false, lim.Cur, lim.Cur, nil
	}
	if lim.Max < need {
		return false, lim.Cur, lim.Cur, fmt.Errorf("%w: %d connections need %d open files, and the hard limit (ulimit -Hn) is %d",
			ErrConfig, conns, need, lim.Max)
	}
	before = lim.Cur
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return false, before, before, fmt.Errorf("raise the open-file limit from %d to %d: %w", before, lim.Max, err)
	}
	return true, before, lim.Cur, nil
}
