// Package loadgen is the HTTP/1.1 load generator behind 'keygate bench
// load': it keeps N keep-alive connections sending one request template,
// closed loop like wrk or open loop at a fixed rate with latency measured
// from each request's intended send time (coordinated-omission correction,
// like wrk2). It reports throughput, latency percentiles from a log-linear
// histogram, errors by kind, answers by status class and its own CPU use,
// as a table or as the keygate.bench.load/v1 JSON document (Report).
// Its client is a minimal HTTP/1.1 reader on net.Conn that allocates
// nothing per request, so that the generator is not the bottleneck.
package loadgen
