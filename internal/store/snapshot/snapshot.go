// Package snapshot is the store's backup format: every row of every table
// of a store, read in one transaction, in a form that neither backend owns,
// so that a snapshot of the SQLite store restores into PostgreSQL and the
// reverse. The backends write one (sqlite.Store.Snapshot,
// postgres.Store.Snapshot) through a [Writer] and restore one read by
// [Read].
//
// # Format
//
// A snapshot is JSON text, one value per line:
//
//	{"format":"keygate-snapshot","version":1,"backend":"sqlite","schema":6,"created_at":"..."}
//	{"table":"clients","columns":[{"name":"id","kind":"text"}, ...]}
//	["kgc_...", ...]                       one line per row of the table above
//	...                                    the next table, its rows
//	{"end":{"rows":{"clients":3,...},"sha256":"..."}}
//
// A value's JSON type follows its column's [Kind]: int and time (UTC
// microseconds since the Unix epoch) are numbers, text and json strings,
// bytes standard base64, bool true or false, and any may be null. The
// trailer counts each table's rows and holds the SHA-256 of every byte
// before its line. [Read] checks all of it — the header, every row
// against its columns, the counts and the digest — before it returns
// anything, so that a restore writes nothing from a truncated or altered
// file.
//
// # Security
//
// A snapshot holds exactly what the store holds: the columns the store
// keeps sealed (signing keys, tenant data keys, transit key versions,
// secrets) are copied byte for byte and stay sealed under the root key,
// which a snapshot never holds. The digest detects damage, not an
// attacker: whoever can write the file can recompute it. What an attacker
// could change undetected is what the store itself does not protect, and
// a sealed value changed fails to open after a restore, as it would in the
// database.
package snapshot

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"regexp"
	"time"
)

// Format and Version name the format in a snapshot's header.
const (
	Format  = "keygate-snapshot"
	Version = 1
)

// A Kind is what a column holds, independent of how a backend declares it.
type Kind string

// The column kinds. SQLite declares only INTEGER, TEXT and BLOB, so its
// snapshots hold int, text and bytes; PostgreSQL's also bool, time and
// json. A restore converts each to its target column's type (an int to a
// boolean or a timestamptz, a text to jsonb, and back).
const (
	KindInt   Kind = "int"   // a 64-bit integer
	KindText  Kind = "text"  // a UTF-8 string
	KindBytes Kind = "bytes" // bytes, copied as they are
	KindBool  Kind = "bool"
	KindTime  Kind = "time" // an instant, to the microsecond
	KindJSON  Kind = "json" // JSON text
)

func (k Kind) valid() bool {
	switch k {
	case KindInt, KindText, KindBytes, KindBool, KindTime, KindJSON:
		return true
	}
	return false
}

// Column is one column of a table.
type Column struct {
	Name string `json:"name"`
	Kind Kind   `json:"kind"`
}

// Header opens a snapshot.
type Header struct {
	Format    string    `json:"format"`
	Version   int       `json:"version"`
	Backend   string    `json:"backend"` // "sqlite" or "postgres": where it was taken
	Schema    int       `json:"schema"`  // the source's schema migration version
	CreatedAt time.Time `json:"created_at"`
}

// Table is a table's columns and rows. A row holds one value per column,
// of the Go type its kind reads as: nil, int64 (int), string (text,
// json), []byte (bytes), bool, or time.Time (time, in UTC).
type Table struct {
	Name    string
	Columns []Column
	Rows    [][]any
}

// Snapshot is a snapshot read back: its header and its tables, in the
// order they were written.
type Snapshot struct {
	Header Header
	Tables []Table
}

// Rows returns the number of rows of every table together.
func (s *Snapshot) Rows() int {
	n := 0
	for _, t := range s.Tables {
		n += len(t.Rows)
	}
	return n
}

// ErrCorrupt is the error of a snapshot that is not one: truncated,
// altered, or not in this format. Read wraps it.
var ErrCorrupt = errors.New("not a complete, intact keygate snapshot")

