package vaultsys

import (
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/keygate/keygate/internal/httperr"
)

// HealthOptions configure the sys/health handler.
type HealthOptions struct {
	// Sealed reports whether the node is sealed (nil: never).
	Sealed func() bool
	// Initialized reports whether the node has a root key (nil: always; a
	// keygate node that serves has one).
	Initialized func() bool
	Version     string // keygate's version, answered as Vault's
	ClusterName string
	ClusterID   string
	Now         func() time.Time // nil: time.Now
	Logger      *slog.Logger     // nil discards
}

// health is Vault's sys/health answer (not in the envelope, as Vault's).
// A keygate node is never a standby: every node of a fleet serves.
type health struct {
	Initialized                bool   `json:"initialized"`
	Sealed                     bool   `json:"sealed"`
	Standby                    bool   `json:"standby"`
	PerformanceStandby         bool   `json:"performance_standby"`
	ReplicationPerformanceMode string `json:"replication_performance_mode"`
	ReplicationDRMode          string `json:"replication_dr_mode"`
	ServerTimeUTC              int64  `json:"server_time_utc"`
	Version                    string `json:"version"`
	Enterprise                 bool   `json:"enterprise"`
	ClusterName                string `json:"cluster_name,omitempty"`
	ClusterID                  string `json:"cluster_id,omitempty"`
	EchoDurationMillis         int64  `json:"echo_duration_ms"`
	ClockSkewMillis            int64  `json:"clock_skew_ms"`
}

type healthHandler struct{ o HealthOptions }

// NewHealth returns the handler of HealthPath: GET or HEAD, no token,
// Vault's status codes (200 active, 503 sealed, 501 not initialized) and
// the query parameters that change them (activecode, sealedcode,
// uninitcode, standbycode, ...; standbyok and perfstandbyok are read and
// change nothing: no keygate node is a standby).
func NewHealth(o HealthOptions) http.Handler {
	if o.Now == nil {
		o.Now = time.Now
	}
	o.Logger = discard(o.Logger)
	return healthHandler{o}
}

func (h healthHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeError(w, r, h.o.Logger, errMethod)
		return
	}
	q := r.URL.Query()
	for _, b := range []string{"standbyok", "perfstandbyok"} {
		if v, ok := q[b]; ok {
			if _, err := strconv.ParseBool(v[0]); err != nil {
				writeError(w, r, h.o.Logger, badParam(b))
				return
			}
		}
	}
	inited := h.o.Initialized == nil || h.o.Initialized()
	sealed := h.o.Sealed != nil && h.o.Sealed()
	param, def := "activecode", http.StatusOK
	switch {
	case !inited:
		param, def = "uninitcode", http.StatusNotImplemented
	case sealed:
		param, def = "sealedcode", http.StatusServiceUnavailable
	}
	// every code parameter is checked, as Vault checks them, whichever applies
	code := def
	for _, p := range []string{"activecode", "standbycode", "drsecondarycode", "performancestandbycode", "sealedcode",
		"uninitcode", "removedcode", "haunhealthycode"} {
		c, ok, err := statusParam(q, p)
		if err != nil {
			writeError(w, r, h.o.Logger, err)
			return
		}
		if ok && p == param {
			code = c
		}
	}
	out := health{Initialized: inited, Sealed: sealed, ReplicationPerformanceMode: "disabled", ReplicationDRMode: "disabled",
		ServerTimeUTC: h.o.Now().Unix(), Version: h.o.Version}
	if inited && !sealed { // Vault names the cluster only once unsealed
		out.ClusterName, out.ClusterID = h.o.ClusterName, h.o.ClusterID
	}
	writeJSON(w, r, h.o.Logger, code, out)
}

// statusParam reads a status code parameter: a number net/http can send
// (100 to 599).
func statusParam(q map[string][]string, name string) (int, bool, error) {
	v, ok := q[name]
	if !ok {
		return 0, false, nil
	}
	c, err := strconv.Atoi(v[0])
	if err != nil || c < 100 || c > 599 {
		return 0, false, badParam(name)
	}
	return c, true, nil
}

func badParam(name string) *httperr.Error {
	return &httperr.Error{Status: http.StatusBadRequest, Code: "invalid_request", Description: "bad value for " + name + " parameter"}
}
