// Package runner runs keygate's load-test scenarios and the
// reproductions of its users' before/after tables: it starts the targets
// a run needs as child processes of the keygate binary ('keygate serve',
// 'keygate bench server'), pinned to their own CPUs, builds each
// scenario's pool of requests (a distinct or repeated token per request),
// drives them with package loadgen, and records what the target itself
// used during each measured window (CPU, allocations, CPU and heap
// profiles). It is a measuring tool: nothing on the serve path imports it.
package runner
