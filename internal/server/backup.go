package server

import (
	"bytes"
	"net/http"
	"strconv"

	"github.com/keygate/keygate/internal/audit/httpaudit"
)

// backupOp is the audit operation of a backup (GET /v1/admin/backup).
const backupOp = "admin.backup"

// SnapshotContentType is the media type of a snapshot the admin API
// answers with.
const SnapshotContentType = "application/x-keygate-snapshot"

// backup is GET /v1/admin/backup (admin token): a snapshot of the node's
// store (package snapshot), taken in one read transaction while the node
// serves. The snapshot is complete before the answer begins, so that an
// error is answered as one rather than as a cut-off body; and the answer,
// like every audited one, is sent only once its record is written.
func (s *Server) backup(w http.ResponseWriter, r *http.Request) error {
	httpaudit.From(w).Admin()
	var buf bytes.Buffer
	if err := s.node.Snapshot(r.Context(), &buf); err != nil {
		return err
	}
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Type", SnapshotContentType)
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	h.Set("Content-Disposition", `attachment; filename="keygate.snapshot"`)
	w.WriteHeader(http.StatusOK)
	buf.WriteTo(w) //nolint:errcheck // the client has gone; its record says what it was sent
	return nil
}
