package storetest

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/keygate/keygate/internal/store"
)

// auditEntry is entry seq of node: a record of about 250 bytes that names
// both.
func auditEntry(node string, seq uint64) store.AuditEntry {
	return store.AuditEntry{Node: node, Seq: seq, Line: fmt.Appendf(nil,
		`{"node":%q,"seq":%d,"time":"2026-03-14T15:09:26.535897Z","type":"transit.encrypt","tenant":"default",`+
			`"key":"orders","actor":"client:kgc_3q2x7","status":200,"prev":"sha256:%064x"}`, node, seq, seq)}
}

// auditEntries are entries from..to of node.
func auditEntries(node string, from, to uint64) []store.AuditEntry {
	var es []store.AuditEntry
	for seq := from; seq <= to; seq++ {
		es = append(es, auditEntry(node, seq))
	}
	return es
}

// sameAudit checks all of node's entries.
func sameAudit(t *testing.T, s store.Store, what, node string, want []store.AuditEntry) {
	t.Helper()
	got, err := s.AuditEntries(t.Context(), node, 0, math.MaxInt32)
	must(t, what+": AuditEntries("+node+")", err)
	same(t, what+": entries of "+node, got, want)
}

func testAuditAppend(t *testing.T, s store.Store) {
	ctx := t.Context()
	nodes, err := s.AuditNodes(ctx)
	must(t, "AuditNodes(empty)", err)
	es, err := s.AuditEntries(ctx, "node-a", 0, 10)
	must(t, "AuditEntries(empty)", err)
	if len(nodes)+len(es) != 0 {
		t.Fatalf("an empty store has audit nodes %v and entries %v", nodes, es)
	}
	must(t, "AppendAudit(nothing)", s.AppendAudit(ctx, nil))

	a := auditEntries("node-a", 1, 3)
	b := auditEntries("node-b", 1, 2)
	must(t, "AppendAudit(a)", s.AppendAudit(ctx, a))
	must(t, "AppendAudit(b, one entry of c)", s.AppendAudit(ctx, append(b, auditEntry("node-c", 7))))
	must(t, "AppendAudit(more of a)", s.AppendAudit(ctx, auditEntries("node-a", 4, 5)))
	a = auditEntries("node-a", 1, 5)
	sameAudit(t, s, "after three batches", "node-a", a)
	sameAudit(t, s, "after three batches", "node-b", b)
	sameAudit(t, s, "after three batches", "node-c", []store.AuditEntry{auditEntry("node-c", 7)})

	for _, c := range []struct {
		from  uint64
		limit int
		want  []store.AuditEntry
	}{
		{0, 2, a[:2]},
		{3, 10, a[2:]},
		{2, 1, a[1:2]},
		{5, 1, a[4:]},
		{6, 10, nil},
		{math.MaxInt64, 10, nil},
		{math.MaxInt64 + 1, 10, nil},
		{math.MaxUint64, 10, nil},
	} {
		got, err := s.AuditEntries(ctx, "node-a", c.from, c.limit)
		must(t, "AuditEntries", err)
		same(t, fmt.Sprintf("AuditEntries(node-a, from %d, limit %d)", c.from, c.limit), got, c.want)
	}
	nodes, err = s.AuditNodes(ctx)
	must(t, "AuditNodes", err)
	same(t, "AuditNodes", nodes, []string{"node-a", "node-b", "node-c"})
	es, err = s.AuditEntries(ctx, "node-d", 0, 10)
	must(t, "AuditEntries(node-d)", err)
	if len(es) != 0 {
		t.Errorf("AuditEntries(node-d) = %v", es)
	}
}

// testAuditOrder: entries come back by Seq, whatever the order they were
// appended in, up to the largest Seq a store keeps.
func testAuditOrder(t *testing.T, s store.Store) {
	ctx := t.Context()
	in := []store.AuditEntry{auditEntry("n", 5), auditEntry("n", math.MaxInt64), auditEntry("n", 0), auditEntry("n", 3)}
	must(t, "AppendAudit", s.AppendAudit(ctx, in[:2]))
	must(t, "AppendAudit", s.AppendAudit(ctx, in[2:]))
	sameAudit(t, s, "out of order", "n", []store.AuditEntry{in[2], in[3], in[0], in[1]})
}

