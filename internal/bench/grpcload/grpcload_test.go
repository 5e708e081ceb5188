package grpcload

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/keygate/keygate/internal/bench/loadgen"
)

// authz is an in-test ext_authz server: a token starting "ok" is allowed,
// "deny" gets 401, "forbid" a denial without an HTTP status (403), "fail"
// a gRPC error; a token starting "slow" is allowed after 50 ms. It records
// every request it got, and those not as Envoy builds them or without the
// benchmark marker's metadata.
type authz struct {
	authv3.UnimplementedAuthorizationServer
	mu     sync.Mutex
	tokens map[string]int
	bad    []string // requests not as Envoy builds them
}

func (a *authz) Check(ctx context.Context, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	hr := req.GetAttributes().GetRequest().GetHttp()
	h := hr.GetHeaders()
	auth := h["authorization"]
	a.mu.Lock()
	a.tokens[auth]++
	if marker := metadata.ValueFromIncomingContext(ctx, MarkerKey); len(marker) != 1 || marker[0] != loadgen.Marker() ||
		hr.GetMethod() != "POST" || hr.GetPath() != "/orders/42?x=1" || hr.GetHost() != "api.example.com" ||
		h[":method"] != "POST" || h[":path"] != "/orders/42?x=1" || h[":authority"] != "api.example.com" ||
		h["x-tenant"] != "acme,beta" || req.GetAttributes().GetSource().GetAddress().GetSocketAddress().GetAddress() == "" {
		a.bad = append(a.bad, prototext.Format(req))
	}
	a.mu.Unlock()
	tok := strings.TrimPrefix(auth, "Bearer ")
	switch {
	case strings.HasPrefix(tok, "ok"):
		return &authv3.CheckResponse{Status: &rpcstatus.Status{},
			HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: &authv3.OkHttpResponse{}}}, nil
	case strings.HasPrefix(tok, "slow"):
		time.Sleep(50 * time.Millisecond)
		return &authv3.CheckResponse{Status: &rpcstatus.Status{}}, nil
	case strings.HasPrefix(tok, "deny"):
		return &authv3.CheckResponse{Status: &rpcstatus.Status{Code: int32(codes.Unauthenticated)},
			HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
				Status: &typev3.HttpStatus{Code: typev3.StatusCode_Unauthorized}, Body: "no"}}}, nil
	case strings.HasPrefix(tok, "forbid"):
		return &authv3.CheckResponse{Status: &rpcstatus.Status{Code: int32(codes.PermissionDenied)}}, nil
	}
	return nil, status.Error(codes.Internal, "boom")
}

func (a *authz) seen() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	m := map[string]int{}
	for k, v := range a.tokens {
		m[k] = v
	}
	return m
}

