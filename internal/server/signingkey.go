package server

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/keygate/keygate/internal/keyfile"
	"github.com/keygate/keygate/jose"
)

// SigningKeyFile is the name of the signing key in the data directory.
const SigningKeyFile = "signing-key.pem"

// loadOrCreateSigner returns an ES256 signer for dir's signing key, creating
// the directory (0700) and the key (0600) if they are missing. Two servers
// starting at once agree on one key: the loser of the race reads the
// winner's.
func loadOrCreateSigner(dir string, log *slog.Logger) (*jose.Signer, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("server: data directory: %w", err)
	}
	path := filepath.Join(dir, SigningKeyFile)
	created, err := createKey(path)
	if err != nil {
		return nil, err
	}
	warnIfExposed(path, log)
	s, err := keyfile.LoadSigner(path, jose.ES256, "")
	if err != nil {
		return nil, fmt.Errorf("server: signing key: %w", err)
	}
	msg := "signing key loaded"
	if created {
		msg = "signing key created"
	}
	log.Info(msg, "path", path, "alg", s.Alg().String(), "thumbprint", s.Key().Thumbprint())
	return s, nil
}

// createKey writes a new P-256 key to path unless a file is already there.
func createKey(path string) (created bool, err error) {
	if _, err := os.Stat(path); err == nil {
		return false, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("server: signing key: %w", err)
	}
	priv, err := keyfile.Generate(jose.ES256, 0)
	if err != nil {
		return false, fmt.Errorf("server: generate signing key: %w", err)
	}
	pem, err := jose.MarshalPrivatePEM(priv)
	if err != nil {
		return false, fmt.Errorf("server: encode signing key: %w", err)
	}
	err = keyfile.WriteNew(path, pem)
	switch {
	case errors.Is(err, fs.ErrExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("server: write signing key: %w", err)
	}
	return true, nil
}

func warnIfExposed(path string, log *slog.Logger) {
	info, err := os.Stat(path)
	if err == nil && info.Mode().Perm()&0o077 != 0 {
		log.Warn("signing key is readable by other users; chmod 600 it", "path", path, "mode", info.Mode().Perm().String())
	}
}
