package server

import (
	"errors"
	"net/http"

	"github.com/keygate/keygate/internal/audit"
	"github.com/keygate/keygate/internal/audit/httpaudit"
	"github.com/keygate/keygate/internal/httperr"
	"github.com/keygate/keygate/jose"
)

// Auditing: every request to the token endpoints, the admin API, transit
// and the seal and unseal endpoints goes through the node's httpaudit.Auditor,
// which answers it only once its record is written (503 when it cannot
// be). Forward-auth, the key and discovery documents, the health checks
// and the metrics are not audited: a verification changes nothing of
// keygate's state and its volume is the gateway's, and the rest are
// public or operational reads.

// audited wraps h with the node's Auditor as op; unwrapped when the audit
// log is off.
func (s *Server) audited(op audit.Operation, h http.Handler) http.Handler {
	return s.auditedAs(op, s.errs, h)
}

// auditedAs is audited for an API whose errors take another envelope
// (transit's is Vault's).
func (s *Server) auditedAs(op audit.Operation, errs httperr.Writer, h http.Handler) http.Handler {
	if s.node == nil || s.node.Auditor() == nil {
		return h
	}
	return s.node.Auditor().Handler(op, errs, h)
}

// auditStatus is GET /v1/admin/audit (admin token): the audit log's node
// id, the public key its checkpoints verify with (PEM, as keygate audit
// verify --key takes it), whether the node signs now, the sinks' health,
// the file sink's disk space and the last checkpoint, an anchor to verify
// the files against. An unsealed node first signs every line written so
// far, so that anchor is the end of the log as this request found it; the
// request's own record is signed before the answer too (node.AuditReadOp).
func (s *Server) auditStatus(w http.ResponseWriter, r *http.Request) error {
	httpaudit.From(w).Admin()
	w.Header().Set("Cache-Control", "no-store")
	if s.node.AuditStatus().Enabled {
		if _, err := s.node.AuditCheckpoint(r.Context()); err != nil && !errors.Is(err, audit.ErrNoSigner) {
			return httpaudit.ErrUnavailable
		}
	}
	st := s.node.AuditStatus()
	out := map[string]any{"enabled": st.Enabled}
	if !st.Enabled {
		writeJSON(w, http.StatusOK, out)
		return nil
	}
	out["node"], out["signing"], out["ready"] = st.Node, st.Signing, st.Health.Ready
	if st.Dir != "" {
		out["dir"] = st.Dir
	}
	if st.Key != nil {
		pemBytes, err := jose.MarshalPublicPEM(st.Key)
		if err != nil {
			return err
		}
		out["public_key"], out["key_id"] = string(pemBytes), audit.KeyID(st.Key)
	}
	out["sinks"] = sinkStates(st.Health)
	if d := st.Disk; d != nil {
		out["disk"] = map[string]any{"free_bytes": d.Free, "total_bytes": d.Total, "min_free_bytes": d.MinFree, "low": d.Low}
	}
	if st.HasCheckpoint {
		out["last_checkpoint"] = map[string]any{"seq": st.LastCheckpoint.Seq, "hash": st.LastCheckpoint.Hash.String()}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// sinkStates lists the audit sinks and why each fails (which can name
// files and hosts), for the admin API and the admin listener's /readyz.
func sinkStates(h audit.Health) []map[string]any {
	out := make([]map[string]any, 0, len(h.Sinks))
	for _, sh := range h.Sinks {
		m := map[string]any{"name": sh.Name, "ok": sh.OK, "disabled": sh.Disabled, "failures": sh.Failures, "backlog": sh.Backlog}
		if sh.Err != nil {
			m["error"] = sh.Err.Error()
		}
		out = append(out, m)
	}
	return out
}
