package node

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/keygate/keygate/internal/issuer/signingkeys"
	"github.com/keygate/keygate/internal/rootkey"
)

// Init is the explicit first step of a fleet whose nodes start sealed on a
// shared store without keyring.json (keygate operator init, like vault
// operator init): it seals a first signing key under root and stores it.
// From then on an unseal accepts root alone, the key that opens the
// stored signing keys; on an empty store without keyring.json it accepts
// none, so no caller of the unauthenticated unseal endpoint can choose the
// fleet's root key. cfg needs TokenService.DatabaseURL; its store timeout
// and signing-key settings are used as by Open. A store that already
// holds signing keys is [signingkeys.ErrInitialized] and is left alone.
func Init(ctx context.Context, cfg Config, root rootkey.Key) (kid string, err error) {
	ts := cfg.TokenService.WithDefaults()
	if ts.DatabaseURL == "" {
		return "", errors.New("init is for a shared store: give a database URL (a single node with SQLite starts with a root key of its own)")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	kr, err := rootkey.New(rootkey.Options{Root: root, Rand: cfg.Rand})
	if err != nil {
		return "", fmt.Errorf("root key: %w", err)
	}
	defer kr.Seal()
	st, err := openStore(ctx, ts, "")
	if err != nil {
		return "", err
	}
	defer st.Close()
	kid, err = signingkeys.New(st, kr, keyPolicy(ts), cfg.Now).Init(ctx)
	if err != nil {
		return "", fmt.Errorf("init: %w", err)
	}
	return kid, nil
}