// MaxLine bounds one line of a snapshot (a row), 64 MiB.
const MaxLine = 64 << 20

type tableLine struct {
	Table   string   `json:"table"`
	Columns []Column `json:"columns"`
}

type endLine struct {
	End *struct {
		Rows   map[string]int `json:"rows"`
		SHA256 string         `json:"sha256"`
	} `json:"end"`
}

// namePattern is what a table or column name may be: the names both
// backends' schemas use, and nothing that would need quoting.
var namePattern = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// ValidName reports whether name may name a table or column in a
// snapshot.
func ValidName(name string) bool { return namePattern.MatchString(name) }

// Writer writes a snapshot: the header, then each table with
// [Writer.Table] followed by its rows ([Writer.Row]), then the trailer
// ([Writer.Close]). It does not close the underlying writer.
type Writer struct {
	w      *bufio.Writer
	h      hash.Hash
	cur    *Table
	counts map[string]int
	order  []string
	err    error
	line   []byte
}

// NewWriter writes h (Format and Version filled in) to w and returns a
// Writer for the tables.
func NewWriter(w io.Writer, h Header) (*Writer, error) {
	h.Format, h.Version = Format, Version
	h.CreatedAt = h.CreatedAt.UTC()
	sum := sha256.New()
	sw := &Writer{w: bufio.NewWriterSize(io.MultiWriter(w, sum), 64<<10), h: sum, counts: map[string]int{}}
	if err := sw.writeJSON(h); err != nil {
		return nil, err
	}
	return sw, nil
}

func (w *Writer) writeJSON(v any) error {
	if w.err != nil {
		return w.err
	}
	b, err := json.Marshal(v)
	if err != nil {
		w.err = err
		return err
	}
	b = append(b, '\n')
	if _, err := w.w.Write(b); err != nil {
		w.err = err
	}
	return w.err
}

// Table begins a table.
func (w *Writer) Table(name string, cols []Column) error {
	if w.err != nil {
		return w.err
	}
	if !ValidName(name) {
		return fmt.Errorf("table name %q", name)
	}
	if _, ok := w.counts[name]; ok {
		return fmt.Errorf("table %s written twice", name)
	}
	if len(cols) == 0 {
		return fmt.Errorf("table %s: no columns", name)
	}
	seen := map[string]bool{}
	for _, c := range cols {
		if !ValidName(c.Name) || !c.Kind.valid() || seen[c.Name] {
			return fmt.Errorf("table %s: column %q of kind %q", name, c.Name, c.Kind)
		}
		seen[c.Name] = true
	}
	w.cur = &Table{Name: name, Columns: cols}
	w.counts[name] = 0
	w.order = append(w.order, name)
	return w.writeJSON(tableLine{Table: name, Columns: cols})
}

// Row writes a row of the current table: one value per column, of its
// kind's Go type (see Table).
func (w *Writer) Row(vals []any) error {
	if w.err != nil {
		return w.err
	}
	if w.cur == nil {
		return errors.New("a row before any table")
	}
	if len(vals) != len(w.cur.Columns) {
		return fmt.Errorf("table %s: %d values for %d columns", w.cur.Name, len(vals), len(w.cur.Columns))
	}
	w.line = append(w.line[:0], '[')
	for i, v := range vals {
		if i > 0 {
			w.line = append(w.line, ',')
		}
		var err error
		if w.line, err = appendValue(w.line, w.cur.Columns[i].Kind, v); err != nil {
			return fmt.Errorf("table %s, column %s: %w", w.cur.Name, w.cur.Columns[i].Name, err)
		}
	}
	w.line = append(w.line, ']', '\n')
	if _, err := w.w.Write(w.line); err != nil {
		w.err = err
		return err
	}
	w.counts[w.cur.Name]++
	return nil
}

