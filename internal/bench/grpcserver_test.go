package bench

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func TestGRPCServer(t *testing.T) {
	for _, mode := range GRPCModes {
		t.Run(mode, func(t *testing.T) {
			srv, err := NewGRPCServer(mode)
			if err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- ServeGRPC(ctx, ln, srv) }()
			conn, err := grpc.NewClient("passthrough:///"+ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			for range 3 {
				resp, err := authv3.NewAuthorizationClient(conn).Check(t.Context(), &authv3.CheckRequest{})
				if err != nil || resp.GetStatus().GetCode() != 0 || resp.GetOkResponse() == nil {
					t.Fatalf("Check: %v, %v", resp, err)
				}
			}
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("ServeGRPC: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("ServeGRPC did not return")
			}
		})
	}
	if _, err := NewGRPCServer("grpc-nope"); err == nil || !strings.Contains(err.Error(), "grpc-noop") {
		t.Errorf("unknown mode: %v", err)
	}
}
