package bench

import (
	"strings"
	"testing"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc/metadata"

	"github.com/keygate/keygate/internal/bench/grpcload"
	"github.com/keygate/keygate/internal/bench/loadgen"
)

func TestGRPCServer(t *testing.T) {
	for _, mode := range GRPCModes {
		t.Run(mode, func(t *testing.T) {
			client := authv3.NewAuthorizationClient(startGRPC(t, mode))
			ctx := metadata.AppendToOutgoingContext(t.Context(), grpcload.MarkerKey, loadgen.Marker())
			for range 3 {
				resp, err := client.Check(ctx, &authv3.CheckRequest{})
				if err != nil || resp.GetStatus().GetCode() != 0 || resp.GetOkResponse() == nil {
					t.Fatalf("Check: %v, %v", resp, err)
				}
			}
		})
	}
	if _, err := NewGRPCServer("grpc-nope"); err == nil || !strings.Contains(err.Error(), "grpc-noop") {
		t.Errorf("unknown mode: %v", err)
	}
}
