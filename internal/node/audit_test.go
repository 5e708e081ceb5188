package node

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keygate/keygate/internal/audit"
	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/rootkey"
	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/store/sqlite"
)

const testPassphrase = "correct horse battery staple"

func openTest(t *testing.T, cfg Config) *Node {
	t.Helper()
	if cfg.Issuer == "" {
		cfg.Issuer, cfg.Audience = "https://keygate.test", "api"
	}
	n, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func writeRecord(t *testing.T, n *Node, i int) {
	t.Helper()
	r := audit.Record{RequestID: "r" + string(rune('a'+i)), Operation: "oauth2.token", Result: audit.ResultOK, Status: 200,
		Remote: netip.MustParseAddr("10.0.0.1")}
	if d, ok := n.Auditor().Log().Sum("jti"); ok {
		r.Hashed = map[string]audit.Digest{"jti": d}
	}
	if err := n.Auditor().Log().Write(t.Context(), r); err != nil {
		t.Fatal(err)
	}
}

// A node keeps its id in the data directory (0600) and uses it again; the
// configuration's audit.node wins over it.
func TestAuditNodeID(t *testing.T) {
	dir := t.TempDir()
	n := openTest(t, Config{DataDir: dir})
	id := n.AuditStatus().Node
	n.Close()
	fi, err := os.Stat(filepath.Join(dir, NodeIDFile))
	if err != nil || fi.Mode().Perm() != 0o600 || !strings.HasPrefix(id, "kgn_") {
		t.Fatalf("node.id: %v %v, id %q", fi, err, id)
	}
	n = openTest(t, Config{DataDir: dir})
	if got := n.AuditStatus().Node; got != id {
		t.Errorf("restart: node %q, want %q", got, id)
	}
	n.Close()
	n = openTest(t, Config{DataDir: t.TempDir(), Audit: config.Audit{Node: "node-a"}})
	if got := n.AuditStatus().Node; got != "node-a" {
		t.Errorf("audit.node: %q", got)
	}
	n.Close()
	n = openTest(t, Config{DataDir: t.TempDir(), Audit: config.Audit{Disabled: true}})
	if n.Auditor() != nil || n.AuditStatus().Enabled {
		t.Error("audit.disabled: the log is on")
	}
	n.Close()
}

// A node with a keyring.json starts sealed: it writes and chains records
// with no hashed values, checks the chain it continues with the public key
// it kept while unsealed, and its first checkpoint after the unseal signs
// them. Seal forgets the keys again. Without the kept public key, a sealed
// start refuses to continue a signed chain, and says why.
func TestAuditSealed(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: sealed starts and unseals, each an Argon2id derivation; run without -short")
	}
	dir := t.TempDir()
	root, err := rootkey.InitPassphrase(filepath.Join(dir, KeyringFile), []byte(testPassphrase), nil)
	if err != nil {
		t.Fatal(err)
	}
	root.Destroy()

	// The first start: sealed, a new chain, no key kept yet.
	n := openTest(t, Config{DataDir: dir})
	if !n.Sealed() || n.AuditStatus().Key != nil {
		t.Fatalf("first start: sealed %v, status %+v", n.Sealed(), n.AuditStatus())
	}
	writeRecord(t, n, 0) // no hashed value: no HMAC key
	if err := n.Unseal(t.Context(), []byte(testPassphrase)); err != nil {
		t.Fatal(err)
	}
	st := n.AuditStatus()
	if !st.Signing || st.Key == nil {
		t.Fatalf("unsealed status %+v", st)
	}
	pub := st.Key
	writeRecord(t, n, 1)
	n.Close()
	kept, err := readAuditKey(filepath.Join(dir, AuditKeyFile))
	if err != nil || !kept.Equal(pub) {
		t.Fatalf("audit.pub: %v", err)
	}

	// Sealed again: the chain's checkpoints are checked with the kept key.
	n = openTest(t, Config{DataDir: dir})
	if !n.Sealed() {
		t.Fatal("not sealed")
	}
	if st := n.AuditStatus(); st.Signing || !bytes.Equal(st.Key, pub) {
		t.Errorf("sealed status %+v: want the kept key, not signing", st)
	}
	writeRecord(t, n, 2)
	if err := n.Unseal(t.Context(), []byte(testPassphrase)); err != nil {
		t.Fatal(err)
	}
	writeRecord(t, n, 3)
	n.Seal()
	if _, ok := n.Auditor().Log().Sum("x"); ok || n.AuditStatus().Signing {
		t.Error("the audit keys outlived the seal")
	}
	writeRecord(t, n, 4)
	if err := n.Unseal(t.Context(), []byte(testPassphrase)); err != nil {
		t.Fatal(err)
	}
	files, _ := n.AuditFiles()
	n.Close()
	sum, err := audit.Verify(audit.VerifyOptions{Keys: []ed25519.PublicKey{pub}}, files...)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if sum.Records != 5 || sum.Restarts != 1 {
		t.Errorf("summary %+v", sum)
	}
	var hashed, plain int
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
			e, err := audit.ParseLine(line)
			if err != nil || e.Type != audit.TypeRecord {
				continue
			}
			if len(e.Record.Hashed) > 0 {
				hashed++
			} else {
				plain++
			}
		}
	}
	if hashed != 2 || plain != 3 {
		t.Errorf("%d records with hashed values, %d without; want 2 and 3 (those written sealed)", hashed, plain)
	}

	// Sealed, without the kept key: the chain's checkpoints cannot be
	// checked, so it continues in a new segment, the old files as they are.
	if err := os.Remove(filepath.Join(dir, AuditKeyFile)); err != nil {
		t.Fatal(err)
	}
	n = openTest(t, Config{DataDir: dir})
	writeRecord(t, n, 5)
	if err := n.Unseal(t.Context(), []byte(testPassphrase)); err != nil {
		t.Fatal(err)
	}
	newFiles, _ := n.AuditFiles()
	n.Close()
	if len(newFiles) != len(files)+1 {
		t.Fatalf("files %v after %v: want one more, a new segment", newFiles, files)
	}
	if sum, err := audit.Verify(audit.VerifyOptions{Keys: []ed25519.PublicKey{pub}}, newFiles[len(newFiles)-1]); err != nil || sum.Segments != 1 {
		t.Errorf("the new segment: %+v %v", sum, err)
	}
	if _, err := audit.Verify(audit.VerifyOptions{Keys: []ed25519.PublicKey{pub}}, files...); err != nil {
		t.Errorf("the old files changed: %v", err)
	}
}

