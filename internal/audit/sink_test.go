package audit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// storeEntry is a store's own entry type, as store.AuditEntry will be.
type storeEntry struct {
	Node string
	Seq  int64
	Line string
}

// fakeStore appends entries, refusing a (node, seq) it holds.
type fakeStore struct {
	mu      sync.Mutex
	entries []storeEntry
	seen    map[string]bool
	fail    error
}

func (s *fakeStore) AppendAudit(_ context.Context, entries []storeEntry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	if s.seen == nil {
		s.seen = map[string]bool{}
	}
	for _, e := range entries {
		if k := fmt.Sprint(e.Node, e.Seq); s.seen[k] {
			return fmt.Errorf("duplicate (%s, %d)", e.Node, e.Seq)
		}
	}
	for _, e := range entries {
		s.seen[fmt.Sprint(e.Node, e.Seq)] = true
		s.entries = append(s.entries, e)
	}
	return nil
}

func (s *fakeStore) lines() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b bytes.Buffer
	for _, e := range s.entries {
		b.WriteString(e.Line + "\n")
	}
	return b.Bytes()
}

func newStoreSink(st *fakeStore) *StoreSink[storeEntry] {
	return NewStoreSink("store", "n1", st, func(node string, seq uint64, line []byte) storeEntry {
		return storeEntry{Node: node, Seq: int64(seq), Line: string(line)}
	})
}

func TestStoreSink(t *testing.T) {
	st := &fakeStore{}
	l, _ := newLog(t, nil, newStoreSink(st))
	writeN(t, l, 0, 7)
	closeLog(t, l)
	if len(st.entries) != 10 {
		t.Fatalf("%d entries, want 10", len(st.entries))
	}
	for i, e := range st.entries {
		if e.Node != "n1" || e.Seq != int64(i+1) || strings.HasSuffix(e.Line, "\n") || !strings.HasPrefix(e.Line, "{") {
			t.Errorf("entry %d: %+v", i, e)
		}
	}
	if _, err := verifyBytes(VerifyOptions{Keys: keysOf(testSigner(t, 1))}, st.lines()); err != nil {
		t.Error(err)
	}
}

func TestWriterSinkAndFileSinkHoldTheSameChain(t *testing.T) {
	var out bytes.Buffer
	dir := t.TempDir()
	l, _ := newLog(t, nil, NewWriterSink("stdout", &out), fileSink(t, dir, nil))
	writeN(t, l, 0, 4)
	closeLog(t, l)
	if !bytes.Equal(out.Bytes(), bytes.Join(filesContent(t, dirFiles(t, dir)), nil)) {
		t.Errorf("stdout:\n%s\nfile:\n%s", out.Bytes(), bytes.Join(filesContent(t, dirFiles(t, dir)), nil))
	}
}

func TestNoSecretInAnyLine(t *testing.T) {
	hk := testHMACKey(t)
	var out, logs bytes.Buffer
	st := &fakeStore{}
	dir := t.TempDir()
	l, _ := newLog(t, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&syncWriter{w: &logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}, NewWriterSink("stdout", &out), newStoreSink(st), fileSink(t, dir, nil))
	var raws []string
	for i := range 20 {
		jti := fmt.Sprintf("jti-SECRET-%d-6f1c2d", i)
		ref := fmt.Sprintf("client-reference-SECRET-%d", i)
		raws = append(raws, jti, ref)
		r := testRecord(i)
		r.Hashed = map[string]Digest{"jti": hk.Sum(jti), "ref": hk.Sum(ref)}
		if err := l.Write(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	st.mu.Lock()
	st.fail = errors.New("store down") // a failure is logged too
	st.mu.Unlock()
	writeN(t, l, 20, 1)
	closeLog(t, l)

	outputs := map[string][]byte{
		"stdout": out.Bytes(), "store": st.lines(), "log": logs.Bytes(),
		"files": bytes.Join(filesContent(t, dirFiles(t, dir)), nil),
	}
	for name, b := range outputs {
		for _, raw := range raws {
			if bytes.Contains(b, []byte(raw)) || bytes.Contains(b, []byte("SECRET")) {
				t.Fatalf("%s holds the raw value %q", name, raw)
			}
		}
	}
	if !bytes.Contains(outputs["files"], []byte(`"jti":"`+hk.Sum(raws[0]).String()+`"`)) {
		t.Error("the digest of the first jti is not in the file: the values are not matchable")
	}
}

func TestHealthNamesTheFailingSink(t *testing.T) {
	st := &fakeStore{}
	mem := &memSink{name: "mem"}
	l, _ := newLog(t, nil, mem, newStoreSink(st))
	defer closeLog(t, l)
	writeN(t, l, 0, 1)
	if h := l.Health(); !h.Running || !h.Ready || len(h.Sinks) != 2 || !h.Sinks[0].OK || !h.Sinks[1].OK {
		t.Errorf("health %+v", h)
	}
	st.mu.Lock()
	st.fail = errors.New("store down")
	st.mu.Unlock()
	writeN(t, l, 1, 1)
	h := l.Health()
	if !h.Ready || h.Sinks[1].Name != "store" || h.Sinks[1].OK || h.Sinks[1].Err == nil || h.Sinks[1].Backlog == 0 {
		t.Errorf("health %+v", h)
	}
}
