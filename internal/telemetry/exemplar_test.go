package telemetry

import (
	"context"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/keygate/keygate/jose"
)

// TestExemplars: a latency observed under a sampled span carries its trace
// id as exemplar; one under an unsampled span, or none, carries none.
func TestExemplars(t *testing.T) {
	sampled := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	unsampled := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	for _, tc := range []struct {
		name string
		tp   *sdktrace.TracerProvider // nil: no span
		want bool
	}{
		{"sampled span", sampled, true},
		{"unsampled span", unsampled, false},
		{"no span", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			traceID := ""
			if tc.tp != nil {
				c, s := tc.tp.Tracer("test").Start(ctx, "req")
				defer s.End()
				ctx, traceID = c, s.SpanContext().TraceID().String()
			}
			m := New()
			m.VerifyObserver()(ctx, jose.ES256, 40*time.Microsecond, true)
			m.TokenRequest(ctx, "token", "client_credentials", "ok", 2*time.Millisecond)
			fams, err := m.Registry.Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"keygate_verify_seconds", "keygate_token_request_seconds"} {
				var got []string
				for _, f := range fams {
					if f.GetName() != name {
						continue
					}
					for _, mt := range f.GetMetric() {
						for _, b := range mt.GetHistogram().GetBucket() {
							if ex := b.GetExemplar(); ex != nil {
								got = append(got, label(ex, "trace_id"))
							}
						}
					}
				}
				switch {
				case tc.want && (len(got) != 1 || got[0] != traceID):
					t.Errorf("%s exemplars %q, want [%s]", name, got, traceID)
				case !tc.want && len(got) != 0:
					t.Errorf("%s exemplars %q, want none", name, got)
				}
			}
		})
	}
}

func label(ex *dto.Exemplar, name string) string {
	for _, l := range ex.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
