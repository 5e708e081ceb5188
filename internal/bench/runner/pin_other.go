//go:build !linux

package runner

import (
	"errors"
	"os/exec"
)

func startPinned(cmd *exec.Cmd, cpus []int) error {
	if len(cpus) > 0 {
		return errors.New("pinning to CPUs needs Linux")
	}
	return cmd.Start()
}

// PinSelf needs Linux.
func PinSelf(cpus []int) error { return errors.New("pinning to CPUs needs Linux") }

func procCPU(pid int) (float64, int64, error) { return 0, 0, errors.New("/proc needs Linux") }
