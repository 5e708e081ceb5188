package server

import (
	"encoding/json"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/keygate/keygate/internal/audit"
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
// verify with, an audit sink takes records and has disk space to, and a
// fleet's revocation set is current. Not ready, it answers 503 with the
// reasons as stable codes (notReady), and on the admin listener
// (detailed) what each is about: paths, addresses and error texts, which
// the probe listener, the one opened to load balancers and kubelets,
// never tells.
func (s *Server) readyz(detailed bool) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, _ *http.Request) error {
		w.Header().Set("Cache-Control", "no-store")
		why := s.notReady()
		if len(why) == 0 {
			writeBody(w, http.StatusOK, []byte(`{"status":"ready"}`+"\n"))
			return nil
		}
		codes := make([]string, len(why))
		details := make(map[string]any, len(why))
		for i, r := range why {
			codes[i], details[r.code] = r.code, r.detail
		}
		out := map[string]any{"status": "not_ready", "reasons": codes}
		if detailed {
			out["details"] = details
		}
		writeJSON(w, http.StatusServiceUnavailable, out)
		return nil
	}
}

// Reasons a node is not ready, as /readyz names them.
const (
	ReasonSealed           = "sealed"              // the root key is not loaded
	ReasonIssuerKeys       = "issuer_keys_missing" // a trusted issuer has no keys yet
	ReasonAuditSinkFailing = "audit_sink_failing"  // no audit sink takes records
	ReasonAuditDiskLow     = "audit_disk_low"      // the audit file sink's disk is nearly full
	ReasonRedisUnreachable = "redis_unreachable"   // the fleet's revocation set is stale: every token is refused
)

// notReadyReason is one reason a node is not ready: a stable code, and
// what it is about, for the admin listener alone.
type notReadyReason struct {
	code   string
	detail map[string]any
}

// notReady says why the node is not ready, or nothing when it is;
// grpc.health.v1 on the Envoy listener follows it too.
func (s *Server) notReady() []notReadyReason {
	var why []notReadyReason
	if s.node != nil && s.node.Sealed() {
		why = append(why, notReadyReason{ReasonSealed, map[string]any{
			"reason": "tokens cannot be issued until the node is unsealed (POST /v1/sys/unseal)"}})
	}
	if missing := s.rt.Load().notReady(); len(missing) > 0 {
		why = append(why, notReadyReason{ReasonIssuerKeys, map[string]any{"issuers": missing}})
	}
	if s.node == nil {
		return why
	}
	if st := s.node.AuditStatus(); st.Enabled {
		if !st.Health.Ready {
			why = append(why, notReadyReason{ReasonAuditSinkFailing, map[string]any{
				"reason": "no audit sink takes records: every audited request is answered 503 until one does", "sinks": sinkStates(st.Health)}})
		}
		if d := st.Disk; d != nil && d.Low {
			why = append(why, notReadyReason{ReasonAuditDiskLow, map[string]any{
				"reason": "the audit directory's filesystem is nearly full: when it is, every audited request is answered 503",
				"dir":    st.Dir, "free_bytes": d.Free, "min_free_bytes": d.MinFree, "total_bytes": d.Total}})
		}
	}
	if st, shared := s.node.RevocationStatus(); shared && st.FailClosed {
		reason := "revocation set stale for " + st.Staleness.Round(time.Millisecond).String() + "; every token is refused"
		if st.LastCurrent.IsZero() {
			reason = "revocation set never loaded from Redis; every token is refused"
		}
		d := map[string]any{"reason": reason}
		if st.LastError != nil {
			d["error"] = st.LastError.Error()
		}
		why = append(why, notReadyReason{ReasonRedisUnreachable, d})
	}
	return why
}

// probeHandler serves the health checks alone, for a probe listener.
func (s *Server) probeHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", s.handle(s.healthz))
	mux.Handle("GET /readyz", s.handle(s.readyz(false)))
	return mux
}

// adminHandler serves the operations endpoints, on their own listener so
// that they are never exposed with the traffic.
func (s *Server) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", s.handle(s.healthz))
	mux.Handle("GET /readyz", s.handle(s.readyz(true)))
	if s.node != nil {
		mux.Handle("GET /v1/sys/seal-status", s.handle(s.getSealStatus))
		mux.Handle("POST /v1/sys/unseal", s.audited("sys.unseal", s.handle(s.unseal)))
		mux.Handle("POST /v1/sys/seal", s.audited("sys.seal", s.handle(s.seal)))
		// Another method is refused, and recorded like any request there.
		mux.Handle("/v1/sys/unseal", s.audited("sys.unseal", methodNotAllowed(http.MethodPost)))
		mux.Handle("/v1/sys/seal", s.audited("sys.seal", methodNotAllowed(http.MethodPost)))
		mux.Handle("POST /v1/sys/rekey", s.audited("sys.rekey", s.handle(s.startRekey)))
		mux.Handle("GET /v1/sys/rekey", s.handle(s.getRekey))
	}
	if s.obs.metrics != nil {
		// OpenMetrics when the scraper asks for it: the one format that
		// carries the latency histograms' exemplars (trace ids).
		var metrics http.Handler = promhttp.HandlerFor(s.obs.metrics.Registry, promhttp.HandlerOpts{EnableOpenMetrics: true})
		if s.guards.scraper.Set() {
			metrics = s.guards.scraper.Require("keygate-metrics", metrics)
		}
		mux.Handle("GET /metrics", metrics)
	}
	if s.tokens.admin != nil {
		mux.Handle("/v1/admin/", s.audited("admin.request", s.tokens.admin.Handler()))
		mux.Handle("GET /v1/admin/audit", s.audited(node.AuditReadOp, s.guards.operator.Require("keygate-admin", s.handle(s.auditStatus))))
		mux.Handle("GET /v1/admin/backup", s.audited(backupOp, s.guards.operator.Require("keygate-admin", s.handle(s.backup))))
		if s.node != nil {
			for _, e := range []struct {
				method, path string
				op           audit.Operation
				h            func(http.ResponseWriter, *http.Request) error
			}{
				{http.MethodPost, "/v1/admin/tenants/{name}/data-key/rotate", dataKeyRotateOp, s.rotateDataKey},
				{http.MethodGet, "/v1/admin/tenants/{name}/data-key", dataKeyReadOp, s.getDataKey},
			} {
				guard := func(h http.Handler) http.Handler {
					return s.audited(e.op, s.guards.operator.Require("keygate-admin", h))
				}
				mux.Handle(e.method+" "+e.path, guard(s.handle(e.h)))
				mux.Handle(e.path, guard(methodNotAllowed(e.method))) // another method, a lowercase one included
			}
		}
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
