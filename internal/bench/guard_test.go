package bench

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/keygate/keygate/internal/bench/grpcload"
	"github.com/keygate/keygate/internal/bench/loadgen"
	"github.com/keygate/keygate/internal/gateway/extauthz"
	"github.com/keygate/keygate/internal/keyfile"
	"github.com/keygate/keygate/jose"
)

// benchRequest is a request as keygate's load generator sends it: with
// the benchmark marker.
func benchRequest(method, target string, body io.Reader) *http.Request {
	r := httptest.NewRequest(method, target, body)
	r.Header.Set(loadgen.MarkerHeader, loadgen.Marker())
	return r
}

// everyHTTPMode returns the handler of every HTTP mode of bench server.
func everyHTTPMode(t *testing.T) map[string]http.Handler {
	t.Helper()
	hs := map[string]http.Handler{}
	for _, mode := range Modes {
		h, err := Handler(mode)
		if err != nil {
			t.Fatal(err)
		}
		hs[mode] = h
	}
	_, priv, err := newSigner(jose.ES256)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM, err := jose.MarshalPublicPEM(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	secret, _ := keyfile.GenerateSecret(jose.HS256)
	for mode, key := range map[string][]byte{ModeNaiveES256: pubPEM, ModeNaiveHS256: secret, ModeMiddlewareHS256: secret,
		ModeNaiveDecrypt: []byte("correct horse battery staple")} {
		h, err := NaiveHandler(mode, writeFile(t, key))
		if err != nil {
			t.Fatal(err)
		}
		hs[mode] = h
	}
	for mode, store := range map[string]string{ModeKVRead: "", ModeKVWrite: filepath.Join(t.TempDir(), "kv.db")} {
		h, closer, err := KVHandler(t.Context(), mode, store)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { closer.Close() })
		hs[mode] = h
	}
	return hs
}

// TestGuard: every HTTP mode refuses, 403, a request without the load
// generator's marker (as a proxy's auth subrequest arrives), whatever its
// method, path and token, and serves one with it; every answer names the
// mode.
func TestGuard(t *testing.T) {
	unmarked := []struct {
		name string
		edit func(*http.Request)
	}{
		{"no marker", func(*http.Request) {}},
		{"empty marker", func(r *http.Request) { r.Header.Set(loadgen.MarkerHeader, "") }},
		{"another header", func(r *http.Request) { r.Header.Set("X-Keygate-Bench", loadgen.Marker()) }},
		// A client behind a forward-auth proxy, which passes the client's
		// headers on to its authorizer, guessing the marker.
		{"a guessed marker", func(r *http.Request) { r.Header.Set(loadgen.MarkerHeader, "1") }},
		{"another run's marker", func(r *http.Request) {
			m := []byte(loadgen.Marker())
			m[0] ^= 1
			r.Header.Set(loadgen.MarkerHeader, string(m))
		}},
		{"the marker twice", func(r *http.Request) {
			r.Header[loadgen.MarkerHeader] = []string{loadgen.Marker(), loadgen.Marker()}
		}},
	}
	for mode, h := range everyHTTPMode(t) {
		for _, u := range unmarked {
			for _, method := range []string{"GET", "POST", "HEAD"} {
				r := httptest.NewRequest(method, "/admin/users", strings.NewReader("{}"))
				r.Header.Set("Authorization", "Bearer anything")
				u.edit(r)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != http.StatusForbidden || w.Header().Get(ServerHeader) != mode ||
					method != "HEAD" && !strings.Contains(w.Body.String(), "checks no token") {
					t.Errorf("%s, %s %s: %d %q %q, want 403 naming the mode", mode, u.name, method, w.Code, w.Header().Get(ServerHeader), w.Body)
				}
			}
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, benchRequest("GET", "/auth", nil))
		if w.Code == http.StatusForbidden || w.Header().Get(ServerHeader) != mode {
			t.Errorf("%s with the marker: %d %q, want served and named", mode, w.Code, w.Header().Get(ServerHeader))
		}
	}
}

