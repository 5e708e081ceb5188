package runner

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/keygate/keygate/internal/bench/loadgen"
)

// Probe reads a target's cumulative usage.
type Probe interface {
	Read(ctx context.Context) (Sample, error)
	Source() string // "metrics" or "proc"
}

// Sample is a target's cumulative usage at one moment.
type Sample struct {
	At         time.Time
	CPU        float64 // seconds, user + system, since the target started
	Mallocs    float64 // heap allocations since it started (when HasAllocs)
	AllocBytes float64 // bytes allocated since it started (when HasAllocs)
	HasAllocs  bool
	RSS        int64
	// Host readings, for a target this package started on this machine:
	// each CPU's busy seconds (user, nice, system and steal: the time no
	// process of ours can have used; interrupts are left out, as loopback
	// traffic is mostly ours), the CPU seconds of the target and what was
	// started beside it, and of this process (the generator).
	Host     []float64
	Workload float64
	Self     float64
}

// ProcProbe reads a child's usage from /proc (Linux).
type ProcProbe struct{ Pid int }

func (p ProcProbe) Source() string { return "proc" }

func (p ProcProbe) Read(context.Context) (Sample, error) {
	cpu, rss, err := procCPU(p.Pid)
	return Sample{At: time.Now(), CPU: cpu, RSS: rss}, err
}

// hostBusy reads each CPU's busy seconds from /proc/stat.
func hostBusy() ([]float64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return nil, err
	}
	return parseHostStat(b)
}

// parseHostStat reads the "cpuN user nice system idle iowait irq softirq
// steal ..." lines: busy is user + nice + system + steal (guest time is
// already in user).
func parseHostStat(b []byte) ([]float64, error) {
	var busy []float64
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || !strings.HasPrefix(f[0], "cpu") || f[0] == "cpu" {
			continue
		}
		n, err := strconv.Atoi(f[0][3:])
		if err != nil || n < 0 || n > 1<<16 {
			return nil, fmt.Errorf("/proc/stat: %q is not a CPU", f[0])
		}
		var sum uint64
		for _, i := range []int{1, 2, 3, 8} {
			v, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("/proc/stat: %s: %w", f[0], err)
			}
			sum += v
		}
		for len(busy) <= n {
			busy = append(busy, 0)
		}
		busy[n] = float64(sum) / clockTicks
	}
	if len(busy) == 0 {
		return nil, errors.New("/proc/stat: no CPU lines")
	}
	return busy, nil
}

// clockTicks is Linux's USER_HZ, the unit of /proc/PID/stat's times: 100
// on every architecture Go supports.
const clockTicks = 100

