package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// listing is the output of a list command: a header row and one
// tab-separated row per item (cut -f and awk -F'\t' take it), or, with
// --json, the admin API's answer as it came, for jq.
type listing struct{ json bool }

func (l *listing) register(fs *flagSet) {
	fs.BoolVar(&l.json, "json", false, "print the admin API's JSON answer instead of a table")
}

// print decodes raw into out and prints header and the rows rows makes of
// it; with --json it prints raw, indented.
func (l *listing) print(a *app, raw json.RawMessage, out any, header []string, rows func() [][]string) error {
	if l.json {
		var b bytes.Buffer
		if err := json.Indent(&b, raw, "", "  "); err != nil {
			return fmt.Errorf("the admin API answered something that is not JSON: %w", err)
		}
		fmt.Fprintln(a.stdout, b.String())
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("the admin API answered an unexpected shape: %w", err)
	}
	fmt.Fprintln(a.stdout, strings.Join(header, "\t"))
	for _, r := range rows() {
		fmt.Fprintln(a.stdout, strings.Join(r, "\t"))
	}
	return nil
}