// TestGRPCServerGuard: a reference gRPC server denies a Check without the
// generator's marker metadata (as Envoy's ext_authz client sends one,
// whatever headers the request asked about holds) with 403, allows one
// with it, names the mode in both answers, and its health service reports
// neither the overall server nor the Authorization service as serving.
func TestGRPCServerGuard(t *testing.T) {
	for _, mode := range GRPCModes {
		t.Run(mode, func(t *testing.T) {
			conn := startGRPC(t, mode)
			client := authv3.NewAuthorizationClient(conn)
			forged := &authv3.CheckRequest{Attributes: &authv3.AttributeContext{Request: &authv3.AttributeContext_Request{
				Http: &authv3.AttributeContext_HttpRequest{Method: "GET", Path: "/admin", Headers: map[string]string{"keygate-bench": "1"}}}}}
			resp, err := client.Check(t.Context(), forged)
			if d := resp.GetDeniedResponse(); err != nil || resp.GetStatus().GetCode() != int32(codes.PermissionDenied) ||
				d.GetStatus().GetCode() != 403 || !strings.Contains(d.GetBody(), "checks no token") || !namesMode(d.GetHeaders(), mode) {
				t.Errorf("Check without the marker: %v, %v; want denied 403 naming the mode", resp, err)
			}
			guessed := metadata.AppendToOutgoingContext(t.Context(), grpcload.MarkerKey, "1")
			if resp, err = client.Check(guessed, forged); err != nil || resp.GetDeniedResponse() == nil {
				t.Errorf("Check with a guessed marker: %v, %v; want denied", resp, err)
			}
			ctx := metadata.AppendToOutgoingContext(t.Context(), grpcload.MarkerKey, loadgen.Marker())
			resp, err = client.Check(ctx, forged)
			if err != nil || resp.GetStatus().GetCode() != 0 || !namesMode(resp.GetOkResponse().GetResponseHeadersToAdd(), mode) {
				t.Errorf("Check with the marker: %v, %v; want OK naming the mode", resp, err)
			}
			health := healthpb.NewHealthClient(conn)
			for service, want := range map[string]codes.Code{"": codes.OK, extauthz.ServiceName: codes.NotFound, ReadinessService: codes.OK} {
				hr, err := health.Check(t.Context(), &healthpb.HealthCheckRequest{Service: service})
				serving := hr.GetStatus() == healthpb.HealthCheckResponse_SERVING
				if status.Code(err) != want || serving != (service == ReadinessService) {
					t.Errorf("health of %q: %v, %v; only %s may be serving", service, hr, err, ReadinessService)
				}
			}
		})
	}
}

func namesMode(hs []*corev3.HeaderValueOption, mode string) bool {
	for _, h := range hs {
		if h.GetHeader().GetKey() == strings.ToLower(ServerHeader) && h.GetHeader().GetValue() == mode {
			return true
		}
	}
	return false
}

// startGRPC serves a reference gRPC server of mode until the test ends and
// returns a connection to it.
func startGRPC(t *testing.T, mode string) *grpc.ClientConn {
	t.Helper()
	srv, err := NewGRPCServer(mode)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeGRPC(ctx, ln, srv) }()
	conn, err := grpc.NewClient("passthrough:///"+ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("ServeGRPC: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("ServeGRPC did not return")
		}
	})
	return conn
}

// discardWriter is a ResponseWriter that keeps nothing but its header map,
// cleared between requests, so that the benchmark measures the handler.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}

// BenchmarkGuard: the noop handler bare and behind Guard (with the
// marker), and a reference gRPC Check bare and behind the marker's check:
// what the guard adds to the ceiling a reference server measures.
func BenchmarkGuard(b *testing.B) {
	bare, err := handler(ModeNoop)
	if err != nil {
		b.Fatal(err)
	}
	guarded, err := Handler(ModeNoop)
	if err != nil {
		b.Fatal(err)
	}
	r := benchRequest("GET", "/auth", nil)
	for name, h := range map[string]http.Handler{"http-bare": bare, "http-guarded": guarded} {
		b.Run(name, func(b *testing.B) {
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				h.ServeHTTP(w, r)
			}
		})
	}
	a := &referenceAuthz{}
	a.ok, a.denied = referenceAnswers(ModeGRPCNoop)
	marked := metadata.NewIncomingContext(context.Background(), metadata.Pairs(grpcload.MarkerKey, loadgen.Marker(),
		"content-type", "application/grpc", "user-agent", "grpc-go"))
	b.Run("grpc-marker-check", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !markedCall(marked) {
				b.Fatal("not marked")
			}
		}
	})
	b.Run("grpc-check", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if resp, _ := a.Check(marked, nil); resp != a.ok {
				b.Fatal("denied")
			}
		}
	})
}
