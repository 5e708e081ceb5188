package runner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Spec says how to start a target.
type Spec struct {
	Name       string   // for errors and file names
	Exe        string   // the keygate binary
	Args       []string // its arguments
	Env        []string // added to this process's environment
	CPUs       []int    // pin the target to these CPUs; empty: not pinned
	GOMAXPROCS int      // 0: the Go runtime's default
	Log        string   // file for its stdout and stderr
}

// Process is a started target.
type Process struct {
	name string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // the Wait error, once done is closed
	once sync.Once
}

// ErrExited is wrapped by the errors of a target that exited on its own.
var ErrExited = errors.New("target exited")

// Start starts the target of spec. The caller must Stop it.
func Start(spec Spec) (*Process, error) {
	logf, err := os.OpenFile(spec.Log, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%s: log: %w", spec.Name, err)
	}
	defer logf.Close()
	cmd := exec.Command(spec.Exe, spec.Args...)
	cmd.Env = append(os.Environ(), spec.Env...)
	if spec.GOMAXPROCS > 0 {
		cmd.Env = append(cmd.Env, fmt.Sprintf("GOMAXPROCS=%d", spec.GOMAXPROCS))
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := startPinned(cmd, spec.CPUs); err != nil {
		return nil, fmt.Errorf("%s: start: %w", spec.Name, err)
	}
	p := &Process{name: spec.Name, log: spec.Log, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Pid is the target's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// WaitHTTP waits until url answers with any HTTP status, the target exits
// or timeout passes.
func (p *Process) WaitHTTP(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s: %w at start: %v\n%s", p.name, ErrExited, p.err, p.Tail())
		case <-ctx.Done():
			return fmt.Errorf("%s: %s did not answer within %s\n%s", p.name, url, timeout, p.Tail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Exited reports whether the target has exited (false for nil: a target
// this package did not start).
func (p *Process) Exited() bool {
	if p == nil {
		return false
	}
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop asks the target to stop (SIGTERM) and kills it after 5 s.
func (p *Process) Stop() {
	p.once.Do(func() {
		p.cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck // it may have exited
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) //nolint:errcheck // the group may be gone
			<-p.done
		}
	})
}

// Tail returns the last lines of the target's log.
func (p *Process) Tail() string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-8):], "\n")
}

// FreePort returns a loopback address with a port nothing listens on now.
func FreePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
