// Package telemetry holds keygate's Prometheus metrics and log set-up. Hot
// path counters are resolved to their label values once, up front, so that
// counting a decision is one atomic add rather than a label lookup.
package telemetry

import (
	"context"
	"log/slog"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/keygate/keygate/jose"
)

// Front ends that make decisions.
const (
	FrontForwardAuth = "forward_auth"
	FrontProxy       = "proxy"
)

// Metrics are keygate's metrics, registered in their own registry.
type Metrics struct {
	Registry *prometheus.Registry

	decisions     *prometheus.CounterVec
	signals       *prometheus.CounterVec
	verifySeconds *prometheus.HistogramVec
	jwksFetches   *prometheus.CounterVec
	jwksKeys      *prometheus.GaugeVec
	jwksSkipped   *prometheus.CounterVec
	jwksAge       *prometheus.GaugeVec
	inFlight      *prometheus.GaugeVec
	reloads       *prometheus.CounterVec
	keyFileLoads  *prometheus.CounterVec
	tokenRequests *prometheus.CounterVec
	tokenSeconds  *prometheus.HistogramVec
	keyErrors     prometheus.Counter
	tlsLoads      *prometheus.CounterVec
	tlsNotAfter   *prometheus.GaugeVec

	fleet     atomic.Pointer[func() FleetStats] // set by Fleet
	fleetOnce sync.Once

	mu         sync.Mutex
	collectors []prometheus.Collector // every one registered, for Families
}

// register registers cs and keeps them for Families.
func (m *Metrics) register(cs ...prometheus.Collector) {
	m.Registry.MustRegister(cs...)
	m.mu.Lock()
	m.collectors = append(m.collectors, cs...)
	m.mu.Unlock()
}

// descName and descLabels find a descriptor's name and variable labels in
// its String form, the one place client_golang shows them.
var (
	descName   = regexp.MustCompile(`^Desc\{fqName: "([^"]+)"`)
	descLabels = regexp.MustCompile(`variableLabels: \{([^}]*)\}\}$`)
)

// Families lists every metric registered so far, series or not (a vector
// before its first label values has none), with its label names: what a
// dashboard or an alert may name.
func (m *Metrics) Families() map[string][]string {
	m.mu.Lock()
	cs := slices.Clone(m.collectors)
	m.mu.Unlock()
	ch := make(chan *prometheus.Desc)
	go func() {
		for _, c := range cs {
			c.Describe(ch)
		}
		close(ch)
	}()
	out := map[string][]string{}
	for d := range ch {
		s := d.String()
		n := descName.FindStringSubmatch(s)
		if n == nil {
			continue
		}
		var labels []string
		if l := descLabels.FindStringSubmatch(s); l != nil && l[1] != "" {
			for _, name := range strings.Split(l[1], ",") {
				labels = append(labels, strings.TrimSuffix(strings.TrimPrefix(name, "c("), ")"))
			}
		}
		out[n[1]] = labels
	}
	return out
}

