package tracing

import (
	"context"
	"sync/atomic"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/keygate/keygate/internal/config"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestEnabled: the file turns tracing on, and so do the OTEL_* variables
// that name an OTLP exporter or endpoint; OTEL_SDK_DISABLED and
// OTEL_TRACES_EXPORTER=none turn it off whatever the file says; an
// exporter keygate lacks is an error at start.
func TestEnabled(t *testing.T) {
	for _, tc := range []struct {
		name    string
		file    bool
		env     map[string]string
		want    bool
		wantErr bool
	}{
		{name: "off by default"},
		{name: "the file", file: true, want: true},
		{name: "an endpoint in the environment", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, want: true},
		{name: "a traces endpoint in the environment", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, want: true},
		{name: "OTEL_TRACES_EXPORTER=otlp", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, want: true},
		{name: "OTEL_SDK_DISABLED over the file", file: true, env: map[string]string{"OTEL_SDK_DISABLED": "TRUE"}},
		{name: "OTEL_SDK_DISABLED=false leaves it on", file: true, env: map[string]string{"OTEL_SDK_DISABLED": "false"}, want: true},
		{name: "OTEL_TRACES_EXPORTER=none over the file", file: true, env: map[string]string{"OTEL_TRACES_EXPORTER": "none"}},
		{name: "an exporter keygate lacks", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Enabled(config.Tracing{Enabled: tc.file}, env(tc.env))
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("Enabled = %v, %v; want %v, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// TestProtocol: the traces variable, then the general one, then the
// file, then http/protobuf; an unknown protocol fails at start.
func TestProtocol(t *testing.T) {
	for _, tc := range []struct {
		name string
		file string
		env  map[string]string
		want string
	}{
		{"default", "", nil, ProtocolHTTP},
		{"file", "grpc", nil, ProtocolGRPC},
		{"env over file", "grpc", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, ProtocolHTTP},
		{"traces env over env", "", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
			"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, ProtocolGRPC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Protocol(config.Tracing{Protocol: tc.file}, env(tc.env)); got != tc.want {
				t.Errorf("Protocol = %q, want %q", got, tc.want)
			}
		})
	}
	_, err := New(context.Background(), config.Tracing{Enabled: true},
		Options{Getenv: env(map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})})
	if err == nil {
		t.Error("http/json accepted")
	}
}

// TestNewOff: tracing off is a nil Provider, whose methods are safe.
func TestNewOff(t *testing.T) {
	p, err := New(context.Background(), config.Tracing{}, Options{Getenv: env(nil), Exporter: tracetest.NewInMemoryExporter()})
	if err != nil || p != nil {
		t.Fatalf("New = %v, %v; want nil, nil", p, err)
	}
	if p.Tracer() != nil || p.Shutdown(context.Background()) != nil {
		t.Error("a nil Provider traces")
	}
}

// TestSampleRatio: the file's ratio applies to traces started here, and a
// sampled parent is followed whatever the ratio.
func TestSampleRatio(t *testing.T) {
	zero := 0.0
	exp := &countingExporter{}
	p, err := New(context.Background(), config.Tracing{Enabled: true, SampleRatio: &zero}, Options{Getenv: env(nil), Exporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	_, span := p.Tracer().Start(context.Background(), "root")
	if span.SpanContext().IsSampled() {
		t.Error("a root span sampled at ratio 0")
	}
	span.End()
	h := map[string][]string{"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
	_, span = p.Tracer().StartServer(context.Background(), "child", h)
	if !span.SpanContext().IsSampled() {
		t.Error("a sampled parent not followed at ratio 0")
	}
	span.End()
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if exp.n.Load() != 1 {
		t.Errorf("%d spans exported by Shutdown, want 1", exp.n.Load())
	}
}

// countingExporter counts the spans exported, and keeps the count after
// Shutdown (tracetest's exporter forgets them).
type countingExporter struct{ n atomic.Int64 }

func (e *countingExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.n.Add(int64(len(spans)))
	return nil
}
func (e *countingExporter) Shutdown(context.Context) error { return nil }