// Close writes the trailer: the row counts and the digest of everything
// before it.
func (w *Writer) Close() error {
	if w.err != nil {
		return w.err
	}
	if err := w.w.Flush(); err != nil {
		w.err = err
		return err
	}
	var end endLine
	end.End = &struct {
		Rows   map[string]int `json:"rows"`
		SHA256 string         `json:"sha256"`
	}{Rows: w.counts, SHA256: hex.EncodeToString(w.h.Sum(nil))}
	if err := w.writeJSON(end); err != nil {
		return err
	}
	err := w.w.Flush()
	w.err = errClosed
	return err
}

var errClosed = errors.New("the snapshot is closed")

func appendValue(b []byte, k Kind, v any) ([]byte, error) {
	if v == nil {
		return append(b, "null"...), nil
	}
	switch k {
	case KindInt:
		if n, ok := v.(int64); ok {
			return fmt.Appendf(b, "%d", n), nil
		}
	case KindTime:
		if t, ok := v.(time.Time); ok {
			return fmt.Appendf(b, "%d", t.UnixMicro()), nil
		}
	case KindBool:
		if x, ok := v.(bool); ok {
			return fmt.Appendf(b, "%t", x), nil
		}
	case KindText, KindJSON:
		if s, ok := v.(string); ok {
			j, err := json.Marshal(s)
			if err != nil {
				return b, err
			}
			return append(b, j...), nil
		}
	case KindBytes:
		if x, ok := v.([]byte); ok {
			b = append(b, '"')
			b = base64.StdEncoding.AppendEncode(b, x)
			return append(b, '"'), nil
		}
	}
	return b, fmt.Errorf("a %T is not a %s value", v, k)
}

// Read reads a whole snapshot from r and checks it (see the package
// documentation). Any fault is an error wrapping ErrCorrupt, and nothing
// is returned with it.
func Read(r io.Reader) (*Snapshot, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	sum := sha256.New()
	lineNo := 0
	next := func() ([]byte, error) {
		var line []byte
		for {
			chunk, err := br.ReadSlice('\n')
			line = append(line, chunk...)
			if len(line) > MaxLine {
				return nil, fmt.Errorf("line %d is longer than %d bytes", lineNo+1, MaxLine)
			}
			if err == bufio.ErrBufferFull {
				continue
			}
			if err == io.EOF {
				if len(line) == 0 {
					return nil, io.EOF
				}
				return nil, fmt.Errorf("line %d does not end", lineNo+1) // truncated
			}
			if err != nil {
				return nil, err
			}
			lineNo++
			return line, nil
		}
	}
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("%w: line %d: %s", ErrCorrupt, lineNo, fmt.Sprintf(format, args...))
	}

	line, err := next()
	if err == io.EOF {
		return nil, fmt.Errorf("%w: the file is empty", ErrCorrupt)
	} else if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	sum.Write(line)
	var s Snapshot
	if err := strictUnmarshal(line, &s.Header); err != nil || s.Header.Format != Format {
		return nil, corrupt("not a keygate snapshot header")
	}
	if s.Header.Version != Version {
		return nil, fmt.Errorf("%w: format version %d; this keygate reads version %d", ErrCorrupt, s.Header.Version, Version)
	}
	if s.Header.Backend != "sqlite" && s.Header.Backend != "postgres" {
		return nil, corrupt("unknown source backend %q", s.Header.Backend)
	}
	if s.Header.Schema < 1 {
		return nil, corrupt("schema version %d", s.Header.Schema)
	}
	seen := map[string]bool{}
	var cur *Table
	for {
		line, err := next()
		if err == io.EOF {
			return nil, fmt.Errorf("%w: no trailer (the file is truncated)", ErrCorrupt)
		} else if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		switch {
		case line[0] == '[':
			if cur == nil {
				return nil, corrupt("a row before any table")
			}
			row, err := decodeRow(line, cur.Columns)
			if err != nil {
				return nil, corrupt("table %s: %v", cur.Name, err)
			}
			cur.Rows = append(cur.Rows, row)
		case bytes.HasPrefix(line, []byte(`{"table":`)):
			var tl tableLine
			if err := strictUnmarshal(line, &tl); err != nil {
				return nil, corrupt("table header: %v", err)
			}
			if !ValidName(tl.Table) || seen[tl.Table] || len(tl.Columns) == 0 {
				return nil, corrupt("table %q: bad name, repeated or without columns", tl.Table)
			}
			cols := map[string]bool{}
			for _, c := range tl.Columns {
				if !ValidName(c.Name) || !c.Kind.valid() || cols[c.Name] {
					return nil, corrupt("table %s: column %q of kind %q", tl.Table, c.Name, c.Kind)
				}
				cols[c.Name] = true
			}
			seen[tl.Table] = true
			s.Tables = append(s.Tables, Table{Name: tl.Table, Columns: tl.Columns})
			cur = &s.Tables[len(s.Tables)-1]
		case bytes.HasPrefix(line, []byte(`{"end":`)):
			var end endLine
			if err := strictUnmarshal(line, &end); err != nil || end.End == nil {
				return nil, corrupt("trailer: %v", err)
			}
			if got := hex.EncodeToString(sum.Sum(nil)); end.End.SHA256 != got {
				return nil, corrupt("the digest does not match the content (the file was altered)")
			}
			if len(end.End.Rows) != len(s.Tables) {
				return nil, corrupt("the trailer counts %d tables, the file holds %d", len(end.End.Rows), len(s.Tables))
			}
			for _, t := range s.Tables {
				if n, ok := end.End.Rows[t.Name]; !ok || n != len(t.Rows) {
					return nil, corrupt("table %s: the trailer counts %d rows, the file holds %d", t.Name, n, len(t.Rows))
				}
			}
			if _, err := next(); err != io.EOF {
				return nil, corrupt("content after the trailer")
			}
			return &s, nil
		default:
			return nil, corrupt("not a row, a table or a trailer")
		}
		sum.Write(line)
	}
}