// New creates and registers every metric, with Go runtime and process
// collectors beside them.
func New() *Metrics {
	r := prometheus.NewRegistry()
	m := &Metrics{
		Registry: r,
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "keygate_decisions_total",
			Help: "Authorization decisions by front end, result (allow, deny) and reason.",
		}, []string{"frontend", "result", "reason"}),
		signals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "keygate_request_signals_total",
			Help: "Requests that carried something ignored without a refusal, by front end and reason (untrusted_forwarding_header: a forwarding header the proxy preset does not trust).",
		}, []string{"frontend", "reason"}),
		verifySeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "keygate_verify_seconds",
			Help:    "Time to verify a token that missed the cache, by algorithm.",
			Buckets: []float64{5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 5e-3, 0.025, 0.1},
		}, []string{"alg"}),
		jwksFetches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "keygate_jwks_fetches_total",
			Help: "Remote JWKS fetches by issuer and result.",
		}, []string{"issuer", "result"}),
		jwksKeys: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "keygate_jwks_keys",
			Help: "Keys in each issuer's current key set.",
		}, []string{"issuer"}),
		jwksSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "keygate_jwks_keys_skipped_total",
			Help: "Keys of a remote JWKS left out, by issuer and reason (alg_not_allowed, weak_key, unsupported_kty, bad_use, duplicate_kid, ...); a key left out by every refresh of an unchanged JWKS counts once.",
		}, []string{"issuer", "reason"}),
		jwksAge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "keygate_jwks_last_success_timestamp_seconds",
			Help: "When each issuer's keys were last loaded successfully (Unix time).",
		}, []string{"issuer"}),
		keyFileLoads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "keygate_key_file_loads_total",
			Help: "Loads of each issuer's key files (at start, on reload, and when the watcher sees them change) by result (ok, error).",
		}, []string{"issuer", "result"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "keygate_in_flight_requests",
			Help: "Requests being handled, by front end.",
		}, []string{"frontend"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "keygate_config_reloads_total",
			Help: "Configuration reloads by result (ok, error).",
		}, []string{"result"}),
		tokenRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "keygate_token_requests_total",
			Help: "Token service requests by endpoint (token, revoke, introspect, login), grant type and result (ok, inactive, or the OAuth error code).",
		}, []string{"endpoint", "grant", "result"}),
		keyErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "keygate_signing_key_schedule_errors_total",
			Help: "Runs of the signing-key schedule (rotation, retirement) that failed."}),
		tlsLoads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "keygate_tls_certificate_loads_total",
			Help: "Loads of each listener's TLS certificate files (at start, and when the watcher sees them change) by result (ok, error); after an error the certificate in force keeps serving.",
		}, []string{"listener", "result"}),
		tlsNotAfter: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "keygate_tls_certificate_not_after_timestamp_seconds",
			Help: "When the certificate each TLS listener serves expires (Unix time).",
		}, []string{"listener"}),
		tokenSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "keygate_token_request_seconds",
			Help:    "Time to answer a token service request, by endpoint.",
			Buckets: []float64{1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.1, 0.5, 2},
		}, []string{"endpoint"}),
	}
	// The successful series exist from the start, so that a rate over them
	// is defined before the first request.
	for _, s := range [][2]string{{"token", "client_credentials"}, {"token", "refresh_token"}, {"login", "password"},
		{"revoke", ""}, {"introspect", ""}} {
		m.tokenRequests.WithLabelValues(s[0], s[1], "ok")
	}
	m.register(m.decisions, m.signals, m.verifySeconds, m.jwksFetches, m.jwksKeys, m.jwksSkipped,
		m.jwksAge, m.keyFileLoads, m.inFlight, m.reloads, m.tokenRequests, m.tokenSeconds, m.tlsLoads, m.tlsNotAfter,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Decisions returns counters for one front end, with every reason's label
// resolved in advance.
func (m *Metrics) Decisions(frontend string, reasons []string) *Decisions {
	d := &Decisions{allow: m.decisions.WithLabelValues(frontend, "allow", ""),
		deny: make(map[string]prometheus.Counter, len(reasons)), vec: m.decisions, signals: m.signals, frontend: frontend,
		inFlight: m.inFlight.WithLabelValues(frontend)}
	for _, r := range reasons {
		d.deny[r] = m.decisions.WithLabelValues(frontend, "deny", r)
	}
	return d
}

// Decisions counts one front end's decisions.
type Decisions struct {
	allow    prometheus.Counter
	deny     map[string]prometheus.Counter // read-only after construction
	vec      *prometheus.CounterVec
	signals  *prometheus.CounterVec
	frontend string
	inFlight prometheus.Gauge
}

// Allow counts an allowed request.
func (d *Decisions) Allow() { d.allow.Inc() }

// Deny counts a refused request with its reason.
func (d *Decisions) Deny(reason string) {
	if c, ok := d.deny[reason]; ok {
		c.Inc()
		return
	}
	d.vec.WithLabelValues(d.frontend, "deny", reason).Inc()
}

// Signal counts a request that carried something ignored without a
// refusal, by reason (rare: resolved on each call).
func (d *Decisions) Signal(reason string) { d.signals.WithLabelValues(d.frontend, reason).Inc() }

// Begin marks a request in flight; call the returned func when it is done.
func (d *Decisions) Begin() func() {
	d.inFlight.Inc()
	return d.inFlight.Dec
}

// TokenRequest counts a token service request (issuer.Observer), with the
// trace id of ctx's span as exemplar when it is sampled.
func (m *Metrics) TokenRequest(ctx context.Context, endpoint, grant, result string, elapsed time.Duration) {
	m.tokenRequests.WithLabelValues(endpoint, grant, result).Inc()
	observe(ctx, m.tokenSeconds.WithLabelValues(endpoint), elapsed.Seconds())
}

// VerifyObserver returns a function for verify.Config.Observe with every
// algorithm's histogram resolved in advance. A verification under a
// sampled span is observed with its trace id as exemplar.
func (m *Metrics) VerifyObserver() func(context.Context, jose.Alg, time.Duration, bool) {
	var obs [32]prometheus.Observer
	for _, a := range jose.Algorithms() {
		obs[a] = m.verifySeconds.WithLabelValues(a.String())
	}
	return func(ctx context.Context, a jose.Alg, d time.Duration, _ bool) {
		if int(a) < len(obs) && obs[a] != nil {
			observe(ctx, obs[a], d.Seconds())
		}
	}
}

// observe observes v on o, with the trace id of ctx's span as exemplar
// when that span is sampled: from a latency bucket on a dashboard to the
// trace of a request that fell in it.
func observe(ctx context.Context, o prometheus.Observer, v float64) {
	if id := TraceID(ctx); id != "" {
		if eo, ok := o.(prometheus.ExemplarObserver); ok {
			eo.ObserveWithExemplar(v, prometheus.Labels{"trace_id": id})
			return
		}
	}
	o.Observe(v)
}

// CacheStats reads the verified-token cache's figures at scrape time, so
// that counting costs the request path nothing.
type CacheStats func() (entries int, hits, misses uint64)

// Cache registers the cache's entry gauge and lookup counters, read from
// stats on every scrape; stats must keep the counters monotonic across
// reloads that replace the cache (the server does).
func (m *Metrics) Cache(stats CacheStats) {
	m.register(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "keygate_cache_entries", Help: "Entries in the verified-token cache."},
			func() float64 { e, _, _ := stats(); return float64(e) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "keygate_cache_hits_total", Help: "Verified-token cache hits."},
			func() float64 { _, h, _ := stats(); return float64(h) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "keygate_cache_misses_total", Help: "Verified-token cache misses."},
			func() float64 { _, _, ms := stats(); return float64(ms) }),
	)
}

