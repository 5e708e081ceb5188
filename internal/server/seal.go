package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/keygate/keygate/internal/httperr"
	"github.com/keygate/keygate/internal/keyring"
)

// Sealing. A node without its root key starts sealed: it publishes the
// stored public keys and its gateway verifies tokens, but it issues none,
// rotates nothing, and /readyz says so. The unseal endpoints live on the
// admin listener, like Vault's sys/unseal: the passphrase or root key is
// itself the credential, so unsealing needs no admin token; sealing does.

// maxUnsealBody bounds an unseal request: a passphrase or a base64 key.
const maxUnsealBody = 4 << 10

// keyringFile is where the passphrase header is read.
func (s *Server) keyringFile() string {
	if s.cfg.KeyringFile != "" {
		return s.cfg.KeyringFile
	}
	return filepath.Join(s.cfg.DataDir, KeyringFile)
}

// Sealed reports whether the node is sealed.
func (s *Server) Sealed() bool { return s.keyring != nil && s.keyring.Sealed() }

// sealStatus is the body of every seal endpoint's answer.
func (s *Server) sealStatus() map[string]any {
	st := map[string]any{"sealed": s.keyring.Sealed()}
	_, err := os.Stat(s.keyringFile())
	st["passphrase"] = err == nil
	if id, err := s.keyring.Current(); err == nil {
		st["root_key_id"] = id.String()
	}
	if kid := s.Thumbprint(); kid != "" {
		st["signing_kid"] = kid
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

// errStoreUnavailable is every unseal answer for a failure of the store:
// the caller is not authenticated (the key is what is being tested), so
// the detail, which may name hosts, tables or files, goes to the log only.
var errStoreUnavailable = &httperr.Error{Status: http.StatusServiceUnavailable, Code: "temporarily_unavailable", Description: "store unavailable"}

func badUnseal(desc string) *httperr.Error {
	return &httperr.Error{Status: http.StatusBadRequest, Code: "invalid_request", Description: desc}
}

// unseal is POST /v1/sys/unseal (application/json, no Origin header; see
// checkSysPost). The root key is accepted only if it opens every stored
// signing key, and, with a keyring.json, authenticates its key-check
// value; both are checked before the keyring holds it, so a wrong key is
// never installed, not even for a moment. Otherwise the node stays sealed.
// Unsealing an unsealed node is not an error: it answers the status.
func (s *Server) unseal(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Cache-Control", "no-store")
	if err := checkSysPost(r); err != nil {
		return err
	}
	var in unsealRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxUnsealBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil || dec.Decode(&struct{}{}) != io.EOF {
		return badUnseal(`the body must be {"passphrase":"..."} or {"key":"<base64 root key>"}`)
	}
	if (in.Passphrase == "") == (in.Key == "") {
		return badUnseal("give exactly one of passphrase and key")
	}
	s.unsealMu.Lock()
	defer s.unsealMu.Unlock()
	if !s.keyring.Sealed() {
		writeJSON(w, http.StatusOK, s.sealStatus())
		return nil
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	switch err := s.openKeyring(ctx, in); {
	case errors.Is(err, keyring.ErrAlreadyUnsealed):
		writeJSON(w, http.StatusOK, s.sealStatus())
		return nil
	case err != nil:
		var se *storeError
		if errors.As(err, &se) {
			s.log.Error("unseal failed: the stored signing keys could not be read", "remote", r.RemoteAddr, "err", se.err)
			return errStoreUnavailable
		}
		s.log.Warn("unseal refused", "remote", r.RemoteAddr, "err", err)
		return err
	}
	hadKeys := s.keys.KeySet().Len() > 0
	if err := s.keys.Load(ctx); err != nil {
		// The key opened every stored signing key a moment ago: the store
		// failed, or another node stored a key under another root since.
		s.keyring.Seal()
		s.keys.DropSigner()
		if errors.Is(err, keyring.ErrUnknownKey) || errors.Is(err, keyring.ErrDecrypt) {
			s.log.Warn("unseal refused: the root key does not open the stored signing keys", "remote", r.RemoteAddr, "err", err)
			return badUnseal("this root key did not seal the stored signing keys")
		}
		s.log.Error("unseal failed: the signing keys could not be loaded", "remote", r.RemoteAddr, "err", err)
		return errStoreUnavailable
	}
	if !hadKeys {
		s.rotated(ctx, s.Thumbprint()) // the first key: other nodes load it now
	}
	s.log.Info("unsealed", "remote", r.RemoteAddr, "kid", s.Thumbprint())
	writeJSON(w, http.StatusOK, s.sealStatus())
	return nil
}

// storeError marks a store failure met while verifying a candidate key.
type storeError struct{ err error }

func (e *storeError) Error() string { return "store: " + e.err.Error() }

// errNotInitialized refuses an unseal that nothing could check: a store
// with no signing key and no keyring.json.
var errNotInitialized = &httperr.Error{Status: http.StatusConflict, Code: "not_initialized",
	Description: "the store holds no signing key and no keyring.json is set up, so no root key can be checked: initialize the fleet with keygate operator init, or start one node with its root key (--root-key-file or KEYGATE_ROOT_KEY)"}

// verifyRoot is the check a candidate root key passes before the keyring
// installs it: it must open every stored signing key. Until it has, the
// node's keyring stays sealed, so the key schedule cannot seal a new
// signing key under a key that turns out to be wrong. On a store with no
// signing key, only a keyring.json's check value (which the keyring has
// checked before this runs) can vouch for a key; without one the unseal
// is refused, so that an unauthenticated caller cannot choose the fleet's
// root key (see Init).
func (s *Server) verifyRoot(ctx context.Context) keyring.Verifier {
	return func(candidate *keyring.Keyring) error {
		n, err := s.keys.CheckSealer(ctx, candidate)
		switch {
		case errors.Is(err, keyring.ErrUnknownKey) || errors.Is(err, keyring.ErrDecrypt):
			return badUnseal("this root key did not seal the stored signing keys")
		case err != nil:
			return &storeError{err}
		case n == 0 && !s.keyring.HasHeader():
			return errNotInitialized
		}
		return nil
	}
}

// openKeyring unseals the keyring with the request's passphrase or key,
// which must pass the keyring header's key-check value (if there is a
// header) and verifyRoot before the keyring holds it.
func (s *Server) openKeyring(ctx context.Context, in unsealRequest) error {
	verify := s.verifyRoot(ctx)
	if in.Passphrase != "" {
		pass := []byte(in.Passphrase)
		defer clear(pass)
		switch err := s.keyring.UnsealPassphraseVerified(pass, verify); {
		case errors.Is(err, keyring.ErrNoHeader):
			return badUnseal("no unseal passphrase is set up on this node (keygate keyring init)")
		case errors.Is(err, keyring.ErrWrongPassphrase):
			return badUnseal("wrong unseal passphrase")
		default:
			return err
		}
	}
	root, err := keyring.ParseKey([]byte(strings.TrimSpace(in.Key)))
	if err != nil {
		return badUnseal("the key is not a base64 root key of 32 bytes")
	}
	defer root.Destroy()
	// With a keyring.json, the keyring accepts only the key that
	// authenticates its key-check value: on an empty store nothing else
	// would tell a wrong key apart.
	if err := s.keyring.UnsealVerified(root, verify); errors.Is(err, keyring.ErrWrongKey) {
		return badUnseal("this root key is not the one the keyring passphrase derives")
	} else if err != nil {
		return err
	}
	return nil
}

// seal is POST /v1/sys/seal (admin token, application/json, no Origin
// header; the body is ignored): it drops the root key and the
// private signing key from memory at once. Issuance stops until the next
// unseal; verification goes on.
func (s *Server) seal(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Cache-Control", "no-store")
	if err := checkSysPost(r); err != nil {
		return err
	}
	if !s.operator.Allows(r) {
		return &httperr.Error{Status: http.StatusUnauthorized, Code: "unauthorized", Description: "the admin token is required",
			Challenge: `Bearer realm="keygate-admin"`}
	}
	s.unsealMu.Lock()
	defer s.unsealMu.Unlock()
	s.keyring.Seal()
	s.keys.DropSigner()
	s.log.Warn("sealed by the admin API", "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, s.sealStatus())
	return nil
}
