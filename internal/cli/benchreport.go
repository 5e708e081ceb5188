package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/keygate/keygate/internal/bench/loadgen"
	"github.com/keygate/keygate/internal/bench/report"
)

// benchReport is 'keygate bench report': a bench JSON document drawn as a
// self-contained HTML page.
func (a *app) benchReport(ctx context.Context, args []string) error {
	fs := a.flags("keygate bench report", "--in FILE.json --out FILE.html [--force]",
		"Draws a bench document as one self-contained HTML page that opens offline: throughput and\n"+
			"latency percentiles against connections or rate, the latency distribution, the target's CPU\n"+
			"and allocation rate when known, ratios between series, a table of every step, and the\n"+
			"profiles' top functions. FILE.json is what 'keygate bench load --json' prints\n"+
			"("+loadgen.Schema+") or a "+loadgen.DocumentSchema+" document of several series.\n"+
			"See docs/bench-load.md.")
	in := fs.String("in", "", "read the JSON document from `FILE` (- for standard input)")
	out := fs.String("out", "", "write the HTML page to `FILE`")
	force := fs.Bool("force", false, "overwrite --out if it exists")
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	switch {
	case *in == "":
		return usageErrorf(fs.Name(), "--in is required")
	case *out == "":
		return usageErrorf(fs.Name(), "--out is required")
	}
	var data []byte
	var err error
	if *in == "-" {
		data, err = io.ReadAll(a.stdin)
	} else {
		data, err = os.ReadFile(*in)
	}
	if err != nil {
		return fmt.Errorf("bench report: %w", err)
	}
	name := *in
	if name == "-" {
		name = "standard input"
	}
	doc, err := readBenchDocument(data)
	if err != nil {
		return fmt.Errorf("bench report: %s: %w", name, err)
	}
	var page bytes.Buffer
	if err := report.WriteHTML(&page, doc); err != nil {
		return fmt.Errorf("bench report: %w", err)
	}
	if err := writeNewFile(*out, page.Bytes(), 0o644, *force); err != nil {
		return fmt.Errorf("bench report: %w", err)
	}
	steps := 0
	for _, s := range doc.Series {
		if s != nil {
			steps += len(s.Steps)
		}
	}
	fmt.Fprintf(a.stdout, "wrote %s: %d series, %d steps\n", *out, len(doc.Series), steps)
	return nil
}

// readBenchDocument decodes a keygate.bench.report/v1 document, or a
// keygate.bench.load/v1 one as a document of one series.
func readBenchDocument(data []byte) (*loadgen.Document, error) {
	var head struct {
		Schema *string `json:"schema"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("not a JSON document: %w", err)
	}
	want := fmt.Sprintf("%s (bench load --json) or %s", loadgen.Schema, loadgen.DocumentSchema)
	if head.Schema == nil {
		return nil, fmt.Errorf("no \"schema\"; want %s", want)
	}
	switch *head.Schema {
	case loadgen.DocumentSchema:
		var d loadgen.Document
		if err := json.Unmarshal(data, &d); err != nil {
			return nil, fmt.Errorf("%s: %w", loadgen.DocumentSchema, err)
		}
		return &d, nil
	case loadgen.Schema:
		var r loadgen.Report
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", loadgen.Schema, err)
		}
		title := "bench load: " + r.Target.Method + " " + r.Target.URL
		if r.Name == "" {
			r.Name = r.Target.Method + " " + r.Target.URL
		}
		return &loadgen.Document{Schema: loadgen.DocumentSchema, Title: title, Series: []*loadgen.Report{&r}}, nil
	default:
		return nil, fmt.Errorf("schema %q; want %s", *head.Schema, want)
	}
}

// writeNewFile writes data to path with mode perm. Without overwrite it
// refuses a path that exists; with it, it replaces the file whole (a
// temporary file renamed over it), so a reader never sees half of it.
func writeNewFile(path string, data []byte, perm os.FileMode, overwrite bool) (err error) {
	if !overwrite {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%s exists; give --force to overwrite it", path)
		}
		if err != nil {
			return err
		}
		if _, err = f.Write(data); err == nil {
			err = f.Close()
		} else {
			f.Close()
		}
		if err != nil {
			os.Remove(path)
		}
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