// parseStat reads utime, stime and rss from /proc/PID/stat. The command
// name in parentheses may hold spaces, so fields count from the last ')'.
func parseStat(b []byte) (cpu float64, rss int64, err error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, errors.New("/proc stat: no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): utime is field 14, stime 15, rss 24.
	if len(f) < 22 {
		return 0, 0, errors.New("/proc stat: too few fields")
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	pages, err3 := strconv.ParseInt(f[21], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return 0, 0, fmt.Errorf("/proc stat: %w", err)
	}
	return float64(ut+st) / clockTicks, pages * 4096, nil
}

// MetricsProbe reads a Prometheus /metrics page with Go's and the process
// collector's metrics (keygate's admin listener serves one).
type MetricsProbe struct {
	URL    string
	Token  string // bearer token, if /metrics needs one
	Client *http.Client
}

func (m MetricsProbe) Source() string { return "metrics" }

func (m MetricsProbe) Read(ctx context.Context) (Sample, error) {
	sent := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.URL, nil)
	if err != nil {
		return Sample{}, err
	}
	if m.Token != "" {
		req.Header.Set("Authorization", "Bearer "+m.Token)
	}
	c := m.Client
	if c == nil {
		c = &http.Client{Timeout: 5 * time.Second}
	}
	resp, err := c.Do(req)
	if err != nil {
		return Sample{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Sample{}, fmt.Errorf("metrics: %s answered %s", m.URL, resp.Status)
	}
	smp, err := parseMetrics(io.LimitReader(resp.Body, 16<<20))
	// The target read its counters while the scrape was in flight, which
	// on an overloaded target can be long: stamp the sample halfway.
	smp.At = sent.Add(time.Since(sent) / 2)
	return smp, err
}

// ChildProbe reads a target this package started: CPU and RSS from /proc,
// exact and cheap however loaded the target is, and allocations from its
// /metrics when that answers within MetricsWait.
type ChildProbe struct {
	Pid     int
	Also    []int         // processes started beside it (the proxy's upstream)
	Metrics *MetricsProbe // nil: no allocation figures
}

// MetricsWait bounds a ChildProbe's scrape.
const MetricsWait = time.Second

func (c ChildProbe) Source() string { return "proc" }

func (c ChildProbe) Read(ctx context.Context) (Sample, error) {
	smp, err := ProcProbe{Pid: c.Pid}.Read(ctx)
	if err != nil {
		return smp, err
	}
	smp.Workload = smp.CPU
	for _, pid := range c.Also {
		if cpu, _, err := procCPU(pid); err == nil {
			smp.Workload += cpu
		}
	}
	if host, err := hostBusy(); err == nil {
		if self, _, err := procCPU(os.Getpid()); err == nil {
			smp.Host, smp.Self = host, self
		}
	}
	if c.Metrics == nil {
		return smp, nil
	}
	mctx, cancel := context.WithTimeout(ctx, MetricsWait)
	defer cancel()
	if m, err := c.Metrics.Read(mctx); err == nil && m.HasAllocs {
		smp.Mallocs, smp.AllocBytes, smp.HasAllocs = m.Mallocs, m.AllocBytes, true
	}
	return smp, nil
}

// parseMetrics reads the four series it needs from Prometheus text.
func parseMetrics(r io.Reader) (Sample, error) {
	s := Sample{At: time.Now()}
	found := 0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		var dst *float64
		var rss float64
		switch name {
		case "process_cpu_seconds_total":
			dst = &s.CPU
		case "go_memstats_mallocs_total":
			dst = &s.Mallocs
			s.HasAllocs = true
		case "go_memstats_alloc_bytes_total":
			dst = &s.AllocBytes
		case "process_resident_memory_bytes":
			dst = &rss
		default:
			continue
		}
		f := strings.Fields(val) // the value, then an optional timestamp
		if len(f) == 0 {
			return s, fmt.Errorf("metrics: %s has no value", name)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return s, fmt.Errorf("metrics: %s: %w", name, err)
		}
		*dst = v
		if dst == &rss {
			s.RSS = int64(rss)
		}
		found++
	}
	if err := sc.Err(); err != nil {
		return s, fmt.Errorf("metrics: %w", err)
	}
	if found == 0 {
		return s, errors.New("metrics: no process_cpu_seconds_total or go_memstats_* series")
	}
	return s, nil
}

// SampleInterval is how often a Sampler reads its probe.
const SampleInterval = time.Second

// gapFactor: a sampling interval longer than gapFactor × SampleInterval
// is a hole in the timeline (the probe, in the generator's process, could
// not run on time: the generator's machine was overloaded).
const gapFactor = 1.5

// Sampler records a target's usage over one step's measured window.
type Sampler struct {
	probe   Probe
	cpus    []int // the target's CPUs, when pinned
	end     time.Time
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	samples []Sample
	err     error
}

// StartSampler samples probe from delay (the end of the warm-up) on, once
// a SampleInterval, and last at delay+window (the end of the measured
// window; 0: when Finish is called), so that what it reports covers the
// step's window and not the time the generator takes to wind down. cpus
// are the CPUs the target is pinned to (nil: not pinned).
func StartSampler(ctx context.Context, probe Probe, delay, window time.Duration, cpus []int) *Sampler {
	s := &Sampler{probe: probe, cpus: cpus, stop: make(chan struct{}), done: make(chan struct{})}
	start := time.Now().Add(delay)
	if window > 0 {
		s.end = start.Add(window)
	}
	go s.loop(ctx, start)
	return s
}

func (s *Sampler) loop(ctx context.Context, next time.Time) {
	defer close(s.done)
	t := time.NewTimer(time.Until(next))
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			s.take(ctx) // the run ended before the window did
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.take(ctx)
		if !s.end.IsZero() && !time.Now().Before(s.end) {
			return
		}
		next = next.Add(SampleInterval)
		if !s.end.IsZero() && next.After(s.end) {
			next = s.end
		}
		t.Reset(time.Until(next))
	}
}