// JWKSFetch records one remote key fetch.
func (m *Metrics) JWKSFetch(issuer, result string, keys int, at time.Time) {
	m.jwksFetches.WithLabelValues(issuer, result).Inc()
	if result == "ok" {
		m.jwksKeys.WithLabelValues(issuer).Set(float64(keys))
		m.jwksAge.WithLabelValues(issuer).Set(float64(at.Unix()))
	}
}

// JWKSKeySkipped counts a key of issuer's JWKS left out for reason.
func (m *Metrics) JWKSKeySkipped(issuer, reason string) {
	m.jwksSkipped.WithLabelValues(issuer, reason).Inc()
}

// KeyFileLoad records one load of an issuer's key files; keys is the size
// of the set in force afterwards.
func (m *Metrics) KeyFileLoad(issuer string, ok bool, keys int, at time.Time) {
	if !ok {
		m.keyFileLoads.WithLabelValues(issuer, "error").Inc()
		return
	}
	m.keyFileLoads.WithLabelValues(issuer, "ok").Inc()
	m.jwksKeys.WithLabelValues(issuer).Set(float64(keys))
	m.jwksAge.WithLabelValues(issuer).Set(float64(at.Unix()))
}

// TLSCertificateLoad records one load of a listener's certificate files;
// notAfter is the expiry of the certificate in force afterwards.
func (m *Metrics) TLSCertificateLoad(listener string, ok bool, notAfter time.Time) {
	ok0, errs := m.tlsLoads.WithLabelValues(listener, "ok"), m.tlsLoads.WithLabelValues(listener, "error")
	if ok { // the error series exists, at zero, from the first load on
		ok0.Inc()
	} else {
		errs.Inc()
	}
	m.tlsNotAfter.WithLabelValues(listener).Set(float64(notAfter.Unix()))
}

// Reload counts a configuration reload.
func (m *Metrics) Reload(ok bool) {
	if ok {
		m.reloads.WithLabelValues("ok").Inc()
	} else {
		m.reloads.WithLabelValues("error").Inc()
	}
}

// NewLogger returns a text slog.Logger on stderr at the given level name.
func NewLogger(level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
}

// FleetStats is the state a node shares with the others through Redis, read
// at scrape time.
type FleetStats struct {
	// Staleness is how long ago the revocation set was last known current
	// (math.MaxInt64 before the first sync).
	Staleness time.Duration
	// FailClosed: the set is older than the allowed staleness and every
	// token is refused.
	FailClosed bool
	// Limiters are the fleet's Redis-backed rate limiters (login, token).
	Limiters []LimiterStats
}

// LimiterStats is one Redis-backed rate limiter's figures.
type LimiterStats struct {
	Name string // what it limits: "login", "token"
	// Redis and Fallback count decisions made in Redis and by the local
	// fallback while Redis failed.
	Redis, Fallback uint64
	// Degraded: Redis is failing and the local fallback decides.
	Degraded bool
}

