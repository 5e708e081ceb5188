package bench

import (
	"fmt"
	"io"
	"runtime"
	"text/tabwriter"
)

// WriteTable writes results as an aligned table, under a line saying where
// and how they were measured. what names the operation, e.g. "verify".
func WriteTable(w io.Writer, what string, cfg Config, results []Result) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s: %d goroutines, %s per algorithm, %s %s/%s, GOMAXPROCS=%d\n",
		what, cfg.Goroutines, cfg.Duration, runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "alg\t%s/s\tns/op\tallocs/op\t\n", plural(what))
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.1f\t\n", r.Alg, r.PerSecond(), r.NsPerOp(), r.AllocsPerOp())
	}
	return tw.Flush()
}

func plural(verb string) string {
	if verb == "verify" {
		return "verifies"
	}
	return verb + "s"
}
