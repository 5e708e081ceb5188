package issuer

import (
	"context"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/keygate/keygate/internal/audit"
	"github.com/keygate/keygate/internal/audit/httpaudit"
	"github.com/keygate/keygate/internal/telemetry"
)

// Observer is told the outcome of every request to the token endpoints,
// for metrics: endpoint is "token", "revoke", "introspect" or "login";
// grant the grant type ("client_credentials", "refresh_token"; "password"
// for login; "" elsewhere, for a grant_type keygate does not take, so that
// clients cannot invent label values, and for a request refused before its
// grant type was read, such as by client authentication); result is
// "ok", "inactive"
// for an introspected token that is not active, or the OAuth error code
// answered ("invalid_client", "invalid_grant", "slow_down", ...).
// ctx is the request's, for a trace id as exemplar.
type Observer func(ctx context.Context, endpoint, grant, result string, elapsed time.Duration)

// outcome records what a handler answered, for the Observer.
type outcome struct {
	http.ResponseWriter
	status int
	grant  string
	result string // set by writeOAuthError and introspection
}

func (o *outcome) WriteHeader(code int) {
	if o.status == 0 {
		o.status = code
	}
	o.ResponseWriter.WriteHeader(code)
}

// Unwrap returns the writer o wraps, where httpaudit and httperr find the
// audit record's.
func (o *outcome) Unwrap() http.ResponseWriter { return o.ResponseWriter }

func (o *outcome) Write(b []byte) (int, error) {
	if o.status == 0 {
		o.status = http.StatusOK
	}
	return o.ResponseWriter.Write(b)
}

// observed reports h's outcomes to the Observer, if there is one, and
// traces each request with the Tracer, if there is one: a span named for
// the endpoint with the grant type, the result (an OAuth error code, never
// its description) and the status; store calls below it are its children.
func (s *Service) observed(endpoint, grant string, h http.HandlerFunc) http.HandlerFunc {
	if s.cfg.Observe == nil && s.cfg.Tracer == nil {
		return h
	}
	name := telemetry.SpanTokenPref + endpoint
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		var span trace.Span
		if s.cfg.Tracer != nil {
			var ctx context.Context
			ctx, span = s.cfg.Tracer.StartServer(r.Context(), name, r.Header)
			r = r.WithContext(ctx)
		}
		o := &outcome{ResponseWriter: w, grant: grant}
		h(o, r)
		result := o.result
		if result == "" {
			result = "ok"
			if o.status >= 400 {
				result = http.StatusText(o.status) // not reached by the handlers, which answer OAuth errors
			}
		}
		if span != nil && span.IsRecording() {
			span.SetAttributes(telemetry.AttrGrant.String(o.grant), telemetry.AttrResult.String(result),
				telemetry.AttrStatus.Int(o.status), telemetry.AttrMethod.String(r.Method))
			if o.status >= http.StatusInternalServerError {
				telemetry.Fail(span, result)
			}
		}
		if span != nil {
			span.End()
		}
		if s.cfg.Observe != nil {
			s.cfg.Observe(r.Context(), endpoint, o.grant, result, time.Since(start))
		}
	}
}

// noteGrant records the grant type of a token request, if keygate takes
// it, for the metrics and as the audit record's operation.
func noteGrant(w http.ResponseWriter, grant string) {
	if grant != "client_credentials" && grant != "refresh_token" {
		return
	}
	httpaudit.From(w).Op(audit.Operation("oauth2.token." + grant))
	if o, ok := w.(*outcome); ok {
		o.grant = grant
	}
}

// noteResult records a result other than the HTTP exchange shows.
func noteResult(w http.ResponseWriter, result string) {
	if o, ok := w.(*outcome); ok {
		o.result = result
	}
}

// unwrap returns the ResponseWriter net/http made, which MaxBytesReader
// needs to close the connection after an oversized body.
func unwrap(w http.ResponseWriter) http.ResponseWriter {
	if o, ok := w.(*outcome); ok {
		return o.ResponseWriter
	}
	return w
}
