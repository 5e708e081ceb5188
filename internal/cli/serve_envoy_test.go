package cli

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/keygate/keygate/internal/testnet"
)

// TestServeEnvoyGRPC: --envoy-grpc-listen serves Envoy's ext_authz over
// plaintext gRPC on a real TCP listener: the dev node's sample token is
// allowed with its claim headers, a request without one gets the 401
// challenge, grpc.health.v1 answers SERVING, reflection is off unless
// envoy_grpc_reflection (KEYGATE_ENVOY_GRPC_REFLECTION), the decisions
// count under envoy_grpc, and serve stops cleanly. A bad address is
// refused before anything listens, as a usage error naming the flag.
func TestServeEnvoyGRPC(t *testing.T) {
	h := newHarness(t)
	expect(t, h.run("serve", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--data-dir", h.path("bad"),
		"--envoy-grpc-listen", "9001"), ExitUsage, "", "--envoy-grpc-listen (envoy_grpc_listen): not a host:port")
	for _, reflection := range []bool{false, true} {
		addr := testnet.ClosedAddr(t)
		h.env = nil
		if reflection {
			h.env = []string{"KEYGATE_ENVOY_GRPC_REFLECTION=true"}
		}
		s := h.serve("--listen", "127.0.0.1:0", "--dev", "--data-dir", h.path("data"), "--envoy-grpc-listen", addr)
		admin := s.adminURL(t)
		var token string
		for deadline := time.Now().Add(3 * time.Second); token == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if m := tokenLine.FindStringSubmatch(s.stdout.String()); m != nil {
				token = m[1]
			}
		}
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		client := authv3.NewAuthorizationClient(conn)
		req := func(auth string) *authv3.CheckRequest {
			hs := map[string]string{":method": "GET", ":path": "/orders?x=1", ":authority": "app.local", "x-auth-subject": "mallory"}
			if auth != "" {
				hs["authorization"] = auth
			}
			return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{Request: &authv3.AttributeContext_Request{
				Http: &authv3.AttributeContext_HttpRequest{Method: "GET", Path: "/orders?x=1", Host: "app.local", Scheme: "http",
					Protocol: "HTTP/1.1", Headers: hs}}}}
		}
		if token == "" && !reflection {
			t.Errorf("no sample token printed on the first start:\n%s", s.stdout)
		}
		if token != "" { // printed on the first start only
			resp, err := client.Check(t.Context(), req("Bearer "+token))
			subject := ""
			for _, h := range resp.GetOkResponse().GetHeaders() {
				if h.GetHeader().GetKey() == "x-auth-subject" {
					subject = h.GetHeader().GetValue()
				}
			}
			if err != nil || subject != "demo" {
				t.Errorf("sample token: %v %v", resp, err)
			}
		}
		resp, err := client.Check(t.Context(), req(""))
		if err != nil || resp.GetDeniedResponse().GetStatus().GetCode() != 401 {
			t.Errorf("no token: %v %v", resp, err)
		}
		if hr, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil ||
			hr.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health: %v %v", hr, err)
		}
		stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(t.Context())
		if err == nil {
			stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})
			_, err = stream.Recv()
		}
		if got := status.Code(err); reflection && got != codes.OK || !reflection && got != codes.Unimplemented {
			t.Errorf("reflection %v: %v", reflection, err)
		}
		mresp, err := http.Get(admin + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(mresp.Body)
		mresp.Body.Close()
		if !strings.Contains(string(body), `keygate_decisions_total{frontend="envoy_grpc",reason="missing_token",result="deny"} 1`) {
			t.Errorf("metrics lack the envoy_grpc decision")
		}
		conn.Close()
		if code := s.stop(); code != ExitOK {
			t.Fatalf("exit %d\n%s", code, s.stderr)
		}
		if !strings.Contains(s.stderr.String(), "envoy_grpc="+addr) {
			t.Errorf("the listener is not logged:\n%s", s.stderr)
		}
	}
}
