package server

import (
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/keygate/keygate/internal/audit/httpaudit"
	"github.com/keygate/keygate/internal/httperr"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/rootkey"
)

// The seal endpoints on the admin listener: GET /v1/sys/seal-status, POST
// /v1/sys/unseal and POST /v1/sys/seal, the HTTP side of the node's
// Unseal, UnsealKey and Seal. Like Vault's sys/unseal, the passphrase or
// root key is itself the credential, so unsealing needs no admin token;
// sealing does.

// MaxUnsealBody bounds an unseal or seal request's body: a passphrase or a
// base64 key.
const MaxUnsealBody = 4 << 10

// sealStatus is the body of every seal endpoint's answer.
func (s *Server) sealStatus() map[string]any {
	ns := s.node.SealStatus()
	st := map[string]any{"sealed": ns.Sealed, "passphrase": ns.Passphrase}
	if ns.RootKeyID != "" {
		st["root_key_id"] = ns.RootKeyID
	}
	if ns.SigningKID != "" {
		st["signing_kid"] = ns.SigningKID
	}
	return st
}

func (s *Server) getSealStatus(w http.ResponseWriter, _ *http.Request) error {
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, s.sealStatus())
	return nil
}

// unsealRequest carries exactly one of a passphrase (with a keyring
// header) or the root key in base64.
type unsealRequest struct {
	Passphrase string `json:"passphrase"`
	Key        string `json:"key"`
}

// checkSysPost refuses a seal or unseal request a browser page could have
// sent: one with an Origin header (browsers send it on every cross-site
// POST, and on same-origin ones; the CLI never does), or a body that is
// not application/json (a page may POST text/plain or a form cross-site
// without a CORS preflight). Neither needs the body to be read.
func checkSysPost(r *http.Request) error {
	if _, ok := r.Header["Origin"]; ok {
		return &httperr.Error{Status: http.StatusForbidden, Code: "forbidden",
			Description: "requests with an Origin header (from a browser page) are refused"}
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return &httperr.Error{Status: http.StatusUnsupportedMediaType, Code: "invalid_request",
			Description: "the Content-Type must be application/json"}
	}
	return nil
}

// passphraseGate spaces the passphrase checks an unauthenticated caller
// can start (an unseal of a sealed node, a seal by passphrase): each
// costs an Argon2id derivation (64 MiB, a good part of a core for a
// fraction of a second), and the seal check runs on a live node too, so
// an unlimited caller could keep a core busy and guess at Argon2id speed.
// A burst of PassphraseBurst, then one every PassphraseEvery; beyond
// that, 429 with Retry-After. The gate is the node's, not a caller's:
// guesses are what it bounds, from anywhere.
type passphraseGate struct {
	mu     sync.Mutex
	tokens float64
	last   time.Time
}

// The rate of unauthenticated passphrase checks (unseal, seal by
// passphrase) a node starts; beyond it, 429 with Retry-After.
const (
	PassphraseBurst = 5               // checks allowed at once
	PassphraseEvery = 2 * time.Second // then one more per interval
)

// allow takes one check from the gate at now, or says how long to wait.
func (g *passphraseGate) allow(now time.Time) (time.Duration, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.last.IsZero() {
		g.tokens = PassphraseBurst
	} else {
		g.tokens = min(PassphraseBurst, g.tokens+float64(now.Sub(g.last))/float64(PassphraseEvery))
	}
	g.last = now
	if g.tokens < 1 {
		return time.Duration((1 - g.tokens) * float64(PassphraseEvery)), false
	}
	g.tokens--
	return 0, true
}

// gatePassphrase answers 429 when the gate is closed.
func (s *Server) gatePassphrase() error {
	if wait, ok := s.guards.passGate.allow(s.cfg.Now()); !ok {
		return &httperr.Error{Status: http.StatusTooManyRequests, Code: "slow_down",
			Description: "too many passphrase attempts; retry later", RetryAfter: max(wait, time.Second)}
	}
	return nil
}

// errStoreUnavailable is every unseal answer for a failure of the store:
// the caller is not authenticated (the key is what is being tested), so
// the detail, which may name hosts, tables or files, goes to the log only.
var errStoreUnavailable = &httperr.Error{Status: http.StatusServiceUnavailable, Code: "temporarily_unavailable", Description: "store unavailable"}

var errNotInitialized = &httperr.Error{Status: http.StatusConflict, Code: "not_initialized", Description: node.ErrNotInitialized.Error()}

func badUnseal(desc string) *httperr.Error {
	return &httperr.Error{Status: http.StatusBadRequest, Code: "invalid_request", Description: desc}
}