// strictUnmarshal decodes one JSON object, refusing unknown fields.
func strictUnmarshal(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one value")
	}
	return nil
}

func decodeRow(line []byte, cols []Column) ([]any, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var raw []any
	if err := dec.Decode(&raw); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("more than one value on a line")
	}
	if len(raw) != len(cols) {
		return nil, fmt.Errorf("%d values for %d columns", len(raw), len(cols))
	}
	row := make([]any, len(raw))
	for i, v := range raw {
		x, err := decodeValue(cols[i].Kind, v)
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", cols[i].Name, err)
		}
		row[i] = x
	}
	return row, nil
}

func decodeValue(k Kind, v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch k {
	case KindInt, KindTime:
		n, ok := v.(json.Number)
		if !ok {
			break
		}
		i, err := n.Int64()
		if err != nil {
			return nil, fmt.Errorf("%s is not a 64-bit integer", n)
		}
		if k == KindTime {
			// Within the years both backends keep (PostgreSQL's
			// timestamptz ends in 294276).
			if i < -62135596800_000000 || i > 253402300799_999999 {
				return nil, fmt.Errorf("time %d is out of range", i)
			}
			return time.UnixMicro(i).UTC(), nil
		}
		return i, nil
	case KindBool:
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case KindText, KindJSON:
		if s, ok := v.(string); ok {
			if k == KindJSON && !json.Valid([]byte(s)) {
				return nil, errors.New("not JSON text")
			}
			return s, nil
		}
	case KindBytes:
		if s, ok := v.(string); ok {
			b, err := base64.StdEncoding.Strict().DecodeString(s)
			if err != nil {
				return nil, errors.New("not base64")
			}
			return b, nil
		}
	}
	return nil, fmt.Errorf("a JSON %s is not a %s value", jsonType(v), k)
}

func jsonType(v any) string {
	switch v.(type) {
	case json.Number:
		return "number"
	case string:
		return "string"
	case bool:
		return "boolean"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "value"
}
