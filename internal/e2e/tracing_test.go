package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/mint"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/server"
	"github.com/keygate/keygate/internal/telemetry"
)

// otlpReceiver collects the spans an OTLP exporter sends it, over HTTP
// (POST /v1/traces, protobuf) or gRPC (TraceService/Export).
type otlpReceiver struct {
	coltracepb.UnimplementedTraceServiceServer
	mu       sync.Mutex
	spans    []*tracepb.Span
	services []string // service.name of each resource
	paths    []string // the HTTP paths posted to
}

func (r *otlpReceiver) add(req *coltracepb.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				r.services = append(r.services, kv.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			r.spans = append(r.spans, ss.GetSpans()...)
		}
	}
}

func (r *otlpReceiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r.add(req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func (r *otlpReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil || req.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	var msg coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &msg); err != nil {
		http.Error(w, "bad protobuf", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.paths = append(r.paths, req.URL.Path)
	r.mu.Unlock()
	r.add(&msg)
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// start serves r over protocol on a loopback port and returns its address.
func (r *otlpReceiver) start(t *testing.T, protocol string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if protocol == "grpc" {
		srv := grpc.NewServer()
		coltracepb.RegisterTraceServiceServer(srv, r)
		go srv.Serve(ln)
		t.Cleanup(srv.Stop)
	} else {
		srv := &http.Server{Handler: r, ReadHeaderTimeout: 5 * time.Second}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
	}
	return ln.Addr().String()
}

// otelVars are the variables a case may set; each is cleared first, so
// that the environment the tests run in does not leak in.
var otelVars = []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
	"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
	"OTEL_SERVICE_NAME", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG", "OTEL_RESOURCE_ATTRIBUTES",
	"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"}

// TestTracingExport runs a keygate server configured for tracing by the
// YAML or by OTEL_* variables, sends it a forward-auth request with a
// traceparent and a token request, stops it, and checks that the spans
// reached an OTLP receiver started here, over HTTP or gRPC, in one trace
// per request with the expected parents; and that the token sent is in
// none of them.
func TestTracingExport(t *testing.T) {
	for _, tc := range []struct {
		name     string
		protocol string                   // the receiver's: grpc or http/protobuf
		yaml     func(addr string) string // the tracing section
		env      func(addr string) map[string]string
		service  string // the service.name expected
		none     bool   // no span is expected
	}{
		{name: "yaml over http", protocol: "http/protobuf", service: "keygate-yaml",
			yaml: func(addr string) string {
				return fmt.Sprintf("tracing: {enabled: true, endpoint: 'http://%s', service_name: keygate-yaml}\n", addr)
			}},
		{name: "yaml over grpc", protocol: "grpc", service: "keygate",
			yaml: func(addr string) string {
				return fmt.Sprintf("tracing: {enabled: true, protocol: grpc, endpoint: 'http://%s'}\n", addr)
			}},
		{name: "env over http", protocol: "http/protobuf", service: "keygate-env",
			env: func(addr string) map[string]string {
				return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + addr, "OTEL_SERVICE_NAME": "keygate-env"}
			}},
		{name: "env over grpc, winning over the yaml", protocol: "grpc", service: "keygate",
			yaml: func(string) string {
				return "tracing: {enabled: true, endpoint: 'http://127.0.0.1:9', protocol: http/protobuf}\n"
			},
			env: func(addr string) map[string]string {
				return map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://" + addr, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
			}},
		{name: "OTEL_SDK_DISABLED wins over the yaml", protocol: "http/protobuf", none: true,
			yaml: func(addr string) string {
				return fmt.Sprintf("tracing: {enabled: true, endpoint: 'http://%s'}\n", addr)
			},
			env: func(string) map[string]string { return map[string]string{"OTEL_SDK_DISABLED": "true"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range otelVars {
				t.Setenv(v, "")
			}
			rcv := &otlpReceiver{}
			addr := rcv.start(t, tc.protocol)
			if tc.env != nil {
				for k, v := range tc.env(addr) {
					t.Setenv(k, v)
				}
			}
			dir := t.TempDir()
			path := filepath.Join(dir, "keygate.yaml")
			yaml := "listen: 127.0.0.1:0\n"
			if tc.yaml != nil {
				yaml += tc.yaml(addr)
			}
			if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Load(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			s, err := server.New(context.Background(), server.Config{Gateway: cfg, Logger: slog.New(slog.DiscardHandler), Metrics: telemetry.New(),
				Node: &node.Config{DataDir: filepath.Join(dir, "data"), Issuer: testIssuer, Audience: testAudience}})
			if err != nil {
				t.Fatal(err)
			}
			closed := false
			t.Cleanup(func() {
				if !closed {
					s.Close()
				}
			})
			tok, err := s.Node().Mint(mint.Claims{Subject: "alice", Audience: []string{testAudience}, TTL: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			served := make(chan error, 1)
			go func() { served <- s.Serve(ctx, ln, nil) }()
			base := "http://" + ln.Addr().String()

			const trace, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
			req, _ := http.NewRequest(http.MethodGet, base+"/auth", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Traceparent", "00-"+trace+"-"+parent+"-01")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("/auth: %d", resp.StatusCode)
			}
			form := url.Values{"grant_type": {"client_credentials"}, "client_id": {"nobody"}, "client_secret": {"not-a-secret"}}
			resp, err = http.PostForm(base+"/oauth2/token", form)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("/oauth2/token: %d, want 401 invalid_client", resp.StatusCode)
			}
			cancel()
			if err := <-served; err != nil {
				t.Fatalf("Serve: %v", err)
			}
			s.Close() // flushes the spans
			closed = true

			rcv.mu.Lock()
			defer rcv.mu.Unlock()
			if tc.none {
				if len(rcv.spans) != 0 {
					t.Fatalf("%d spans exported with tracing off", len(rcv.spans))
				}
				return
			}
			byName := map[string]*tracepb.Span{}
			for _, sp := range rcv.spans {
				byName[sp.GetName()] = sp
				for _, kv := range sp.GetAttributes() {
					if v := kv.GetValue().GetStringValue(); len(v) >= 16 && strings.Contains(tok, v) {
						t.Errorf("%s %s holds part of the token", sp.GetName(), kv.GetKey())
					}
				}
			}
			hex := func(b []byte) string { return fmt.Sprintf("%x", b) }
			for _, want := range []struct{ name, parent string }{
				{telemetry.SpanAuth, parent},
				{telemetry.SpanCache, telemetry.SpanAuth},
				{telemetry.SpanVerify, telemetry.SpanAuth},
				{telemetry.SpanTokenPref + "token", ""},
				{"keygate.store.get_client", telemetry.SpanTokenPref + "token"},
			} {
				sp := byName[want.name]
				if sp == nil {
					t.Errorf("no %s span among %d", want.name, len(rcv.spans))
					continue
				}
				switch p := byName[want.parent]; {
				case want.parent == "":
					if len(sp.GetParentSpanId()) != 0 {
						t.Errorf("%s has a parent", want.name)
					}
				case p != nil:
					if hex(sp.GetParentSpanId()) != hex(p.GetSpanId()) {
						t.Errorf("%s is not a child of %s", want.name, want.parent)
					}
				default: // the remote parent of the traceparent
					if hex(sp.GetTraceId()) != trace || hex(sp.GetParentSpanId()) != want.parent {
						t.Errorf("%s: trace %x parent %x, want %s %s", want.name, sp.GetTraceId(), sp.GetParentSpanId(), trace, want.parent)
					}
				}
			}
			if len(rcv.services) == 0 || rcv.services[0] != tc.service {
				t.Errorf("service.name %q, want %q", rcv.services, tc.service)
			}
			for _, p := range rcv.paths {
				if p != "/v1/traces" {
					t.Errorf("posted to %s, want /v1/traces", p)
				}
			}
		})
	}
}

// TestTracingDeadCollector: a collector that accepts connections and never
// answers holds no request up, and a stop waits for it at most
// TracingFlushTimeout.
func TestTracingDeadCollector(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: waits out the tracing flush timeout against a dead collector; run without -short")
	}
	for _, v := range otelVars {
		t.Setenv(v, "")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	cfg := &config.Config{Tracing: config.Tracing{Enabled: true, Endpoint: "http://" + ln.Addr().String()}}
	cfg.SetDefaults()
	dir := t.TempDir()
	s, err := server.New(context.Background(), server.Config{Gateway: cfg, Logger: slog.New(slog.DiscardHandler),
		Node: &node.Config{DataDir: filepath.Join(dir, "data"), Issuer: testIssuer, Audience: testAudience}})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := s.Node().Mint(mint.Claims{Subject: "alice", Audience: []string{testAudience}, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for range 2000 { // more than the exporter's queue holds
		req, _ := http.NewRequest(http.MethodGet, "/auth", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		rec := &statusRecorder{h: http.Header{}}
		s.Handler().ServeHTTP(rec, req)
		if rec.code != http.StatusOK {
			t.Fatalf("/auth: %d", rec.code)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("2000 decisions took %v with a dead collector", d)
	}
	start = time.Now()
	s.Close()
	if d := time.Since(start); d > server.TracingFlushTimeout+2*time.Second {
		t.Errorf("Close took %v, want at most about %v", d, server.TracingFlushTimeout)
	}
}

// statusRecorder is a ResponseWriter that keeps the status.
type statusRecorder struct {
	h    http.Header
	code int
}

func (w *statusRecorder) Header() http.Header { return w.h }
func (w *statusRecorder) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return len(p), nil
}
func (w *statusRecorder) WriteHeader(code int) { w.code = code }
