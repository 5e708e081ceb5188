package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/keygate/keygate/internal/store"
)

// The audit log.

// AppendAudit stores entries in one statement, so all or none of them: a
// (Node, Seq) stored already, or twice in entries, is store.ErrConflict.
func (s *Store) AppendAudit(ctx context.Context, entries []store.AuditEntry) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	const op = "append audit"
	nodes, seqs, lines := make([]string, len(entries)), make([]int64, len(entries)), make([][]byte, len(entries))
	for i, e := range entries {
		if err := e.Validate(); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		nodes[i], seqs[i], lines[i] = e.Node, int64(e.Seq), e.Line
	}
	if len(entries) == 0 {
		return nil
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO audit_log (node, seq, line)
		SELECT * FROM unnest($1::text[], $2::bigint[], $3::bytea[])`, nodes, seqs, lines)
	if err != nil {
		return wrap(ctx, op, err)
	}
	return nil
}

// AuditEntries returns up to limit of node's entries from fromSeq on,
// ascending by Seq.
func (s *Store) AuditEntries(ctx context.Context, node string, fromSeq uint64, limit int) ([]store.AuditEntry, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	const op = "audit entries"
	if ok, err := store.CheckAuditRead(node, fromSeq, limit); !ok {
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT seq, line FROM audit_log WHERE node = $1 AND seq >= $2 ORDER BY seq LIMIT $3`,
		node, int64(fromSeq), limit)
	return collect(ctx, op, rows, err, func(r pgx.Rows) (store.AuditEntry, error) {
		e := store.AuditEntry{Node: node}
		var seq int64
		err := r.Scan(&seq, &e.Line)
		e.Seq = uint64(seq)
		return e, err
	})
}

// AuditNodes returns the nodes that have entries, sorted; it steps from
// one node to the next along the primary key instead of reading every
// entry.
func (s *Store) AuditNodes(ctx context.Context) ([]string, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `WITH RECURSIVE n(node) AS (
			SELECT min(node) FROM audit_log
			UNION ALL
			SELECT (SELECT min(node) FROM audit_log WHERE node > n.node) FROM n WHERE n.node IS NOT NULL)
		SELECT node FROM n WHERE node IS NOT NULL ORDER BY node`)
	return collect(ctx, "audit nodes", rows, err, scanString)
}