func serve(t *testing.T) (*authz, string) {
	t.Helper()
	a := &authz{tokens: map[string]int{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	authv3.RegisterAuthorizationServer(s, a)
	done := make(chan struct{})
	go func() { defer close(done); s.Serve(ln) }()
	t.Cleanup(func() { s.Stop(); <-done })
	return a, ln.Addr().String()
}

var req = Request{Method: "POST", Host: "api.example.com", Path: "/orders/42?x=1",
	Header: []loadgen.Header{{Name: "X-Tenant", Value: "acme"}, {Name: "x-tenant", Value: "beta"}}}

func TestRunVerdictsAndPool(t *testing.T) {
	a, addr := serve(t)
	tokens := []string{"ok-1", "ok-22", "deny-1", "forbid-1", "fail-1"}
	res, err := Run(t.Context(), Config{Target: addr, Request: req, Tokens: tokens, Connections: 2, Streams: 3,
		Requests: 500, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// 100 of each: 200 allowed, 200 denied (401 and 403), 100 gRPC errors.
	if res.Requests != 400 || res.Status.S2xx != 200 || res.Status.S4xx != 200 || res.Status.Non2xx() != 200 {
		t.Errorf("requests %d, status %+v: want 400 answers, 200 2xx, 200 4xx", res.Requests, res.Status)
	}
	if res.Errors.Total() != 100 || res.Errors.Read != 100 {
		t.Errorf("errors %+v: want 100 read errors (gRPC INTERNAL)", res.Errors)
	}
	got := a.seen()
	for _, tok := range tokens {
		if got["Bearer "+tok] != 100 {
			t.Errorf("token %s sent %d times, want 100 (each in turn): %v", tok, got["Bearer "+tok], got)
		}
	}
	if len(a.bad) > 0 {
		t.Errorf("%d requests not as Envoy builds them, e.g. %s", len(a.bad), a.bad[0])
	}
	if res.Connections != 2 || res.Mode != loadgen.ModeClosed || res.Latency.P50 <= 0 || res.Hist.Count() != 400 {
		t.Errorf("result %+v", res)
	}
	// The printers take the result as it is.
	var sb strings.Builder
	rep := loadgen.NewReport(loadgen.Config{Request: loadgen.Request{URL: "http://" + addr + "/"}}, []*loadgen.Result{res})
	if err := rep.WriteTable(&sb); err != nil || !strings.Contains(sb.String(), "4xx 200") {
		t.Errorf("table (%v):\n%s", err, sb.String())
	}
}

func TestRunWarmupExcluded(t *testing.T) {
	a, addr := serve(t)
	res, err := Run(t.Context(), Config{Target: addr, Request: req, Tokens: []string{"ok"}, Connections: 1, Streams: 2,
		Warmup: 200 * time.Millisecond, Duration: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	served := int64(a.seen()["Bearer ok"])
	if res.Requests == 0 || res.Requests >= served || res.Errors.Total() != 0 || res.Status.S2xx != res.Requests {
		t.Errorf("measured %d of %d served (status %+v, errors %+v): the warm-up must be sent and left out",
			res.Requests, served, res.Status, res.Errors)
	}
	if res.Seconds < 0.15 || res.Seconds > 0.3 {
		t.Errorf("measured window %.3f s, want about 0.2", res.Seconds)
	}
}

func TestRunOpenLoopAndTimeout(t *testing.T) {
	_, addr := serve(t)
	start := time.Now()
	res, err := Run(t.Context(), Config{Target: addr, Request: req, Tokens: []string{"ok"}, Connections: 2, Rate: 400,
		Requests: 40})
	if err != nil {
		t.Fatal(err)
	}
	if res.Mode != loadgen.ModeOpen || res.TargetRate != 400 || res.Requests != 40 || time.Since(start) < 80*time.Millisecond {
		t.Errorf("40 requests at 400/s: result %+v in %v", res, time.Since(start))
	}

	res, err = Run(t.Context(), Config{Target: addr, Request: req, Tokens: []string{"slow"}, Connections: 1,
		Requests: 3, Timeout: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors.Timeout != 3 || res.Requests != 0 {
		t.Errorf("errors %+v, %d answers: want 3 timeouts", res.Errors, res.Requests)
	}
}

func TestRunNoServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	res, err := Run(t.Context(), Config{Target: addr, Connections: 1, Duration: 100 * time.Millisecond, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 0 || res.Errors.Connect == 0 || res.Errors.Total() != res.Errors.Connect {
		t.Errorf("errors %+v, %d answers: want connect errors only", res.Errors, res.Requests)
	}
}

func TestConfigRefused(t *testing.T) {
	for _, tt := range []struct {
		cfg  Config
		want string
	}{
		{Config{Connections: 1, Requests: 1}, "target"},
		{Config{Target: "nohost", Connections: 1, Requests: 1}, "host:port"},
		{Config{Target: "127.0.0.1:1", Requests: 1}, "connections"},
		{Config{Target: "127.0.0.1:1", Connections: 1}, "duration"},
		{Config{Target: "127.0.0.1:1", Connections: 1, Requests: 1, Streams: -1}, "streams"},
		{Config{Target: "127.0.0.1:1", Connections: 1, Requests: 1, Tokens: []string{"a\nb"}}, "token 0"},
		{Config{Target: "127.0.0.1:1", Connections: 1, Requests: 1, Tokens: []string{"ok", "\xff"}}, "token 1"},
	} {
		if _, err := Run(context.Background(), tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Run(%+v) = %v, want an error about %s", tt.cfg, err, tt.want)
		}
	}
}

// TestMessages: each request is the CheckRequest marshalled with its own
// token, whatever the tokens' lengths.
func TestMessages(t *testing.T) {
	tokens := []string{"abc", "defgh", "xyz", "a.b.c-_"}
	m, err := newMessages(&req, tokens)
	if err != nil {
		t.Fatal(err)
	}
	var buf []byte
	for i, tok := range tokens {
		buf = m.build(buf, i)
		var got authv3.CheckRequest
		if err := proto.Unmarshal(buf, &got); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(&got, CheckRequest(&req, tok)) {
			t.Errorf("request %d:\n%v\nwant\n%v", i, &got, CheckRequest(&req, tok))
		}
	}
}

func TestParseVerdict(t *testing.T) {
	for _, tt := range []struct {
		resp *authv3.CheckResponse
		want int
	}{
		{&authv3.CheckResponse{}, 200},
		{&authv3.CheckResponse{Status: &rpcstatus.Status{Code: int32(codes.PermissionDenied)}}, 403},
		{&authv3.CheckResponse{Status: &rpcstatus.Status{}, HttpResponse: &authv3.CheckResponse_OkResponse{
			OkResponse: &authv3.OkHttpResponse{HeadersToRemove: []string{"x"}}}}, 200},
		{&authv3.CheckResponse{Status: &rpcstatus.Status{Code: 16}, HttpResponse: &authv3.CheckResponse_DeniedResponse{
			DeniedResponse: &authv3.DeniedHttpResponse{Status: &typev3.HttpStatus{Code: 401}, Body: "x"}}}, 401},
		{&authv3.CheckResponse{Status: &rpcstatus.Status{Code: 14}, HttpResponse: &authv3.CheckResponse_DeniedResponse{
			DeniedResponse: &authv3.DeniedHttpResponse{Status: &typev3.HttpStatus{Code: 503}}}}, 503},
		{&authv3.CheckResponse{Status: &rpcstatus.Status{Code: 7}, HttpResponse: &authv3.CheckResponse_DeniedResponse{
			DeniedResponse: &authv3.DeniedHttpResponse{}}}, 403},
	} {
		b, err := proto.Marshal(tt.resp)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := parseVerdict(b); err != nil || got != tt.want {
			t.Errorf("parseVerdict(%v) = %d, %v; want %d", tt.resp, got, err, tt.want)
		}
	}
	if _, err := parseVerdict([]byte{0x0a, 0x05, 0x01}); err == nil {
		t.Error("a truncated answer parsed")
	}
}
