package server

import (
	"crypto/tls"
	"slices"
	"strings"

	"github.com/keygate/keygate/internal/gateway"
	"github.com/keygate/keygate/internal/gateway/extauthz"
)

// Envoy's external authorization.
//
// With envoy_grpc_listen set, a gRPC listener serves
// envoy.service.auth.v3.Authorization (package extauthz), deciding with
// the forward_auth rules and cookie, the runtime's pipeline and cache and
// the claim headers of the configuration in force (a reload swaps them as
// it swaps forward-auth's), counted in keygate_decisions_total under the
// front end envoy_grpc. With the tls section set it serves TLS with the
// traffic listener's certificate (followed like it), otherwise plaintext
// HTTP/2. grpc.health.v1 reports SERVING while /readyz would answer 200,
// checked at every WatchInterval; reflection is served only with
// envoy_grpc_reflection (read at start).

// ListenerEnvoyGRPC names the Envoy gRPC listener in logs.
const ListenerEnvoyGRPC = "envoy_grpc"

// envoyReasons are decisionReasons without the forwarding-header ones,
// which ext_authz never reads.
var envoyReasons = slices.DeleteFunc(slices.Clone(decisionReasons), func(r string) bool {
	return strings.HasPrefix(r, "forwarded_header_")
})

// envoyDecider is the runtime's decider for ext_authz.
func (s *Server) envoyDecider(rt *runtime) (*gateway.Decider, error) {
	cfg := rt.cfg
	return gateway.NewDecider(gateway.DeciderConfig{Verifier: rt.pipeline, Routes: gatewayRoutes(cfg.ForwardAuth.Rules),
		Cookie: cfg.ForwardAuth.Cookie, Headers: ClaimHeaders(cfg), Metrics: s.obs.envoyMetrics, Logger: s.log, AccessLog: s.obs.access, Tracer: s.obs.tracer})
}

// envoyServer builds the gRPC server of the Envoy listener.
func (s *Server) envoyServer() *extauthz.Server {
	svc := extauthz.New(extauthz.Config{Decider: func() *gateway.Decider { return s.rt.Load().envoy },
		Metrics: s.obs.envoyMetrics, Logger: s.log, Tracer: s.obs.tracer})
	var tc *tls.Config
	if s.tls.traffic != nil {
		tc = s.tls.traffic.ServerConfig()
	}
	srv := extauthz.NewServer(svc, extauthz.ServerOptions{TLS: tc, Reflection: s.rt.Load().cfg.EnvoyGRPCReflection})
	srv.SetReady(len(s.notReady()) == 0)
	return srv
}

// pollHealth sets the Envoy listener's gRPC health to the node's readiness.
func (s *Server) pollHealth() {
	if g := s.fronts.grpc.Load(); g != nil {
		g.SetReady(len(s.notReady()) == 0)
	}
}
