package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/keygate/keygate/internal/store"
)

// The audit log.

const insertAudit = `INSERT INTO audit_log (node, seq, line) VALUES (?, ?, ?)`

// AppendAudit stores entries in one transaction, or none of them: a
// (Node, Seq) stored already, or twice in entries, is store.ErrConflict.
func (s *Store) AppendAudit(ctx context.Context, entries []store.AuditEntry) error {
	const op = "append audit"
	for _, e := range entries {
		if err := e.Validate(); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
	}
	if len(entries) == 0 {
		return nil
	}
	return s.inTx(ctx, op, func(tx *sql.Tx) error {
		st := tx.StmtContext(ctx, s.appendAudit)
		for _, e := range entries {
			if _, err := st.ExecContext(ctx, e.Node, int64(e.Seq), e.Line); err != nil {
				return wrap(ctx, fmt.Sprintf("%s: node %q seq %d", op, e.Node, e.Seq), err)
			}
		}
		return nil
	})
}

// AuditEntries returns up to limit of node's entries from fromSeq on,
// ascending by Seq.
func (s *Store) AuditEntries(ctx context.Context, node string, fromSeq uint64, limit int) ([]store.AuditEntry, error) {
	const op = "audit entries"
	if ok, err := store.CheckAuditRead(node, fromSeq, limit); !ok {
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		return nil, nil
	}
	rows, err := s.r.QueryContext(ctx, `SELECT seq, line FROM audit_log WHERE node = ? AND seq >= ? ORDER BY seq LIMIT ?`,
		node, int64(fromSeq), limit)
	return collect(ctx, op, rows, err, func(row scanner) (store.AuditEntry, error) {
		e := store.AuditEntry{Node: node}
		var seq int64
		err := row.Scan(&seq, &e.Line)
		e.Seq = uint64(seq)
		return e, err
	})
}

// AuditNodes returns the nodes that have entries, sorted; it steps from
// one node to the next along the primary key instead of reading every
// entry.
func (s *Store) AuditNodes(ctx context.Context) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, auditNodes)
	return collect(ctx, "audit nodes", rows, err, scanString)
}

// auditNodes walks the index of audit_log's primary key from node to node.
const auditNodes = `WITH RECURSIVE n(node) AS (
		SELECT min(node) FROM audit_log
		UNION ALL
		SELECT (SELECT min(node) FROM audit_log WHERE node > n.node) FROM n WHERE n.node IS NOT NULL)
	SELECT node FROM n WHERE node IS NOT NULL ORDER BY node`