// Fleet registers the shared-state metrics, read from stats on every
// scrape, so that the request path pays nothing. Only nodes with Redis
// register them. A later call (a second server on the same Metrics)
// replaces stats.
func (m *Metrics) Fleet(stats func() FleetStats) {
	m.fleet.Store(&stats)
	m.fleetOnce.Do(func() {
		read := func() (FleetStats, bool) {
			p := m.fleet.Load()
			if p == nil || *p == nil {
				return FleetStats{}, false
			}
			return (*p)(), true
		}
		b2f := func(b bool) float64 {
			if b {
				return 1
			}
			return 0
		}
		m.register(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "keygate_revocations_staleness_seconds",
				Help: "Seconds since the shared revocation set was last known current (+Inf before the first sync from Redis)."},
				func() float64 {
					st, ok := read()
					if !ok {
						return 0
					}
					if st.Staleness == math.MaxInt64 {
						return math.Inf(1)
					}
					return st.Staleness.Seconds()
				}),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "keygate_revocations_fail_closed",
				Help: "1 while the revocation set is older than the allowed staleness and every token is refused."},
				func() float64 { st, _ := read(); return b2f(st.FailClosed) }),
			limiterCollector(func() []LimiterStats { st, _ := read(); return st.Limiters }),
		)
	})
}

var (
	limiterDecisionsDesc = prometheus.NewDesc("keygate_rate_limit_decisions_total",
		"Rate-limit decisions by limiter (login, token) and by who decided: redis, or the local fallback while Redis failed.",
		[]string{"limiter", "decided_by"}, nil)
	limiterDegradedDesc = prometheus.NewDesc("keygate_rate_limit_degraded",
		"1 while Redis is failing and the limiter's local fallback decides.",
		[]string{"limiter"}, nil)
)

// limiterCollector reports the fleet's rate limiters at scrape time; their
// set is known only then (a reload may replace one).
type limiterCollector func() []LimiterStats

func (c limiterCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- limiterDecisionsDesc
	ch <- limiterDegradedDesc
}

func (c limiterCollector) Collect(ch chan<- prometheus.Metric) {
	for _, l := range c() {
		ch <- prometheus.MustNewConstMetric(limiterDecisionsDesc, prometheus.CounterValue, float64(l.Redis), l.Name, "redis")
		ch <- prometheus.MustNewConstMetric(limiterDecisionsDesc, prometheus.CounterValue, float64(l.Fallback), l.Name, "fallback")
		degraded := 0.0
		if l.Degraded {
			degraded = 1
		}
		ch <- prometheus.MustNewConstMetric(limiterDegradedDesc, prometheus.GaugeValue, degraded, l.Name)
	}
}

// KeySchedule registers the signing-key metrics, read from status on every
// scrape: how many keys the JWKS publishes and when the key in force became
// active (an alert on its age catches a schedule that stopped rotating),
// and keygate_signing_key_schedule_errors_total, counted by
// KeyScheduleFailed.
func (m *Metrics) KeySchedule(status func() (published int, activeSince time.Time)) {
	m.register(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "keygate_signing_keys_published",
			Help: "Signing keys in the published JWKS (pre-published, active and retiring)."},
			func() float64 { n, _ := status(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "keygate_signing_key_active_since_timestamp_seconds",
			Help: "When the signing key in force became active (Unix time; 0 before one is)."},
			func() float64 {
				_, t := status()
				if t.IsZero() {
					return 0
				}
				return float64(t.UnixNano()) / 1e9
			}),
		m.keyErrors,
	)
}

// KeyScheduleFailed counts a failed run of the signing-key schedule.
func (m *Metrics) KeyScheduleFailed() { m.keyErrors.Inc() }

// Sealed registers keygate_sealed, read from sealed on every scrape.
func (m *Metrics) Sealed(sealed func() bool) {
	m.register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "keygate_sealed",
		Help: "1 while the root key is not loaded: tokens cannot be issued and keys cannot be rotated."},
		func() float64 {
			if sealed() {
				return 1
			}
			return 0
		}))
}

// AuditSink is one audit sink's state for keygate_audit_sink_up.
type AuditSink struct {
	Name string // its kind: file, stdout, store, or the sink's own name
	Up   bool   // took the last batch and is not disabled
}

// AuditMetrics count the audit log's records, batches and sink failures.
// A nil *AuditMetrics counts nothing.
type AuditMetrics struct {
	written, failed prometheus.Counter
	tallied         prometheus.Counter
	sinkFailures    *prometheus.CounterVec
	batch, commit   prometheus.Histogram
}

