package middleware

import (
	"context"
	"net/http"
)

// Check decides on a request without a framework: it takes the bearer token
// from h (exactly one Authorization header with the Bearer scheme; nothing
// else in h is read), verifies it, and demands every scope in scopes. It is
// the decision Handler and Require take, so that an adapter for another
// framework that writes the Outcome's Status, Header and Body answers
// exactly as they do.
func (m *Middleware) Check(ctx context.Context, h http.Header, scopes ...string) Outcome {
	dec := m.decider.Authorize(ctx, h, scopes)
	if dec.Allowed() {
		return Outcome{Status: http.StatusOK, Identity: dec.Result}
	}
	return Outcome{Status: dec.Status, Error: dec.Error, Description: dec.Description, Reason: dec.Reason,
		Challenge: dec.Challenge}
}

// Outcome is Check's answer: a request to let through with its Identity,
// or a refusal to write as it stands.
type Outcome struct {
	// Status is 200 for a request to let through; 401 for a missing or
	// invalid token or a malformed Authorization header, 403 for a valid
	// token short of a scope, 503 when verification itself failed (no
	// verdict on the token: the client went away or a key source failed).
	Status int
	// Identity is the verified token of a request to let through.
	Identity *Identity
	// Error is the RFC 6750 error code of a refusal: "invalid_request",
	// "invalid_token", "insufficient_scope", "unauthorized" when there is
	// no bearer token, "temporarily_unavailable" on a 503.
	Error string
	// Description is the error_description: a reason name or a fixed
	// sentence, never the token or internal detail.
	Description string
	// Reason names the refusal for machines and logs ("missing_token",
	// "expired", "wrong_audience", "insufficient_scope", ...; see Reason).
	Reason string
	// Challenge is the WWW-Authenticate value, "" for none (a 503).
	Challenge string
}

// Allowed reports whether the request may through.
func (o *Outcome) Allowed() bool { return o.Status == http.StatusOK }

// Header returns the refusal's response headers: WWW-Authenticate (when
// there is a challenge), Content-Type application/json and Cache-Control
// no-store. It returns nil for a request to let through.
func (o *Outcome) Header() http.Header {
	if o.Allowed() {
		return nil
	}
	h := http.Header{"Content-Type": {"application/json"}, "Cache-Control": {"no-store"}}
	if o.Challenge != "" {
		h["Www-Authenticate"] = []string{o.Challenge}
	}
	return h
}

// Body returns the refusal's JSON body in RFC 6749 §5.2's shape,
// {"error":"...","error_description":"..."}; nil for a request to let
// through.
func (o *Outcome) Body() []byte {
	if o.Allowed() {
		return nil
	}
	return []byte(`{"error":"` + o.Error + `","error_description":"` + o.Description + `"}`)
}

// Write answers a refused request on w with Header, Status and Body. It
// writes nothing for a request to let through.
func (o *Outcome) Write(w http.ResponseWriter) {
	if o.Allowed() {
		return
	}
	h := w.Header()
	for k, v := range o.Header() {
		h[k] = v
	}
	w.WriteHeader(o.Status)
	w.Write(o.Body())
}