func (s *Sampler) take(ctx context.Context) {
	smp, err := s.probe.Read(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.err = err
		return
	}
	s.samples = append(s.samples, smp)
}

// Finish ends the sampling (taking a last sample if the window has not
// ended) and returns the usage between the first and the last sample, for
// a step that read requests answers; nil with the error when fewer than
// two samples were read.
func (s *Sampler) Finish(ctx context.Context, requests int64) (*loadgen.ServerUsage, error) {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.samples) < 2 {
		return nil, fmt.Errorf("target usage: %d samples (%v)", len(s.samples), s.err)
	}
	first, last := s.samples[0], s.samples[len(s.samples)-1]
	wall := last.At.Sub(first.At).Seconds()
	if wall <= 0 {
		return nil, errors.New("target usage: no time between samples")
	}
	u := &loadgen.ServerUsage{Source: s.probe.Source(), CPUSeconds: last.CPU - first.CPU, RSSBytes: last.RSS,
		WindowSeconds: wall, CPUs: s.cpus}
	u.CPUPercent = 100 * u.CPUSeconds / wall
	if first.HasAllocs && last.HasAllocs {
		u.AllocsPerSec = (last.Mallocs - first.Mallocs) / wall
		u.AllocBytesPerSec = (last.AllocBytes - first.AllocBytes) / wall
		if requests > 0 {
			u.AllocsPerRequest = (last.Mallocs - first.Mallocs) / float64(requests)
		}
	}
	if first.Host != nil && last.Host != nil {
		all, onTarget := s.others(first, last)
		u.Others = &loadgen.OtherUsage{CPUPercent: 100 * all / wall, OnTargetCPUsPercent: 100 * onTarget / wall}
	}
	for i := 1; i < len(s.samples); i++ {
		a, b := s.samples[i-1], s.samples[i]
		dt := b.At.Sub(a.At).Seconds()
		if dt <= 0 {
			continue
		}
		smp := loadgen.UsageSample{At: b.At.Sub(first.At).Seconds(), CPUPercent: 100 * (b.CPU - a.CPU) / dt,
			Gap: dt > gapFactor*SampleInterval.Seconds()}
		if a.HasAllocs && b.HasAllocs {
			smp.AllocsPerSec = (b.Mallocs - a.Mallocs) / dt
		}
		if a.Host != nil && b.Host != nil {
			all, onTarget := s.others(a, b)
			smp.OthersPercent = 100 * all / dt
			if len(s.cpus) > 0 {
				smp.OthersPercent = 100 * onTarget / dt
			}
		}
		u.Timeline = append(u.Timeline, smp)
	}
	return u, nil
}

// others is the CPU time between samples a and b that neither the target
// (with what was started beside it) nor this process used: on every CPU,
// and on the target's CPUs when it is pinned (then the rest is charged to
// the generator's CPUs, where only the generator should run).
func (s *Sampler) others(a, b Sample) (all, onTarget float64) {
	busy := func(pick func(cpu int) bool) (sum float64) {
		for c := range min(len(a.Host), len(b.Host)) {
			if pick(c) {
				sum += b.Host[c] - a.Host[c]
			}
		}
		return sum
	}
	work, self := b.Workload-a.Workload, b.Self-a.Self
	if len(s.cpus) == 0 {
		return max(busy(func(int) bool { return true })-work-self, 0), 0
	}
	onTarget = max(busy(func(c int) bool { return slices.Contains(s.cpus, c) })-work, 0)
	elsewhere := max(busy(func(c int) bool { return !slices.Contains(s.cpus, c) })-self, 0)
	return onTarget + elsewhere, onTarget
}
