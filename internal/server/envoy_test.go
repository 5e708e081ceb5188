package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/gateway/extauthz"
	"github.com/keygate/keygate/internal/mint"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/telemetry"
	"github.com/keygate/keygate/internal/testnet"
)

// envoyCheck is the CheckRequest Envoy sends for a GET of path with the
// given authorization header ("" for none).
func envoyCheck(path, authorization string) *authv3.CheckRequest {
	hs := map[string]string{":method": "GET", ":path": path, ":authority": "api.example.com", ":scheme": "https",
		"x-forwarded-uri": "/public", "x-auth-subject": "mallory"}
	if authorization != "" {
		hs["authorization"] = authorization
	}
	return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Source: &authv3.AttributeContext_Peer{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
			SocketAddress: &corev3.SocketAddress{Address: "203.0.113.7", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 40000}}}}},
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Method: "GET", Path: path, Host: "api.example.com", Scheme: "https", Protocol: "HTTP/2", Headers: hs}},
	}}
}

// TestEnvoyGRPCListener: with envoy_grpc_listen and tls set, the Envoy
// listener serves ext_authz over TLS with the traffic listener's
// certificate, and grpc.health.v1; it decides with the forward_auth rules
// in force (a reload swaps them) and counts under envoy_grpc; shutdown
// drains it.
func TestEnvoyGRPCListener(t *testing.T) {
	dir := t.TempDir()
	ca := testnet.NewCA(t, "keygate test CA")
	certFile, keyFile := ca.Issue(t, testnet.LeafOptions{Hosts: []string{"localhost", "127.0.0.1"}}).Write(t, dir, "traffic")
	path := filepath.Join(dir, "keygate.yaml")
	write := func(rules string) {
		yaml := fmt.Sprintf("tls: {cert_file: %s, key_file: %s}\nenvoy_grpc_listen: 127.0.0.1:0\nforward_auth:\n  rules:\n%s", certFile, keyFile, rules)
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("    - {path_prefix: /}\n")
	cfg, err := config.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	m := telemetry.New()
	s, err := New(context.Background(), Config{Gateway: cfg, ConfigPath: path, Metrics: m,
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Node:   &node.Config{DataDir: filepath.Join(dir, "data"), Issuer: testIssuer, Audience: testAudience}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var ls Listeners
	for _, l := range []*net.Listener{&ls.Traffic, &ls.EnvoyGRPC} {
		if *l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	addr := ls.EnvoyGRPC.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.ServeListeners(ctx, ls) }()

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: ca.Pool()})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := authv3.NewAuthorizationClient(conn)
	tok, err := s.Node().Mint(mint.Claims{Subject: "alice", Audience: []string{testAudience}, Scope: "read", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	check := func(path, auth string) (int, *authv3.CheckResponse) {
		t.Helper()
		resp, err := client.Check(t.Context(), envoyCheck(path, auth))
		if err != nil {
			t.Fatalf("Check %s: %v", path, err)
		}
		if d := resp.GetDeniedResponse(); d != nil {
			return int(d.GetStatus().GetCode()), resp
		}
		return 200, resp
	}
	if code, resp := check("/admin/x?y=1", "Bearer "+tok); code != 200 {
		t.Errorf("valid token: %d %v", code, resp)
	} else {
		set := map[string]string{}
		for _, h := range resp.GetOkResponse().GetHeaders() {
			set[h.GetHeader().GetKey()] = h.GetHeader().GetValue()
		}
		if set["x-auth-subject"] != "alice" || set["x-auth-scopes"] != "read" || set["x-auth-issuer"] != testIssuer {
			t.Errorf("claim headers %v", set)
		}
	}
	if code, _ := check("/admin/x", ""); code != 401 {
		t.Errorf("no token: %d", code)
	}
	hc := healthpb.NewHealthClient(conn)
	if resp, err := hc.Check(t.Context(), &healthpb.HealthCheckRequest{Service: extauthz.ServiceName}); err != nil ||
		resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health: %v %v", resp, err)
	}
	// Plaintext gRPC to the TLS listener is refused.
	plain, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	pctx, pcancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer pcancel()
	if _, err := authv3.NewAuthorizationClient(plain).Check(pctx, envoyCheck("/x", "")); err == nil {
		t.Error("a plaintext client was answered on a TLS listener")
	}

	// A reload that scopes /admin is in force for the next check.
	write("    - {path_prefix: /admin, scopes: [admin]}\n    - {path_prefix: /}\n")
	if err := s.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if code, _ := check("/admin/x", "Bearer "+tok); code != 403 {
		t.Errorf("after the reload, a token without scope admin: %d", code)
	}
	if code, _ := check("/orders", "Bearer "+tok); code != 200 {
		t.Errorf("after the reload, /orders: %d", code)
	}
	// The listener itself is read at start: a reload that changes it warns.
	write("    - {path_prefix: /}\nenvoy_grpc_reflection: true\n")
	if err := s.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "envoy_grpc_listen or envoy_grpc_reflection changed") {
		t.Errorf("no warning for a changed envoy_grpc_reflection:\n%s", logs)
	}

	cancel()
	if err := <-done; err != nil {
		t.Errorf("ServeListeners: %v", err)
	}
	if !strings.Contains(logs.String(), "envoy_grpc="+addr) || !strings.Contains(logs.String(), "envoy_grpc_tls=on") {
		t.Errorf("the listener is not logged:\n%s", logs)
	}
	got, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]float64{`keygate_decisions_total{frontend="envoy_grpc",reason="",result="allow"}`: 2,
		`keygate_decisions_total{frontend="envoy_grpc",reason="missing_token",result="deny"}`:      1,
		`keygate_decisions_total{frontend="envoy_grpc",reason="insufficient_scope",result="deny"}`: 1,
		`keygate_decisions_total{frontend="forward_auth",reason="",result="allow"}`:                0} {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if _, ok := got[`keygate_decisions_total{frontend="envoy_grpc",reason="forwarded_header_missing",result="deny"}`]; ok {
		t.Error("envoy_grpc counts forwarding-header reasons it never reads")
	}
}

// TestEnvoyGRPCHealthFollowsReadiness: grpc.health.v1 on the Envoy
// listener answers NOT_SERVING while /readyz would answer 503 (here an
// issuer whose JWKS cannot be fetched yet), and SERVING once the node is
// ready, found by the watcher's poll.
func TestEnvoyGRPCHealthFollowsReadiness(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: waits for the watcher's poll to find the node ready; run without -short")
	}
	jwks := oneKeyJWKS(t)
	var up atomic.Bool
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(jwks)
	}))
	defer idp.Close()
	cfg := &config.Config{EnvoyGRPCListen: "127.0.0.1:0", Issuers: []config.Issuer{{Issuer: "https://idp.test/", JWKSURL: idp.URL + "/jwks",
		Algorithms: []string{"ES256"}, JWKS: config.JWKS{Timeout: time.Second, MinRefresh: 100 * time.Millisecond, RefetchInterval: 100 * time.Millisecond}}}}
	cfg.SetDefaults()
	s, err := New(context.Background(), Config{Gateway: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var ls Listeners
	for _, l := range []*net.Listener{&ls.Traffic, &ls.EnvoyGRPC} {
		if *l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.ServeListeners(ctx, ls) }()
	defer func() { cancel(); <-done }()
	conn, err := grpc.NewClient(ls.EnvoyGRPC.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	health := func() healthpb.HealthCheckResponse_ServingStatus {
		resp, err := hc.Check(t.Context(), &healthpb.HealthCheckRequest{Service: extauthz.ServiceName})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetStatus()
	}
	if got := health(); got != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health with an issuer without keys: %v", got)
	}
	up.Store(true)
	deadline := time.Now().Add(20 * time.Second)
	for health() != healthpb.HealthCheckResponse_SERVING {
		if time.Now().After(deadline) {
			t.Fatalf("health still NOT_SERVING once the keys are there (not ready: %v)", s.notReady())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
