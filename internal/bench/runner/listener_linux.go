package runner

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ListenerPID returns the process listening on hostport on this machine,
// found through /proc: the listening socket's inode in /proc/net/tcp{,6},
// then the process holding that inode open. It lets 'bench load' read the
// CPU a target it did not start spends per request.
func ListenerPID(hostport string) (int, error) {
	_, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return 0, err
	}
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("port %q: %w", p, err)
	}
	var inodes []string
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		inodes = append(inodes, listeningInodes(b, uint16(port))...)
	}
	if len(inodes) == 0 {
		return 0, fmt.Errorf("no socket on this machine listens on port %d", port)
	}
	want := make(map[string]bool, len(inodes))
	for _, in := range inodes {
		want["socket:["+in+"]"] = true
	}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range procs {
		fds, err := os.ReadDir(filepath.Join(dir, "fd"))
		if err != nil {
			continue // gone, or not ours to read
		}
		for _, fd := range fds {
			if l, err := os.Readlink(filepath.Join(dir, "fd", fd.Name())); err == nil && want[l] {
				return strconv.Atoi(filepath.Base(dir))
			}
		}
	}
	return 0, fmt.Errorf("port %d: no process readable here holds its listening socket", port)
}

// listeningInodes returns the inodes of the sockets in a /proc/net/tcp
// table that listen (state 0A) on port.
func listeningInodes(table []byte, port uint16) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(table))
	sc.Scan() // the heading
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 10 || f[3] != "0A" {
			continue
		}
		_, hexPort, ok := strings.Cut(f[1], ":")
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(hexPort, 16, 16); err == nil && uint16(n) == port {
			out = append(out, f[9])
		}
	}
	return out
}
