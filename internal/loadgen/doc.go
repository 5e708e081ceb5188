// Package loadgen is an HTTP/1.1 load generator for 'keygate bench load':
// it keeps N keep-alive connections busy with one request template, either
// closed loop (each connection sends its next request as soon as the answer
// is read, like wrk) or open loop at a fixed rate with latency measured from
// each request's intended send time (coordinated-omission correction, like
// wrk2), and reports throughput, a latency histogram, errors by kind and
// the generator's own CPU use.
package loadgen
