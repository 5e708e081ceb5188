package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/keygate/keygate/internal/issuer/signingkeys"
	"github.com/keygate/keygate/internal/operr"
	"github.com/keygate/keygate/internal/rootkey"
	"github.com/keygate/keygate/internal/store"
)

// Sealing. A node without its root key starts sealed: it publishes the
// stored public keys and verifies tokens, but it issues none and rotates
// nothing. Unseal checks a candidate root key completely before the
// keyring holds it; Seal forgets the root key and the private signing key
// at once.

// openKeyring opens the keyring from the root key file, the root key
// variable or the passphrase header, or starts it sealed; with none of them
// and no shared database it is dev mode, with a root key generated in the
// data directory. It reports whether the node runs in dev mode. Its errors
// are for the operator (operr): the root key's texts name files and
// variables, never key material.
func (n *Node) openKeyring() (dev bool, err error) {
	cfg, ts := &n.cfg, &n.ts
	dev = cfg.Dev
	kopts := rootkey.Options{Rand: cfg.Rand, LookupEnv: cfg.LookupEnv}
	_, envSet := cfg.LookupEnv(RootKeyEnv)
	header := n.keyringFile()
	if _, err := os.Stat(header); err == nil {
		kopts.HeaderFile = header
	} else if ts.KeyringFile != "" {
		// Named, but not there: never fall back to a generated dev root key
		// for a node its operator meant to be passphrase-sealed.
		return false, operr.Errorf("keyring_file %s: %w (create it with keygate keyring init --keyring-file %s)", header, err, header)
	}
	switch {
	case ts.RootKeyFile != "":
		kopts.KeyFile = ts.RootKeyFile
		n.boot.RootKeyPath = ts.RootKeyFile
	case envSet:
		kopts.KeyEnv = RootKeyEnv
	case kopts.HeaderFile != "":
		n.log.Warn("starting sealed: unseal with the passphrase (keygate unseal) before tokens can be issued", "keyring", header)
	case ts.DatabaseURL != "" && !dev:
		n.log.Warn("starting sealed: no root key (token_service.root_key_file, KEYGATE_ROOT_KEY or a keyring passphrase); unseal with `keygate unseal --key-file FILE` (an empty store must first be initialized: keygate operator init)")
	default:
		dev = true
		path := filepath.Join(cfg.DataDir, RootKeyFile)
		switch err := rootkey.GenerateKeyFile(path, cfg.Rand); {
		case err == nil:
			n.boot.RootKeyCreated = true
			n.log.Warn("generated a dev root key; use token_service.root_key_file or KEYGATE_ROOT_KEY in production", "path", path)
		case errors.Is(err, fs.ErrExist):
			n.log.Info("dev root key loaded", "path", path)
		default:
			return false, operr.Errorf("dev root key: %w", err)
		}
		kopts.KeyFile = path
		n.boot.RootKeyPath = path
	}
	n.boot.Dev = dev
	if n.keyring, err = rootkey.New(kopts); err != nil {
		return false, operr.Errorf("root key: %w", err)
	}
	return dev, nil
}

// keyringFile is where the passphrase header is read.
func (n *Node) keyringFile() string {
	if n.ts.KeyringFile != "" {
		return n.ts.KeyringFile
	}
	return filepath.Join(n.cfg.DataDir, KeyringFile)
}

// Sealed reports whether the node is sealed.
func (n *Node) Sealed() bool { return n.keyring.Sealed() }

// SealStatus is the node's seal state, for operators.
type SealStatus struct {
	Sealed     bool
	Passphrase bool   // a keyring.json is set up: Unseal takes its passphrase
	RootKeyID  string // the root key's ID; "" while none is known
	SigningKID string // the signing key in force; "" while sealed
}

// SealStatus reports the node's seal state.
func (n *Node) SealStatus() SealStatus {
	st := SealStatus{Sealed: n.keyring.Sealed(), SigningKID: n.Thumbprint()}
	_, err := os.Stat(n.keyringFile())
	st.Passphrase = err == nil
	if id, err := n.keyring.Current(); err == nil {
		st.RootKeyID = id.String()
	}
	return st
}

