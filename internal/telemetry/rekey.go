package telemetry

import "github.com/prometheus/client_golang/prometheus"

// RekeyStats is the root-key rotation's state as the store holds it, the
// same at every node of a fleet.
type RekeyStats struct {
	Rewrapping bool // a rotation is under way
	// Done and Total are the records (signing keys and tenants' data keys)
	// under the new root key, and sealed under a root key in all, as the
	// rotation's last pass counted them: the rotation under way's, or the
	// last one's (0 and 0 before any).
	Done, Total int64
}

var (
	rekeyRewrappingDesc = prometheus.NewDesc("keygate_rekey_rewrapping",
		"1 while a root-key rotation is under way (the records are being rewrapped under the new key), 0 otherwise.", nil, nil)
	rekeyRecordsDesc = prometheus.NewDesc("keygate_rekey_records",
		"Records sealed under the root key (signing keys and tenants' data keys), as the root-key rotation under way, or the last one, counted them.", nil, nil)
	rekeyDoneDesc = prometheus.NewDesc("keygate_rekey_records_done",
		"Of keygate_rekey_records, those under the rotation's new root key.", nil, nil)
)

// Rekey registers the root-key rotation's gauges, read from stats once per
// scrape: keygate_rekey_rewrapping, keygate_rekey_records and
// keygate_rekey_records_done. When stats cannot tell (false: the store did
// not answer) the scrape has none of them, rather than zeros that would
// read as no rotation.
func (m *Metrics) Rekey(stats func() (RekeyStats, bool)) {
	m.register(rekeyCollector(stats))
}

type rekeyCollector func() (RekeyStats, bool)

func (c rekeyCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- rekeyRewrappingDesc
	ch <- rekeyRecordsDesc
	ch <- rekeyDoneDesc
}

func (c rekeyCollector) Collect(ch chan<- prometheus.Metric) {
	st, ok := c()
	if !ok {
		return
	}
	rewrapping := 0.0
	if st.Rewrapping {
		rewrapping = 1
	}
	ch <- prometheus.MustNewConstMetric(rekeyRewrappingDesc, prometheus.GaugeValue, rewrapping)
	ch <- prometheus.MustNewConstMetric(rekeyRecordsDesc, prometheus.GaugeValue, float64(st.Total))
	ch <- prometheus.MustNewConstMetric(rekeyDoneDesc, prometheus.GaugeValue, float64(st.Done))
}
