package bench

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net/http"

	"google.golang.org/grpc/metadata"

	"github.com/keygate/keygate/internal/bench/grpcload"
	"github.com/keygate/keygate/internal/bench/loadgen"
)

// A reference server checks no token, so that it measures the stack alone.
// Started where an authorizer was meant to be (the same port, a proxy's
// auth URL, Envoy's ext_authz cluster), it would allow every request. So
// it answers only requests that carry the marker keygate's load generators
// send (loadgen.MarkerHeader; in gRPC, grpcload.MarkerKey metadata, which
// no ext_authz client forwards from the request it asks about), refuses the
// others, and names itself on every answer.
const (
	// ServerHeader names the mode on every HTTP answer, and on every
	// Check's answer as a header for the client.
	ServerHeader = "Keygate-Bench-Server"
	// ReadinessService is the grpc.health.v1 service a reference gRPC
	// server reports SERVING; it reports neither the overall "" nor
	// envoy.service.auth.v3.Authorization, so that no health check takes
	// it for an authorizer.
	ReadinessService = "keygate.bench.Reference"
)

// refusal is the body of a refused request.
func refusal(mode string) string {
	return fmt.Sprintf("keygate bench server (mode %s) is a benchmark reference that checks no token: "+
		"it answers only the requests of the load run it was started for and refuses all others\n", mode)
}

// Guard serves h only to requests that carry this process's marker
// (loadgen.Marker) and refuses the others 403, naming mode in ServerHeader
// on every answer. Every HTTP handler of this package is served behind it.
func Guard(mode string, h http.Handler) http.Handler {
	name, body := []string{mode}, refusal(mode)
	marker := []byte(loadgen.Marker())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()[ServerHeader] = name // never changed: shared by every answer
		if v := r.Header[loadgen.MarkerHeader]; len(v) != 1 || !sameMarker(v[0], marker) {
			http.Error(w, body, http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// markedCall reports whether a gRPC call carries this process's marker.
func markedCall(ctx context.Context) bool {
	v := metadata.ValueFromIncomingContext(ctx, grpcload.MarkerKey)
	return len(v) == 1 && sameMarker(v[0], []byte(loadgen.Marker()))
}

// sameMarker compares a request's marker with the run's in constant time:
// the marker is the run's one secret.
func sameMarker(got string, want []byte) bool {
	return len(got) == len(want) && subtle.ConstantTimeCompare([]byte(got), want) == 1
}