// Errors of Unseal, for errors.Is and errors.As.
var (
	// ErrNotInitialized refuses an unseal that nothing could check: a
	// store with no signing key and no keyring.json. An unauthenticated
	// caller must not choose the fleet's root key (see Init).
	ErrNotInitialized = errors.New("the store holds no signing key and no keyring.json is set up, so no root key can be checked: initialize the fleet with keygate operator init, or start one node with its root key (token_service.root_key_file or KEYGATE_ROOT_KEY)")
	// ErrStore: the store failed while a candidate key was checked or the
	// signing keys loaded; the node stays sealed.
	ErrStore = errors.New("the store failed")
)

// RefusedError is a passphrase or root key Unseal refused: Reason says why,
// for the operator who sent it, and names no secret.
type RefusedError struct {
	Reason string
	Op     string // what was refused: "unseal" when empty, or "rekey"
}

func (e *RefusedError) Error() string {
	op := e.Op
	if op == "" {
		op = "unseal"
	}
	return op + " refused: " + e.Reason
}

func refused(reason string) error { return &RefusedError{Reason: reason} }

// Unseal unseals the node with the passphrase of its keyring.json.
// Unsealing an unsealed node is not an error. See UnsealKey.
func (n *Node) Unseal(ctx context.Context, passphrase []byte) error {
	return n.unseal(ctx, func(verify rootkey.Verifier) error {
		switch err := n.keyring.UnsealPassphraseVerified(passphrase, verify); {
		case errors.Is(err, rootkey.ErrNoHeader):
			return refused("no unseal passphrase is set up on this node (keygate keyring init)")
		case errors.Is(err, rootkey.ErrWrongPassphrase):
			return refused("wrong unseal passphrase")
		default:
			return err
		}
	})
}

// UnsealKey unseals the node with its root key. The key is accepted only
// if it opens every stored signing key, and, with a keyring.json,
// authenticates its key-check value; both are checked before the keyring
// holds it, so a wrong key is never installed, not even for a moment. On a
// store with no signing key and no keyring.json it is ErrNotInitialized.
// A refusal is a *RefusedError, a store failure ErrStore; the node then
// stays sealed. Unsealing an unsealed node is not an error.
func (n *Node) UnsealKey(ctx context.Context, root rootkey.Key) error {
	return n.unseal(ctx, func(verify rootkey.Verifier) error {
		// With a keyring.json, the keyring accepts only the key that
		// authenticates its key-check value: on an empty store nothing
		// else would tell a wrong key apart.
		if err := n.keyring.UnsealVerified(root, verify); errors.Is(err, rootkey.ErrWrongKey) {
			return refused("this root key is not the one the keyring passphrase derives")
		} else if err != nil {
			return err
		}
		return nil
	})
}

const notSealer = "this root key did not seal the stored signing keys"

// unseal runs open, which installs a key that verify has accepted, then
// loads the signing keys under it; the first key is announced to the
// fleet.
func (n *Node) unseal(ctx context.Context, open func(rootkey.Verifier) error) error {
	n.unsealMu.Lock()
	defer n.unsealMu.Unlock()
	if !n.keyring.Sealed() {
		return nil
	}
	if err := open(n.verifyRoot(ctx)); err != nil && !errors.Is(err, rootkey.ErrAlreadyUnsealed) {
		return err
	} else if err != nil {
		return nil
	}
	hadKeys := n.keys.KeySet().Len() > 0
	if err := n.keys.Load(ctx); err != nil {
		// The key opened every stored signing key a moment ago: the store
		// failed, or another node stored a key under another root since.
		n.keyring.Seal()
		n.keys.DropSigner()
		if errors.Is(err, rootkey.ErrUnknownKey) || errors.Is(err, rootkey.ErrDecrypt) {
			return fmt.Errorf("%w: %w", refused(notSealer), err)
		}
		return fmt.Errorf("%w: loading the signing keys: %w", ErrStore, err)
	}
	n.setAuditKeys()
	if _, err := n.syncRekey(ctx); err != nil {
		n.log.Warn("root key rotation: reading its state after the unseal failed; read again within seconds", "err", err)
	}
	if !hadKeys {
		n.Publisher().Rotated(ctx, n.Thumbprint()) // the first key: other nodes load it now
	}
	return nil
}

