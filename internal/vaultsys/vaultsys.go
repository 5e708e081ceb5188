// Package vaultsys serves the Vault endpoints that clients call before
// they use a secrets engine, on keygate's traffic listener: sys/health
// (Vault's shape and status codes, no token needed), sys/mounts and
// sys/internal/ui/mounts/:path (which engines are mounted where: the Vault
// CLI and hvac ask the latter whether secret/ is KV version 1 or 2), and
// auth/token/lookup-self (the caller's own token in Vault's shape). Each
// is an http.Handler made by its constructor from an Options struct: the
// node's state (sealed, version, the mounts) comes in through them.
//
// The mounts and the token lookup need a valid keygate token naming a
// tenant (package vaultauth), and no scope: they say which engines exist,
// the same for every tenant, and what the caller's own token holds.
package vaultsys

import (
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/keygate/keygate/internal/httperr"
)

// Paths.
const (
	HealthPath     = "/v1/sys/health"
	MountsPath     = "/v1/sys/mounts"
	UIMountsPrefix = "/v1/sys/internal/ui/mounts/" // followed by a path, or nothing (every mount)
	LookupSelfPath = "/v1/auth/token/lookup-self"
)

// Refusals.
var (
	errSealed = &httperr.Error{Status: http.StatusServiceUnavailable, Code: "sealed", Description: "Vault is sealed"}
	errMethod = &httperr.Error{Status: http.StatusMethodNotAllowed, Code: "unsupported_operation", Description: "unsupported operation"}
	errNoPath = &httperr.Error{Status: http.StatusNotFound, Code: "unsupported_path", Description: "unsupported path"}
)

// writeJSON answers v with status, not to be cached.
func writeJSON(w http.ResponseWriter, r *http.Request, log *slog.Logger, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // our own types always marshal
		httperr.Writer{Envelope: httperr.Vault, Log: log}.Write(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		w.Write(append(b, '\n')) //nolint:errcheck // the client went away
	}
}

// writeError answers err in Vault's error envelope.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	w.Header().Set("Cache-Control", "no-store")
	httperr.Writer{Envelope: httperr.Vault, Log: log}.Write(w, r, err)
}

func discard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