// testAuditConflict: a batch with an entry stored already, or with one
// entry twice, is ErrConflict and writes nothing.
func testAuditConflict(t *testing.T, s store.Store) {
	ctx := t.Context()
	stored := auditEntries("node-a", 1, 3)
	must(t, "AppendAudit", s.AppendAudit(ctx, stored))
	replaced := auditEntry("node-a", 2)
	replaced.Line = []byte(`{"forged":true}`)
	for _, c := range []struct {
		name  string
		batch []store.AuditEntry
	}{
		{"one entry stored already, last", append(auditEntries("node-a", 4, 6), replaced)},
		{"one entry stored already, first", append([]store.AuditEntry{replaced}, auditEntries("node-b", 1, 3)...)},
		{"one entry twice", append(auditEntries("node-b", 1, 3), auditEntry("node-b", 2))},
	} {
		wantErr(t, "AppendAudit("+c.name+")", s.AppendAudit(ctx, c.batch), store.ErrConflict)
	}
	sameAudit(t, s, "after refused batches", "node-a", stored)
	sameAudit(t, s, "after refused batches", "node-b", nil)
	nodes, err := s.AuditNodes(ctx)
	must(t, "AuditNodes", err)
	same(t, "AuditNodes after refused batches", nodes, []string{"node-a"})
	// The same Seq of another node is another entry.
	must(t, "AppendAudit(node-b)", s.AppendAudit(ctx, auditEntries("node-b", 1, 3)))
}

// testAuditConcurrent: of 20 nodes appending the same batch at once,
// exactly one does; batches that do not overlap all go in.
func testAuditConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	batch := auditEntries("node-a", 1, 10)
	oneWinner(t, race(20, func(int) error { return s.AppendAudit(ctx, batch) }), store.ErrConflict)
	sameAudit(t, s, "after the race", "node-a", batch)
	for _, err := range race(8, func(i int) error {
		return s.AppendAudit(ctx, auditEntries("node-b", uint64(10*i), uint64(10*i+9)))
	}) {
		must(t, "AppendAudit(node-b, in parallel)", err)
	}
	sameAudit(t, s, "after parallel batches", "node-b", auditEntries("node-b", 0, 79))
}

func testAuditInvalid(t *testing.T, s store.Store) {
	ctx := t.Context()
	empty := auditEntry("n", 2)
	empty.Line = nil
	for name, e := range map[string]store.AuditEntry{
		"no node":      auditEntry("", 1),
		"seq too big":  auditEntry("n", math.MaxInt64+1),
		"largest seq":  auditEntry("n", math.MaxUint64),
		"empty record": empty,
	} {
		wantErr(t, "AppendAudit("+name+")", s.AppendAudit(ctx, []store.AuditEntry{auditEntry("n", 1), e}), store.ErrInvalid)
	}
	for _, c := range []struct {
		node  string
		limit int
	}{{"n", 0}, {"n", -1}, {"", 10}} {
		_, err := s.AuditEntries(ctx, c.node, 0, c.limit)
		wantErr(t, fmt.Sprintf("AuditEntries(%q, limit %d)", c.node, c.limit), err, store.ErrInvalid)
	}
	nodes, err := s.AuditNodes(ctx)
	must(t, "AuditNodes", err)
	if len(nodes) != 0 {
		t.Errorf("invalid batches were written: nodes %v", nodes)
	}
}

// auditCalls are the audit calls, for the test of cancellation.
func auditCalls(ctx context.Context, s store.Store) []call {
	return []call{
		{"AppendAudit", func() error { return s.AppendAudit(ctx, auditEntries("n", 1, 2)) }},
		{"AuditEntries", func() error { _, err := s.AuditEntries(ctx, "n", 0, 10); return err }},
		{"AuditNodes", func() error { _, err := s.AuditNodes(ctx); return err }},
	}
}
