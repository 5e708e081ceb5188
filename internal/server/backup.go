package server

import (
	"fmt"
	"net/http"
	"time"

	"github.com/keygate/keygate/internal/audit/httpaudit"
)

// backupOp is the audit operation of a backup (GET /v1/admin/backup).
const backupOp = "admin.backup"

// SnapshotContentType is the media type of a snapshot the admin API
// answers with.
const SnapshotContentType = "application/x-keygate-snapshot"

// backup is GET /v1/admin/backup (admin token): a snapshot of the node's
// store (package snapshot), read in one transaction while the node serves
// and sent as it is read, so that a store of any size passes through
// without being held. Its pending record is written before the first byte
// (httpaudit.Stream) and its final one when it ends. A snapshot that
// fails midway leaves the client a file without its trailer, which
// snapshot.Read refuses.
func (s *Server) backup(w http.ResponseWriter, r *http.Request) error {
	httpaudit.From(w).Admin()
	if err := httpaudit.Stream(r.Context(), w); err != nil {
		return err
	}
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Type", SnapshotContentType)
	h.Set("Content-Disposition", `attachment; filename="keygate.snapshot"`)
	w.WriteHeader(http.StatusOK)
	return s.node.Snapshot(r.Context(), &idleWriter{w: w, rc: http.NewResponseController(w), idle: BackupIdle})
}

// BackupIdle is how long a backup's client may stop reading before the
// backup is abandoned: while it reads, a snapshot of any size passes, past
// the listener's WriteTimeout; once it stops, the store's read
// transaction is not held open for it.
var BackupIdle = 30 * time.Second

// idleWriter moves the connection's write deadline idle ahead of each
// write.
type idleWriter struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	idle time.Duration
}

func (d *idleWriter) Write(p []byte) (int, error) {
	if err := d.rc.SetWriteDeadline(time.Now().Add(d.idle)); err != nil {
		return 0, fmt.Errorf("backup: extending the write deadline: %w", err)
	}
	return d.w.Write(p)
}
