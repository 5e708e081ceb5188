package telemetry

import "github.com/prometheus/client_golang/prometheus"

// SecretCacheStats is the state of the secret store's read cache.
type SecretCacheStats struct {
	Hits, Misses   uint64 // reads answered from it; reads that queried the store
	Drops          uint64 // paths dropped by a change, here or at another node of the fleet
	Entries, Bytes int64  // what it holds now
}

// SecretCache registers the metrics of the secret store's read cache,
// read from stats on every scrape: keygate_secret_cache_hits_total,
// _misses_total and _drops_total, and keygate_secret_cache_entries and
// _bytes.
func (m *Metrics) SecretCache(stats func() SecretCacheStats) {
	counter := func(name, help string, f func(SecretCacheStats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(f(stats())) })
	}
	gauge := func(name, help string, f func(SecretCacheStats) int64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return float64(f(stats())) })
	}
	m.register(
		counter("keygate_secret_cache_hits_total", "Secret reads answered from the read cache (no store query).",
			func(s SecretCacheStats) uint64 { return s.Hits }),
		counter("keygate_secret_cache_misses_total", "Secret reads that queried the store.",
			func(s SecretCacheStats) uint64 { return s.Misses }),
		counter("keygate_secret_cache_drops_total", "Paths dropped from the secret read cache by a change, at this node or announced by another.",
			func(s SecretCacheStats) uint64 { return s.Drops }),
		gauge("keygate_secret_cache_entries", "Paths held in the secret read cache.",
			func(s SecretCacheStats) int64 { return s.Entries }),
		gauge("keygate_secret_cache_bytes", "Bytes held in the secret read cache (sealed values and metadata).",
			func(s SecretCacheStats) int64 { return s.Bytes }),
	)
}
