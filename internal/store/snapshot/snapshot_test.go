package snapshot

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

var at = time.Date(2026, 11, 29, 1, 2, 3, 456789000, time.UTC)

// sample is a snapshot with every kind, NULLs and awkward bytes.
func sample(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Header{Backend: "sqlite", Schema: 6, CreatedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	steps := []error{
		w.Table("a", []Column{{"i", KindInt}, {"s", KindText}, {"b", KindBytes}, {"t", KindTime}, {"o", KindBool}, {"j", KindJSON}}),
		w.Row([]any{int64(-9223372036854775808), "é\n\"x\"", []byte{0, 255, '\n'}, at, true, `["a", "b"]`}),
		w.Row([]any{nil, nil, nil, nil, nil, nil}),
		w.Table("empty", []Column{{"x", KindInt}}),
	}
	for i, err := range steps {
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestWriteRead(t *testing.T) {
	raw := sample(t)
	s, err := Read(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	want := &Snapshot{
		Header: Header{Format: Format, Version: Version, Backend: "sqlite", Schema: 6, CreatedAt: at},
		Tables: []Table{
			{Name: "a", Columns: []Column{{"i", KindInt}, {"s", KindText}, {"b", KindBytes}, {"t", KindTime}, {"o", KindBool}, {"j", KindJSON}},
				Rows: [][]any{{int64(-9223372036854775808), "é\n\"x\"", []byte{0, 255, '\n'}, at, true, `["a", "b"]`}, {nil, nil, nil, nil, nil, nil}}},
			{Name: "empty", Columns: []Column{{"x", KindInt}}},
		},
	}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("read back:\n got %#v\nwant %#v", s, want)
	}
	if s.Rows() != 2 {
		t.Errorf("Rows: %d", s.Rows())
	}
}

// TestReadRefuses: every truncation of a snapshot is refused, and so is a
// snapshot with any one byte changed, with ErrCorrupt.
func TestReadRefuses(t *testing.T) {
	raw := sample(t)
	for n := 0; n < len(raw); n++ {
		if _, err := Read(bytes.NewReader(raw[:n])); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d of %d bytes: %v, want ErrCorrupt", n, len(raw), err)
		}
	}
	for i := range raw {
		b := bytes.Clone(raw)
		b[i] ^= 0x01
		if _, err := Read(bytes.NewReader(b)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("byte %d changed (%q): %v, want ErrCorrupt", i, raw[i], err)
		}
	}
	for _, c := range []struct{ name, text string }{
		{"content after the trailer", string(raw) + "[1]\n"},
		{"another format", strings.Replace(string(raw), Format, "other", 1)},
		{"another version", strings.Replace(string(raw), `"version":1`, `"version":2`, 1)},
	} {
		if _, err := Read(strings.NewReader(c.text)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", c.name, err)
		}
	}
}

func TestWriterRefuses(t *testing.T) {
	for _, c := range []struct {
		name string
		do   func(w *Writer) error
	}{
		{"row before table", func(w *Writer) error { return w.Row([]any{int64(1)}) }},
		{"bad table name", func(w *Writer) error { return w.Table(`a"; DROP`, []Column{{"x", KindInt}}) }},
		{"bad column name", func(w *Writer) error { return w.Table("a", []Column{{"X", KindInt}}) }},
		{"bad kind", func(w *Writer) error { return w.Table("a", []Column{{"x", "float"}}) }},
		{"no columns", func(w *Writer) error { return w.Table("a", nil) }},
		{"repeated column", func(w *Writer) error { return w.Table("a", []Column{{"x", KindInt}, {"x", KindInt}}) }},
		{"repeated table", func(w *Writer) error {
			w.Table("a", []Column{{"x", KindInt}})
			return w.Table("a", []Column{{"x", KindInt}})
		}},
		{"wrong count", func(w *Writer) error {
			w.Table("a", []Column{{"x", KindInt}})
			return w.Row([]any{int64(1), int64(2)})
		}},
		{"wrong type", func(w *Writer) error {
			w.Table("a", []Column{{"x", KindInt}})
			return w.Row([]any{"1"})
		}},
	} {
		w, err := NewWriter(&bytes.Buffer{}, Header{Backend: "sqlite", Schema: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.do(w); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}

// FuzzRead: Read never panics; what it accepts writes back to a snapshot
// it reads the same.
func FuzzRead(f *testing.F) {
	raw := sample(f)
	f.Add(raw)
	f.Add(raw[:len(raw)/2])
	f.Add([]byte(`{"format":"keygate-snapshot","version":1,"backend":"postgres","schema":1,"created_at":"2026-01-01T00:00:00Z"}` + "\n"))
	f.Add([]byte("[1]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Read(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error without ErrCorrupt: %v", err)
			}
			return
		}
		var buf bytes.Buffer
		w, err := NewWriter(&buf, s.Header)
		if err != nil {
			t.Fatal(err)
		}
		for _, tb := range s.Tables {
			if err := w.Table(tb.Name, tb.Columns); err != nil {
				t.Fatal(err)
			}
			for _, r := range tb.Rows {
				if err := w.Row(r); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		s2, err := Read(&buf)
		if err != nil {
			t.Fatalf("rewritten snapshot: %v", err)
		}
		if !reflect.DeepEqual(s.Tables, s2.Tables) {
			t.Fatalf("rewritten tables differ")
		}
	})
}
