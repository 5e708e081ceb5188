package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/keygate/keygate/internal/gateway/extauthz"
)

// Modes of the reference gRPC servers an ext_authz load test compares
// keygate's --envoy-grpc-listen with: envoy.service.auth.v3.Authorization
// on the same grpc-go settings as keygate's (GRPCServerOptions).
const (
	// ModeGRPCNoop answers every Check of keygate's load generator with
	// OK (an OkHttpResponse naming the mode) without looking at the
	// request: the ceiling of the gRPC stack alone (which still decodes
	// each CheckRequest). A Check without the generator's marker is
	// denied (see Guard).
	ModeGRPCNoop = "grpc-noop"
	// ModeGRPCES256 does one raw ES256 verification (see RawES256) per
	// Check, then answers like ModeGRPCNoop: the ceiling of an
	// authoriser whose only work per request is the signature check.
	ModeGRPCES256 = "grpc-es256"
	// ModeGRPCES256Table is ModeGRPCES256 verifying as keygate does, with
	// the key's table (see ModeES256Table).
	ModeGRPCES256Table = "grpc-es256-table"
)

// GRPCModes lists the reference gRPC server modes.
var GRPCModes = []string{ModeGRPCNoop, ModeGRPCES256, ModeGRPCES256Table}

// GRPCServerOptions are the grpc-go settings of keygate's ext_authz
// listener (extauthz.NewServer, plaintext): the message and header limits,
// the connection timeout and the keepalive policy.
func GRPCServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(extauthz.MaxRecvMsgSize),
		grpc.MaxHeaderListSize(extauthz.MaxHeaderBytes),
		grpc.ConnectionTimeout(extauthz.ConnectionTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: extauthz.MaxConnectionIdle}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: extauthz.MinPingInterval, PermitWithoutStream: true}),
	}
}

// referenceAuthz is the Authorization service of a reference server.
type referenceAuthz struct {
	authv3.UnimplementedAuthorizationServer
	raw        *RawES256 // nil: no verification
	ok, denied *authv3.CheckResponse
}

// Check allows a Check that carries grpcload's marker (see Guard) and
// denies every other.
func (a *referenceAuthz) Check(ctx context.Context, _ *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	if !markedCall(ctx) {
		return a.denied, nil
	}
	if a.raw != nil && !a.raw.Verify() {
		return nil, status.Error(codes.Internal, "raw ES256 verification failed")
	}
	return a.ok, nil // never changed: safe to marshal from every call
}

// referenceAnswers are a reference server's two answers, each naming the
// mode in ServerHeader for the client.
func referenceAnswers(mode string) (ok, denied *authv3.CheckResponse) {
	named := []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: strings.ToLower(ServerHeader), Value: mode}}}
	ok = &authv3.CheckResponse{Status: &rpcstatus.Status{Code: int32(codes.OK)},
		HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: &authv3.OkHttpResponse{ResponseHeadersToAdd: named}}}
	denied = &authv3.CheckResponse{Status: &rpcstatus.Status{Code: int32(codes.PermissionDenied)},
		HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
			Status: &typev3.HttpStatus{Code: typev3.StatusCode_Forbidden}, Headers: named, Body: refusal(mode)}}}
	return ok, denied
}

// NewGRPCServer returns the reference gRPC server of mode: the
// Authorization service, on the settings of keygate's ext_authz listener,
// and grpc.health.v1 reporting ReadinessService alone as serving.
func NewGRPCServer(mode string) (*grpc.Server, error) {
	a := &referenceAuthz{}
	a.ok, a.denied = referenceAnswers(mode)
	switch mode {
	case ModeGRPCNoop:
	case ModeGRPCES256, ModeGRPCES256Table:
		raw, err := newRawES256Mode(mode)
		if err != nil {
			return nil, err
		}
		a.raw = raw
	default:
		return nil, fmt.Errorf("unknown gRPC server mode %q (one of %s)", mode, strings.Join(GRPCModes, ", "))
	}
	s := grpc.NewServer(GRPCServerOptions()...)
	authv3.RegisterAuthorizationServer(s, a)
	h := health.NewServer()
	h.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	h.SetServingStatus(ReadinessService, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(s, h)
	return s, nil
}

// ServeGRPC serves s on ln until ctx is done, then stops it gracefully
// (at once after ShutdownTimeout).
func ServeGRPC(ctx context.Context, ln net.Listener, s *grpc.Server) error {
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve gRPC: %w", err)
	case <-ctx.Done():
	}
	stopped := make(chan struct{})
	go func() { s.GracefulStop(); close(stopped) }()
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	select {
	case <-stopped:
	case <-sctx.Done():
		s.Stop()
		<-stopped
	}
	if err := <-errc; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}