// verifyRoot is the check a candidate root key passes before the keyring
// installs it: it must open every stored signing key. Until it has, the
// node's keyring stays sealed, so the key schedule cannot seal a new
// signing key under a key that turns out to be wrong. On a store with no
// signing key, only a keyring.json's check value (which the keyring has
// checked before this runs) can vouch for a key; without one the unseal
// is refused, so that an unauthenticated caller cannot choose the fleet's
// root key (see Init).
func (n *Node) verifyRoot(ctx context.Context) rootkey.Verifier {
	return func(candidate *rootkey.Keyring) error {
		// During a root-key rotation the candidate may be either key;
		// it gets the other from the rotation's state.
		switch r, err := n.store.GetRekey(ctx); {
		case err == nil:
			if err := rekeyCandidate(candidate, r); errors.Is(err, rootkey.ErrDecrypt) {
				return refused(notSealer)
			} else if err != nil {
				return fmt.Errorf("%w: the root key rotation's state: %w", ErrStore, err)
			}
		case !errors.Is(err, store.ErrNotFound):
			return fmt.Errorf("%w: reading the root key rotation's state: %w", ErrStore, err)
		}
		count, err := n.keys.CheckSealer(ctx, candidate)
		switch {
		case errors.Is(err, rootkey.ErrUnknownKey) || errors.Is(err, rootkey.ErrDecrypt):
			return refused(notSealer)
		case err != nil:
			return fmt.Errorf("%w: reading the stored signing keys: %w", ErrStore, err)
		case count == 0 && !n.keyring.HasHeader():
			return ErrNotInitialized
		}
		return nil
	}
}

// Seal drops the root key, the private signing key, the tenants' data keys
// and the audit keys derived from the root key from memory at once, then
// runs what OnSeal registered. Issuance stops until the next unseal;
// verification goes on, and so does the audit log, unsigned.
func (n *Node) Seal() {
	n.unsealMu.Lock()
	defer n.unsealMu.Unlock()
	n.rekey.mu.Lock()
	defer n.rekey.mu.Unlock()
	n.keyring.Seal()
	n.keys.DropSigner()
	if n.audit.log != nil {
		n.audit.log.SetKeys(nil, nil)
	}
	n.tenants.Forget()
	n.hooks.sealed()
}

// SealWithPassphrase seals the node when passphrase is its keyring's
// unseal passphrase: whoever can unseal a passphrase-sealed node may also
// seal it, without the admin token such a node may not have. A refusal is
// a *RefusedError and leaves the node as it was.
func (n *Node) SealWithPassphrase(passphrase []byte) error {
	switch err := n.keyring.CheckPassphrase(passphrase); {
	case errors.Is(err, rootkey.ErrNoHeader):
		return refused("no unseal passphrase is set up on this node (keygate keyring init): seal with the admin token")
	case errors.Is(err, rootkey.ErrWrongPassphrase):
		return refused("wrong unseal passphrase")
	case err != nil:
		return err
	}
	n.Seal()
	return nil
}

// loadSigningKeys loads the signing keys, creating the first one if the
// store has none and the node is unsealed.
func (n *Node) loadSigningKeys(ctx context.Context) error {
	stored, err := n.store.ListSigningKeys(ctx)
	if err != nil {
		return fmt.Errorf("signing keys: %w", err)
	}
	km := signingkeys.New(n.store, sealer{n}, n.keyPolicy(), n.cfg.Now)
	switch err := km.Load(ctx); {
	case err == nil && km.Sealed():
		n.log.Info("signing keys published; sealed, so none signs", "published", km.KeySet().Len())
	case err == nil:
		msg := "signing keys loaded"
		if len(stored) == 0 {
			msg = "signing key created"
		}
		n.log.Info(msg, "alg", km.Signer().Alg().String(), "thumbprint", km.Signer().Key().Thumbprint(), "published", km.KeySet().Len())
	case errors.Is(err, signingkeys.ErrSealed):
		n.log.Info("no signing key yet: with a keyring.json the first is created at unseal; without one, initialize the store with keygate operator init")
	default:
		return fmt.Errorf("signing keys: %w", err)
	}
	n.keys = km
	n.keySrc = &managedKeys{km: km, now: n.cfg.Now}
	return nil
}
