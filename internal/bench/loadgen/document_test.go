package loadgen

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestDocumentTable(t *testing.T) {
	step := func(conns int, rps float64, p99 int64, cpu float64) *Result {
		return &Result{Mode: ModeClosed, Connections: conns, RequestsPerSec: rps, Latency: Latency{P99: p99},
			Server: &ServerUsage{CPUPercent: cpu}}
	}
	a := &Report{Name: "naive", Steps: []*Result{step(100, 1000, 40e6, 99), step(1000, 800, 900e6, 99)}}
	b := &Report{Name: "keygate", Steps: []*Result{step(100, 4000, 10e6, 97)}}
	b.Steps[0].Status.S4xx = 3
	d := NewDocument("title", "cmd", a, b)
	d.Profiles = []Profile{{Series: "keygate", Kind: "cpu", File: "k.pprof", Top: []ProfileFunc{{"crypto/ecdsa.Verify", 60, 70}}}}
	var buf bytes.Buffer
	if err := d.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(buf.String(), "\n")
	if lines[1] != "verdict: keygate ÷ naive: 4.0× requests/s, valid" {
		t.Errorf("verdict line %q", lines[1])
	}
	row1, row2 := strings.Fields(lines[3]), strings.Fields(lines[4])
	// connections, naive req/s p99 cpu errors, keygate req/s p99 cpu errors, ratios.
	if want := []string{"100", "1000", "40ms", "99", "0", "4000", "10ms", "97", "3", "4.00", "0.25"}; strings.Join(row1, " ") != strings.Join(want, " ") {
		t.Errorf("row %v, want %v", row1, want)
	}
	if row2[0] != "1000" || row2[5] != "-" || row2[len(row2)-1] != "-" {
		t.Errorf("a step one series lacks: %v", row2)
	}
	if !strings.Contains(buf.String(), "60.0% flat  70.0% cum  crypto/ecdsa.Verify") {
		t.Errorf("profile summary missing:\n%s", buf.String())
	}
	var round Document
	buf.Reset()
	if err := d.WriteJSON(&buf); err != nil || json.Unmarshal(buf.Bytes(), &round) != nil || round.Schema != DocumentSchema ||
		len(round.Series) != 2 || round.Series[1].Name != "keygate" {
		t.Errorf("JSON round trip: %v %+v", err, round)
	}
}
