package server

import (
	"encoding/json"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/keygate/keygate/internal/node"
)

// handle adapts a handler that returns an error: the error is answered by
// httperr (an *httperr.Error as its JSON body, anything else as a 500 that
// reveals nothing), never cached.
func (s *Server) handle(fn func(http.ResponseWriter, *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := fn(w, r); err != nil {
			w.Header().Set("Cache-Control", "no-store")
			s.errs.Write(w, r, err)
		}
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"error":"server_error"}`)
	}
	writeBody(w, status, append(body, '\n'))
}

func writeBody(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body) //nolint:errcheck // the client has gone; nothing to do
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) error {
	w.Header().Set("Cache-Control", "no-store")
	writeBody(w, http.StatusOK, []byte(`{"status":"ok"}`+"\n"))
	return nil
}

// readyz is ready when the node is unsealed, every issuer has keys to
// verify with and an audit sink takes records.
func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) error {
	w.Header().Set("Cache-Control", "no-store")
	if why := s.notReady(); why != nil {
		writeJSON(w, http.StatusServiceUnavailable, why)
		return nil
	}
	writeBody(w, http.StatusOK, []byte(`{"status":"ready"}`+"\n"))
	return nil
}

// notReady says why the node is not ready (readyz's body), or nil when it
// is; grpc.health.v1 on the Envoy listener follows it too.
func (s *Server) notReady() map[string]any {
	if s.node != nil && s.node.Sealed() {
		return map[string]any{"status": "not_ready", "sealed": true,
			"reason": "sealed: tokens cannot be issued until the node is unsealed (POST /v1/sys/unseal)"}
	}
	if missing := s.rt.Load().notReady(); len(missing) > 0 {
		return map[string]any{"status": "not_ready", "issuers_without_keys": missing}
	}
	if s.node != nil {
		if st := s.node.AuditStatus(); st.Enabled && !st.Health.Ready {
			return map[string]any{"status": "not_ready", "audit": "no_sink",
				"reason": "no audit sink takes records: every audited request is answered 503 until one does", "audit_sinks": sinkNames(st.Health)}
		}
		if st, shared := s.node.RevocationStatus(); shared && st.FailClosed {
			reason := "revocation set stale for " + st.Staleness.Round(time.Millisecond).String() + "; every token is refused"
			if st.LastCurrent.IsZero() {
				reason = "revocation set never loaded from Redis; every token is refused"
			}
			if st.LastError != nil {
				reason += ": " + st.LastError.Error()
			}
			return map[string]any{"status": "not_ready", "revocations": "fail_closed", "reason": reason}
		}
	}
	return nil
}

// probeHandler serves the health checks alone, for a probe listener.
func (s *Server) probeHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", s.handle(s.healthz))
	mux.Handle("GET /readyz", s.handle(s.readyz))
	return mux
}

// adminHandler serves the operations endpoints, on their own listener so
// that they are never exposed with the traffic.
func (s *Server) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", s.handle(s.healthz))
	mux.Handle("GET /readyz", s.handle(s.readyz))
	if s.node != nil {
		mux.Handle("GET /v1/sys/seal-status", s.handle(s.getSealStatus))
		mux.Handle("POST /v1/sys/unseal", s.audited("sys.unseal", s.handle(s.unseal)))
		mux.Handle("POST /v1/sys/seal", s.audited("sys.seal", s.handle(s.seal)))
		// Another method is refused, and recorded like any request there.
		mux.Handle("/v1/sys/unseal", s.audited("sys.unseal", methodNotAllowed(http.MethodPost)))
		mux.Handle("/v1/sys/seal", s.audited("sys.seal", methodNotAllowed(http.MethodPost)))
	}
	if s.metrics != nil {
		// OpenMetrics when the scraper asks for it: the one format that
		// carries the latency histograms' exemplars (trace ids).
		var metrics http.Handler = promhttp.HandlerFor(s.metrics.Registry, promhttp.HandlerOpts{EnableOpenMetrics: true})
		if s.scraper.Set() {
			metrics = s.scraper.Require("keygate-metrics", metrics)
		}
		mux.Handle("GET /metrics", metrics)
	}
	if s.admin != nil {
		mux.Handle("/v1/admin/", s.audited("admin.request", s.admin.Handler()))
		mux.Handle("GET /v1/admin/audit", s.audited(node.AuditReadOp, s.operator.Require("keygate-admin", s.handle(s.auditStatus))))
	}
	if s.cfg.Gateway.Pprof {
		s.addPprof(mux)
	}
	return s.checkHost(mux)
}

// fileStamp identifies a version of a file by size and modification time.
func fileStamp(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return "missing"
	}
	return strconv.FormatInt(fi.Size(), 10) + "@" + fi.ModTime().String()
}