// A line torn by a crash ends the file it is in; the node starts, and its
// chain goes on in a new segment.
func TestAuditTornTail(t *testing.T) {
	dir := t.TempDir()
	n := openTest(t, Config{DataDir: dir})
	pub := n.AuditStatus().Key
	writeRecord(t, n, 0)
	files, _ := n.AuditFiles()
	n.Close()
	f, err := os.OpenFile(files[len(files)-1], os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"v":1,"node":"`)
	f.Close()
	n = openTest(t, Config{DataDir: dir})
	writeRecord(t, n, 1)
	after, _ := n.AuditFiles()
	n.Close()
	if len(after) != len(files)+1 {
		t.Fatalf("files %v: want a new segment's file", after)
	}
	if _, err := audit.Verify(audit.VerifyOptions{Keys: []ed25519.PublicKey{pub}}, files...); !errors.Is(err, audit.ErrTampered) {
		t.Errorf("the torn file verifies: %v", err)
	}
	if sum, err := audit.Verify(audit.VerifyOptions{Keys: []ed25519.PublicKey{pub}}, after[len(after)-1]); err != nil || sum.Segments != 1 {
		t.Errorf("the new segment: %+v %v", sum, err)
	}
}

// With the store as the only sink, a restart continues the chain from the
// store's last line; lines of the node's id already in the store, written
// by another node, stop the start with an error that says so.
func TestAuditStoreSink(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{DataDir: dir, Audit: config.Audit{Node: "node-s", Store: true, File: config.AuditFile{Disabled: true}}}
	var pub ed25519.PublicKey
	for i := range 2 {
		n := openTest(t, cfg)
		pub = n.AuditStatus().Key
		writeRecord(t, n, i)
		n.Close()
	}
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, StoreFile))
	if err != nil {
		t.Fatal(err)
	}
	es, err := st.AuditEntries(t.Context(), "node-s", 1, 100)
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	v, _ := audit.NewVerifier(audit.VerifyOptions{Keys: []ed25519.PublicKey{pub}, Node: "node-s"})
	var all []byte
	for i, e := range es {
		if e.Seq != uint64(i+1) {
			t.Fatalf("store seqs %d at %d", e.Seq, i)
		}
		all = append(append(all, e.Line...), '\n')
	}
	if err := v.File("store", bytes.NewReader(all)); err != nil {
		t.Fatalf("the store's chain: %v", err)
	}
	if sum, err := v.Finish(); err != nil || sum.Restarts != 1 || sum.Records != 2 {
		t.Errorf("store chain summary %+v %v", sum, err)
	}

	// Another node's lines under the same id, with the file sink on: its
	// open line's seq is taken.
	other := t.TempDir()
	st, err = sqlite.Open(t.Context(), filepath.Join(other, StoreFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.AppendAudit(t.Context(), []store.AuditEntry{{Node: "node-d", Seq: 1, Line: []byte("{}")}}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	_, err = Open(context.Background(), Config{DataDir: other, Issuer: "https://keygate.test", Audience: "api",
		Audit: config.Audit{Node: "node-d", Store: true}})
	if !errors.Is(err, errDuplicateNode) || !strings.Contains(err.Error(), "audit.node") {
		t.Errorf("a second writer of the chain: %v", err)
	}
}

// fakeAuditEntries is a store's AuditEntries and nothing else, over
// entries ascending by Seq.
type fakeAuditEntries struct {
	entries []store.AuditEntry
	err     error
}

func (f fakeAuditEntries) AuditEntries(_ context.Context, node string, fromSeq uint64, limit int) ([]store.AuditEntry, error) {
	if f.err != nil {
		return nil, f.err
	}
	var out []store.AuditEntry
	for _, e := range f.entries {
		if e.Node == node && e.Seq >= fromSeq && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil
}

// auditLines returns the lines a sealed audit log of node writes for n
// records, by seq: real lines, as the store sink stores them.
func auditLines(t *testing.T, node string, n int) map[uint64][]byte {
	t.Helper()
	var buf bytes.Buffer
	l, err := audit.New(audit.Config{Node: node, Sealed: true, Sinks: []audit.Sink{audit.NewWriterSink("mem", &buf)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		r := audit.Record{RequestID: fmt.Sprintf("r%d", i), Operation: "oauth2.token", Result: audit.ResultOK, Status: 200,
			Remote: netip.MustParseAddr("10.0.0.1")}
		if err := l.Write(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	lines := map[uint64][]byte{}
	for line := range bytes.Lines(buf.Bytes()) {
		line = bytes.TrimSuffix(line, []byte("\n"))
		e, err := audit.ParseLine(line)
		if err != nil {
			t.Fatal(err)
		}
		lines[e.Seq] = line
	}
	return lines
}

// lastAuditLine finds the last line of a node's chain however the seqs
// the store holds are spread, and only that node's.
func TestLastAuditLine(t *testing.T) {
	lines := auditLines(t, "n1", 70)
	entries := func(node string, seqs ...uint64) []store.AuditEntry {
		es := make([]store.AuditEntry, len(seqs))
		for i, s := range seqs {
			if lines[s] == nil {
				t.Fatalf("no line %d", s)
			}
			es[i] = store.AuditEntry{Node: node, Seq: s, Line: lines[s]}
		}
		return es
	}
	span := func(from, to uint64) (seqs []uint64) {
		for s := from; s <= to; s++ {
			seqs = append(seqs, s)
		}
		return seqs
	}
	errDown := errors.New("store down")
	for _, tc := range []struct {
		name    string
		st      fakeAuditEntries
		want    uint64 // 0: no anchor
		wantErr error
	}{
		{"none", fakeAuditEntries{}, 0, nil},
		{"one", fakeAuditEntries{entries: entries("n1", 1)}, 1, nil},
		{"contiguous", fakeAuditEntries{entries: entries("n1", span(1, 70)...)}, 70, nil},
		{"a power of two past the first", fakeAuditEntries{entries: entries("n1", span(1, 65)...)}, 65, nil},
		{"gaps", fakeAuditEntries{entries: entries("n1", 1, 2, 3, 17, 40, 41)}, 41, nil},
		{"trimmed head", fakeAuditEntries{entries: entries("n1", span(5, 20)...)}, 20, nil},
		{"another node's later lines", fakeAuditEntries{entries: append(entries("n1", span(1, 9)...), entries("n2", span(10, 30)...)...)}, 9, nil},
		{"store error", fakeAuditEntries{entries: entries("n1", 1), err: errDown}, 0, errDown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := lastAuditLine(t.Context(), tc.st, "n1")
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if tc.want == 0 {
				if a != nil {
					t.Fatalf("anchor %+v, want none", a)
				}
				return
			}
			e, _ := audit.ParseLine(lines[tc.want])
			if a == nil || a.Seq != tc.want || a.Hash != e.Hash {
				t.Fatalf("anchor %+v, want seq %d hash %s", a, tc.want, e.Hash)
			}
		})
	}
}
