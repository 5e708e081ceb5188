package telemetry

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TransitMetrics count transit requests by operation. A nil *TransitMetrics
// counts nothing.
type TransitMetrics struct {
	requests *prometheus.CounterVec
	ops      map[string]*transitOp // read-only once built: no lock on the hot path
	other    *transitOp            // an operation Transit was not told of
}

// transitOp is one operation's series, resolved up front.
type transitOp struct {
	name                string
	ok                  prometheus.Counter
	seconds             prometheus.Observer
	itemsOK, itemsError prometheus.Counter
}

// TransitOther is the operation label of a request no route matched, and
// of any operation Transit was not given.
const TransitOther = "transit"

// Transit registers the transit API's metrics for the operations ops
// ("transit.encrypt", ...): keygate_transit_requests_total{op, result,
// reason} (result ok, refused for a 4xx, error for a 5xx; reason the error
// code answered), keygate_transit_request_seconds{op} (the handler's time,
// from the request to its answer; the audit log's wait is in
// keygate_audit_*) and keygate_transit_batch_items_total{op, result} (ok
// or error per batch_input item).
func (m *Metrics) Transit(ops []string) *TransitMetrics {
	return m.vaultAPI("transit", "Transit API", TransitOther, ops, true)
}

// SecretOther is the operation label of a KV request no route matched.
const SecretOther = "secret"

// Secrets registers the same for the secret store's KV API ("secret.read",
// ...): keygate_secret_requests_total{op, result, reason} and
// keygate_secret_request_seconds{op}.
func (m *Metrics) Secrets(ops []string) *TransitMetrics {
	return m.vaultAPI("secret", "Secret store (KV) API", SecretOther, ops, false)
}

// CredentialOther is the operation label of a credentials request no
// route matched.
const CredentialOther = "credentials"

// Credentials registers the same for the TOTP and password-policy APIs
// ("totp.code.validate", ...): keygate_credential_requests_total{op,
// result, reason} and keygate_credential_request_seconds{op}.
func (m *Metrics) Credentials(ops []string) *TransitMetrics {
	return m.vaultAPI("credential", "TOTP and password-policy API", CredentialOther, ops, false)
}

func (m *Metrics) vaultAPI(name, what, other string, ops []string, batches bool) *TransitMetrics {
	t := &TransitMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keygate_" + name + "_requests_total",
			Help: what + " requests by operation, result (ok; refused: a 4xx; error: a 5xx) and reason (the error code answered)."},
			[]string{"op", "result", "reason"}),
		ops: make(map[string]*transitOp, len(ops)+1),
	}
	seconds := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "keygate_" + name + "_request_seconds",
		Help:    "Time the " + what + " took to answer a request, by operation (the audit log's wait is in keygate_audit_*).",
		Buckets: []float64{1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.1, 0.5, 2}},
		[]string{"op"})
	collectors := []prometheus.Collector{t.requests, seconds}
	var items *prometheus.CounterVec
	if batches {
		items = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keygate_" + name + "_batch_items_total",
			Help: "batch_input items by operation and result (ok, error: the item's own error)."},
			[]string{"op", "result"})
		collectors = append(collectors, items)
	}
	for _, op := range append([]string{other}, ops...) {
		o := &transitOp{name: op, ok: t.requests.WithLabelValues(op, "ok", ""), seconds: seconds.WithLabelValues(op)}
		if items != nil {
			o.itemsOK, o.itemsError = items.WithLabelValues(op, "ok"), items.WithLabelValues(op, "error")
		}
		t.ops[op] = o
	}
	t.other = t.ops[other]
	m.register(collectors...)
	return t
}

// Observe counts one request: its operation, the status answered, the
// reason of a refusal, its batch items and how many of them failed, and
// the time it took.
func (t *TransitMetrics) Observe(op string, status int, reason string, items, failed int, elapsed time.Duration) {
	if t == nil {
		return
	}
	o := t.ops[op]
	if o == nil {
		o = t.other
	}
	switch {
	case status >= 500:
		t.requests.WithLabelValues(o.name, "error", reason).Inc()
	case status >= 400:
		t.requests.WithLabelValues(o.name, "refused", reason).Inc()
	default:
		o.ok.Inc()
	}
	o.seconds.Observe(elapsed.Seconds())
	if items > 0 && o.itemsOK != nil {
		o.itemsOK.Add(float64(items - failed))
		if failed > 0 {
			o.itemsError.Add(float64(failed))
		}
	}
}

// Snapshot flattens every series of the registry into "name{labels}" →
// value, labels in the exposition format's order; a histogram gives
// name_count{labels} and name_sum{labels}. For tests and tools that read a
// node's figures in process.
func (m *Metrics) Snapshot() (map[string]float64, error) {
	mfs, err := m.Registry.Gather()
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, metric := range mf.GetMetric() {
			var labels []string
			for _, l := range metric.GetLabel() {
				labels = append(labels, l.GetName()+`="`+l.GetValue()+`"`)
			}
			set := ""
			if len(labels) > 0 {
				set = "{" + strings.Join(labels, ",") + "}"
			}
			switch {
			case metric.Histogram != nil:
				out[mf.GetName()+"_count"+set] = float64(metric.Histogram.GetSampleCount())
				out[mf.GetName()+"_sum"+set] = metric.Histogram.GetSampleSum()
			case metric.Counter != nil:
				out[mf.GetName()+set] = metric.Counter.GetValue()
			case metric.Gauge != nil:
				out[mf.GetName()+set] = metric.Gauge.GetValue()
			}
		}
	}
	return out, nil
}

// TransitPoolStats is the state of the transit engine's workers for
// asymmetric-key operations.
type TransitPoolStats struct {
	Workers, Running, Waiting int
	Started                   uint64 // operations that have had a worker
}

// TransitPool registers the metrics of the transit engine's workers for
// asymmetric-key operations, read from stats on every scrape (named for
// the private-key operations they first ran): keygate_transit_private_key_
// workers, _running and _waiting, and _operations_total. Operations
// waiting while the workers are all running mean private_key_workers is
// the bottleneck; every tenant then gets its share of it.
func (m *Metrics) TransitPool(stats func() TransitPoolStats) {
	gauge := func(name, help string, f func(TransitPoolStats) int) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return float64(f(stats())) })
	}
	m.register(
		gauge("keygate_transit_private_key_workers", "Workers for transit's asymmetric-key operations (signing, verification, RSA encryption and decryption, key generation and import).",
			func(s TransitPoolStats) int { return s.Workers }),
		gauge("keygate_transit_private_key_running", "Transit asymmetric-key operations holding a worker.",
			func(s TransitPoolStats) int { return s.Running }),
		gauge("keygate_transit_private_key_waiting", "Transit asymmetric-key operations waiting for a worker, in their tenant's turn.",
			func(s TransitPoolStats) int { return s.Waiting }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "keygate_transit_private_key_operations_total",
			Help: "Transit asymmetric-key operations that have had a worker."},
			func() float64 { return float64(stats().Started) }),
	)
}