// unseal is POST /v1/sys/unseal (application/json, no Origin header; see
// checkSysPost), node.Unseal or node.UnsealKey over HTTP: a refused
// passphrase or key is 400, an uninitialized store 409, a store failure
// 503. Unsealing an unsealed node is not an error: it answers the status.
func (s *Server) unseal(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Cache-Control", "no-store")
	if err := checkSysPost(r); err != nil {
		return err
	}
	var in unsealRequest
	raw, err := readStrict(w, r, MaxUnsealBody, &in)
	clear(raw)
	if err != nil {
		return badUnseal(`the body must be {"passphrase":"..."} or {"key":"<base64 root key>"}`)
	}
	if (in.Passphrase == "") == (in.Key == "") {
		return badUnseal("give exactly one of passphrase and key")
	}
	if !s.node.Sealed() {
		writeJSON(w, http.StatusOK, s.sealStatus())
		return nil
	}
	// An unseal attempt changes the node's state: recorded before it is
	// made, without the passphrase or key (and without hashed values: a
	// sealed node has no audit HMAC key). Each attempt costs two records
	// whatever its outcome, so attempts are first charged to the address
	// as refusals before authentication are (httpaudit.Note.Attempt).
	if err := httpaudit.From(w).Attempt(r.Context()); err != nil {
		return err
	}
	if in.Passphrase != "" {
		if err := s.gatePassphrase(); err != nil {
			return err
		}
	}
	if err := httpaudit.From(w).Intent(r.Context()); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	if in.Passphrase != "" {
		pass := []byte(in.Passphrase)
		defer clear(pass)
		err = s.node.Unseal(ctx, pass)
	} else {
		root, perr := rootkey.ParseKey([]byte(strings.TrimSpace(in.Key)))
		if perr != nil {
			return badUnseal("the key is not a base64 root key of 32 bytes")
		}
		defer root.Destroy()
		err = s.node.UnsealKey(ctx, root)
	}
	var refused *node.RefusedError
	switch {
	case err == nil:
	case errors.As(err, &refused):
		s.log.Warn("unseal refused", "remote", r.RemoteAddr, "err", err)
		return badUnseal(refused.Reason)
	case errors.Is(err, node.ErrNotInitialized):
		s.log.Warn("unseal refused", "remote", r.RemoteAddr, "err", err)
		return errNotInitialized
	case errors.Is(err, node.ErrStore):
		s.log.Error("unseal failed", "remote", r.RemoteAddr, "err", err)
		return errStoreUnavailable
	default:
		s.log.Warn("unseal refused", "remote", r.RemoteAddr, "err", err)
		return err
	}
	s.log.Info("unsealed", "remote", r.RemoteAddr, "kid", s.node.Thumbprint())
	writeJSON(w, http.StatusOK, s.sealStatus())
	return nil
}

// seal is POST /v1/sys/seal (application/json, no Origin header; see
// checkSysPost): node.Seal over HTTP. It takes the admin token, or, on a
// node with a keyring passphrase, {"passphrase":"..."} instead (a
// passphrase-sealed node may have no admin token, and whoever can unseal it
// may seal it; each guess costs an Argon2id derivation, one at a time, as
// an unseal's does). Issuance stops until the next unseal; verification
// goes on.
func (s *Server) seal(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Cache-Control", "no-store")
	if err := checkSysPost(r); err != nil {
		return err
	}
	note := httpaudit.From(w)
	if s.guards.operator.Allows(r) {
		note.Admin()
		if err := note.Intent(r.Context()); err != nil {
			return err
		}
		s.node.Seal()
		s.log.Warn("sealed by the admin API", "remote", r.RemoteAddr)
		writeJSON(w, http.StatusOK, s.sealStatus())
		return nil
	}
	var in struct {
		Passphrase string `json:"passphrase"`
	}
	raw, err := readStrict(w, r, MaxUnsealBody, &in)
	clear(raw)
	if (err != nil && !errors.Is(err, io.EOF)) || in.Passphrase == "" {
		return &httperr.Error{Status: http.StatusUnauthorized, Code: "unauthorized",
			Description: `the admin token, or {"passphrase":"..."} on a node with an unseal passphrase, is required`,
			Challenge:   `Bearer realm="keygate-admin"`}
	}
	if err := note.Attempt(r.Context()); err != nil {
		return err
	}
	if err := s.gatePassphrase(); err != nil {
		return err
	}
	if err := note.Intent(r.Context()); err != nil {
		return err
	}
	pass := []byte(in.Passphrase)
	defer clear(pass)
	var refused *node.RefusedError
	switch err := s.node.SealWithPassphrase(pass); {
	case err == nil:
	case errors.As(err, &refused):
		s.log.Warn("seal refused", "remote", r.RemoteAddr, "err", err)
		return &httperr.Error{Status: http.StatusUnauthorized, Code: "unauthorized", Description: refused.Reason}
	default:
		return err
	}
	s.log.Warn("sealed with the unseal passphrase", "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, s.sealStatus())
	return nil
}
