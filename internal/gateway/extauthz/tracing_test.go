package extauthz

import (
	"context"
	"strconv"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/keygate/keygate/internal/gateway"
	"github.com/keygate/keygate/internal/telemetry"
	"github.com/keygate/keygate/internal/verify"
)

// TestCheckTracing: over forward-auth's case table, each Check is a
// keygate.ext_authz server span whose parent is the traceparent among the
// CheckRequest's headers, with the decision, reason and status the answer
// carries; a malformed traceparent starts a trace of its own; and no
// span, attribute, event or status holds 16 characters of any token the
// table sends.
func TestCheckTracing(t *testing.T) {
	f := newFixture(t, func(c *verify.Config) { c.Traced = true })
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	svc := New(Config{Decider: func() *gateway.Decider { return f.decider }, Tracer: telemetry.NewTracer(tp)})
	const trace, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	seen := map[string]bool{}
	for _, tc := range f.cases(t) {
		for _, tp := range []struct {
			name, value string
			continued   bool
		}{
			{"traceparent", "00-" + trace + "-" + parent + "-01", true},
			{"malformed traceparent", "00-" + trace + "-" + parent + "-0x", false},
		} {
			t.Run(tc.name+"/"+tp.name, func(t *testing.T) {
				req := tc.request()
				hr := req.Attributes.Request.Http
				if hr.HeaderMap != nil {
					t.Skip("header_map requests: the traceparent is read the same way as authorization")
				}
				hr.Headers["traceparent"] = tp.value
				hr.Headers["tracestate"] = "congo=t61rcWkgMzE"
				windows := map[string]bool{}
				for k, v := range hr.Headers {
					if k == "authorization" || k == "cookie" {
						for i := 0; i+16 <= len(v); i++ {
							windows[v[i:i+16]] = true
						}
					}
				}
				exp.Reset()
				resp, err := svc.Check(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				a := read(t, resp)
				spans := exp.GetSpans()
				if len(spans) == 0 {
					t.Fatal("no span")
				}
				for _, s := range spans {
					seen[s.Name] = true
				}
				root := spans[len(spans)-1]
				if root.Name != telemetry.SpanExtAuthz {
					t.Fatalf("last span %s, want %s", root.Name, telemetry.SpanExtAuthz)
				}
				if got := root.Parent.IsValid() && root.Parent.TraceID().String() == trace && root.Parent.SpanID().String() == parent; got != tp.continued {
					t.Errorf("parent %v, from the traceparent: %v, want %v", root.Parent, got, tp.continued)
				}
				attrs := map[string]string{}
				for _, kv := range root.Attributes {
					attrs[string(kv.Key)] = kv.Value.Emit()
				}
				decision := "deny"
				if a.status == 200 {
					decision = "allow"
				}
				want := map[string]string{string(telemetry.AttrFrontend): FrontEnd, string(telemetry.AttrDecision): decision,
					string(telemetry.AttrStatus): strconv.Itoa(a.status)}
				if tc.reason != "" {
					want[string(telemetry.AttrReason)] = tc.reason
				}
				for k, v := range want {
					if attrs[k] != v {
						t.Errorf("%s = %q, want %q", k, attrs[k], v)
					}
				}
				ids := map[string]bool{root.SpanContext.SpanID().String(): true}
				for _, s := range spans[:len(spans)-1] {
					ids[s.SpanContext.SpanID().String()] = true
				}
				for _, s := range spans[:len(spans)-1] {
					if s.SpanContext.TraceID() != root.SpanContext.TraceID() || !ids[s.Parent.SpanID().String()] {
						t.Errorf("%s is not under %s", s.Name, root.Name)
					}
				}
				leaks := func(where, v string) {
					for i := 0; i+16 <= len(v); i++ {
						if windows[v[i:i+16]] {
							t.Errorf("%s holds part of the credentials: %q", where, v)
							return
						}
					}
				}
				for _, s := range spans {
					leaks("span name", s.Name)
					leaks(s.Name+" status", s.Status.Description)
					for _, kv := range s.Attributes {
						leaks(s.Name+" "+string(kv.Key), kv.Value.Emit())
					}
					for _, ev := range s.Events {
						leaks(s.Name+" event", ev.Name)
						for _, kv := range ev.Attributes {
							leaks(s.Name+" event "+string(kv.Key), kv.Value.Emit())
						}
					}
				}
			})
		}
	}
	// The table's valid tokens are verified, then found in the cache; a
	// kid no key has makes the pipeline refetch the keys.
	for _, name := range []string{telemetry.SpanCache, telemetry.SpanVerify, telemetry.SpanKeyRefetch} {
		if !seen[name] {
			t.Errorf("no %s span under any check", name)
		}
	}
}
