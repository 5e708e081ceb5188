//go:build !unix

package loadgen

// readCPU is not available here: the CPU figures read 0.
func readCPU() cpuTimes { return cpuTimes{} }

// FileSlack is how many descriptors besides its connections the process is
// assumed to need.
const FileSlack = 64

// EnsureFileLimit does nothing where there is no RLIMIT_NOFILE.
func EnsureFileLimit(conns int) (raised bool, before, after uint64, err error) {
	return false, 0, 0, nil
}