// Audit registers the audit log's metrics: keygate_audit_records_total
// {result="written" or "failed"} (a failed record's request was answered
// 503), keygate_audit_sink_failures_total{sink},
// keygate_audit_batch_records (records per group commit),
// keygate_audit_commit_seconds (how long each took),
// keygate_audit_refusals_aggregated_total (refusals before authentication
// past their address's limit: answered 429 and counted in an aggregate
// record) and keygate_audit_sink_up{sink}, read from sinks on every
// scrape.
func (m *Metrics) Audit(sinks func() []AuditSink) *AuditMetrics {
	records := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keygate_audit_records_total",
		Help: "Audit records by result: written (to at least one sink), or failed (no sink took it, and its request was answered 503)."},
		[]string{"result"})
	a := &AuditMetrics{written: records.WithLabelValues("written"), failed: records.WithLabelValues("failed"),
		sinkFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keygate_audit_sink_failures_total",
			Help: "Failed writes to each audit sink (file, stdout, store); the records are still written while another sink takes them."},
			[]string{"sink"}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "keygate_audit_batch_records",
			Help:    "Records written together in one group commit (one write per sink; one fsync too with the file sink's sync: batch).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096}}),
	}
	a.commit = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "keygate_audit_commit_seconds",
		Help:    "Time a group commit took to reach the sinks (building the lines, writing them, and an fsync with sync: batch): what each of its requests waited for its record, besides the queue.",
		Buckets: []float64{1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.1, 0.5, 2}})
	a.tallied = prometheus.NewCounter(prometheus.CounterOpts{Name: "keygate_audit_refusals_aggregated_total",
		Help: "Requests refused before their caller authenticated, past their address's limit: answered 429 and recorded in an aggregate record per address rather than one each."})
	upDesc := prometheus.NewDesc("keygate_audit_sink_up", "1 while the audit sink took the last batch and is not disabled.", []string{"sink"}, nil)
	m.register(records, a.tallied, a.sinkFailures, a.batch, a.commit, auditSinkCollector{desc: upDesc, sinks: sinks})
	return a
}

// Record counts a record written, or one no sink took.
func (a *AuditMetrics) Record(ok bool) {
	switch {
	case a == nil:
	case ok:
		a.written.Inc()
	default:
		a.failed.Inc()
	}
}

// Tallied counts a refusal recorded in an aggregate record rather than on
// its own.
func (a *AuditMetrics) Tallied() {
	if a != nil {
		a.tallied.Inc()
	}
}

// SinkFailure counts a failed write to sink.
func (a *AuditMetrics) SinkFailure(sink string) {
	if a != nil {
		a.sinkFailures.WithLabelValues(sink).Inc()
	}
}

// Batch observes one group commit of records that took elapsed to reach
// the sinks.
func (a *AuditMetrics) Batch(records int, elapsed time.Duration) {
	if a != nil && records > 0 {
		a.batch.Observe(float64(records))
		a.commit.Observe(elapsed.Seconds())
	}
}

// AuditDisk registers keygate_audit_disk_free_bytes (the free space on
// the audit file sink's filesystem) and keygate_audit_disk_min_free_bytes
// (the threshold below which keygate warns and /readyz fails), read on
// every scrape; neither is exported while read cannot tell (ok false).
func (m *Metrics) AuditDisk(read func() (free, minFree uint64, ok bool)) {
	m.register(auditDiskCollector{read: read,
		free: prometheus.NewDesc("keygate_audit_disk_free_bytes",
			"Free space on the audit file sink's filesystem (available to keygate); when it runs out, every audited request is answered 503.", nil, nil),
		min: prometheus.NewDesc("keygate_audit_disk_min_free_bytes",
			"The free space below which keygate warns and /readyz answers 503 audit_disk_low (audit.file.min_free).", nil, nil)})
}

type auditDiskCollector struct {
	free, min *prometheus.Desc
	read      func() (free, minFree uint64, ok bool)
}

func (c auditDiskCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.free; ch <- c.min }

func (c auditDiskCollector) Collect(ch chan<- prometheus.Metric) {
	free, minFree, ok := c.read()
	if !ok {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.free, prometheus.GaugeValue, float64(free))
	ch <- prometheus.MustNewConstMetric(c.min, prometheus.GaugeValue, float64(minFree))
}

type auditSinkCollector struct {
	desc  *prometheus.Desc
	sinks func() []AuditSink
}

func (c auditSinkCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c auditSinkCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.sinks() {
		up := 0.0
		if s.Up {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, up, s.Name)
	}
}
