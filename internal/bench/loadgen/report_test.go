package loadgen

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestReport(t *testing.T) {
	cfg := Config{
		Request: Request{Method: "POST", URL: "http://127.0.0.1:1/", Header: []Header{{"Authorization", "Bearer secret-token"}},
			Body: []byte("abc")},
		Warmup: 2 * time.Second, Duration: 10 * time.Second,
	}
	var h Histogram
	for i := range 1000 {
		h.Record(time.Duration(i+1) * time.Microsecond)
	}
	step := &Result{Mode: ModeOpen, Connections: 50, TargetRate: 1000, Seconds: 10, Hist: &h,
		Status: StatusCounts{S2xx: 990, S5xx: 10}, Errors: ErrorCounts{Timeout: 2}, Reconnects: 3}
	step.fill(cpuTimes{user: 5 * time.Second, sys: 4 * time.Second}, 10*time.Second, 1)
	rep := NewReport(cfg, []*Result{step})

	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(js.String(), "secret-token") {
		t.Error("the JSON holds a header value")
	}
	var doc map[string]any
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	s := doc["steps"].([]any)[0].(map[string]any)
	lat := s["latency"].(map[string]any)
	cpu := s["generator_cpu"].(map[string]any)
	if doc["schema"] != Schema || s["mode"] != "open" || s["requests"] != 1000.0 || s["requests_per_s"] != 100.0 ||
		lat["p50_ns"].(float64) < 495e3 || lat["p50_ns"].(float64) > 505e3 || lat["max_ns"] != 1e6 ||
		cpu["percent"] != 90.0 || cpu["saturated"] != true ||
		s["status"].(map[string]any)["5xx"] != 10.0 || s["errors"].(map[string]any)["timeout"] != 2.0 {
		t.Errorf("JSON:\n%s", js.String())
	}
	if names := doc["target"].(map[string]any)["header_names"].([]any); len(names) != 1 || names[0] != "Authorization" {
		t.Errorf("header_names %v", names)
	}

	var tab bytes.Buffer
	if err := rep.WriteTable(&tab); err != nil {
		t.Fatal(err)
	}
	out := tab.String()
	for _, want := range []string{
		"bench load: POST http://127.0.0.1:1/, 10s per step after 2s warm-up",
		"connections", "p99.9", "1000/s", "1ms", // max
		"errors connect 0, read 0, write 0, timeout 2, parse 0; non-2xx 3xx 0, 4xx 0, 5xx 10",
		"after 3 answers",
		"verdict: valid, with 1 warning\n  * the target at 50 connections, 1000 requests/s: the load generator used 90% of its CPU, so the rate is a lower bound\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "secret-token") {
		t.Error("the table holds a header value")
	}
	lines := strings.Split(out, "\n")
	if f := strings.Fields(lines[4]); len(f) != 11 || f[0] != "50" || f[2] != "100" || f[8] != "2" || f[9] != "10" || f[10] != "90" {
		t.Errorf("row %q", lines[4])
	}
}

func TestLat(t *testing.T) {
	for ns, want := range map[int64]string{0: "0s", 999: "999ns", 1234: "1.23µs", 999_600: "1ms", 12_345_678: "12.3ms",
		61_234_000_000: "1m1.2s"} {
		if got := lat(ns); got != want {
			t.Errorf("lat(%d) = %q, want %q", ns, got, want)
		}
	}
}
