package extauthz

import (
	"crypto/tls"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
)

// ServiceName is the gRPC service Envoy calls, also the name its health
// is reported under.
const ServiceName = "envoy.service.auth.v3.Authorization"

// ServerOptions configure the gRPC server of NewServer.
type ServerOptions struct {
	// TLS, if set, serves gRPC over TLS with it (ALPN h2); otherwise
	// over plaintext HTTP/2 (h2c with prior knowledge, as Envoy's
	// http2_protocol_options cluster speaks it).
	TLS *tls.Config
	// Reflection registers the gRPC reflection service (grpcurl, grpcui);
	// off by default: it tells anyone who can connect what is served.
	Reflection bool
}

// Server is the gRPC server Envoy calls: the Authorization service and
// grpc.health.v1, whose status SetReady sets.
type Server struct {
	*grpc.Server
	health *health.Server
}

// Timeouts and limits of the gRPC server's connections.
const (
	// ConnectionTimeout bounds a new connection's TLS and HTTP/2
	// handshakes, as the HTTP listeners' ReadHeaderTimeout bounds a
	// request's start.
	ConnectionTimeout = 5 * time.Second
	// MaxConnectionIdle closes a connection that has carried no call for
	// this long (Envoy opens a new one when it needs it).
	MaxConnectionIdle = 120 * time.Second
	// MinPingInterval is the most often a client may send keepalive
	// pings; one that pings more often is disconnected. Envoy's
	// connection_keepalive, when configured, should ping less often.
	MinPingInterval = 10 * time.Second
)

// NewServer returns the gRPC server for svc: at most MaxRecvMsgSize per
// message, the health service (not serving until SetReady(true)), and
// reflection if asked for. Serve it with Serve; stop it with GracefulStop
// or Stop.
func NewServer(svc *Service, o ServerOptions) *Server {
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(MaxRecvMsgSize),
		grpc.MaxHeaderListSize(MaxHeaderBytes),
		grpc.ConnectionTimeout(ConnectionTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: MaxConnectionIdle}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: MinPingInterval, PermitWithoutStream: true}),
	}
	if o.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(o.TLS)))
	}
	s := &Server{Server: grpc.NewServer(opts...), health: health.NewServer()}
	authv3.RegisterAuthorizationServer(s.Server, svc)
	healthpb.RegisterHealthServer(s.Server, s.health)
	s.SetReady(false)
	if o.Reflection {
		reflection.Register(s.Server)
	}
	return s
}

// SetReady reports the server, and the Authorization service, as serving
// or not in grpc.health.v1.
func (s *Server) SetReady(ready bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if ready {
		st = healthpb.HealthCheckResponse_SERVING
	}
	s.health.SetServingStatus("", st)
	s.health.SetServingStatus(ServiceName, st)
}

// GracefulStop reports NOT_SERVING to health watchers, then stops
// accepting connections and waits for the calls in flight.
func (s *Server) GracefulStop() {
	s.health.Shutdown()
	s.Server.GracefulStop()
}

// Stop reports NOT_SERVING and closes every connection at once.
func (s *Server) Stop() {
	s.health.Shutdown()
	s.Server.Stop()
}
