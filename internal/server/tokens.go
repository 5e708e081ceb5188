package server

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/keygate/keygate/internal/issuer"
	"github.com/keygate/keygate/internal/keyfile"
	"github.com/keygate/keygate/internal/keyring"
	"github.com/keygate/keygate/internal/revoke"
	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/store/postgres"
	"github.com/keygate/keygate/internal/store/sqlite"
	"github.com/keygate/keygate/jose"
)

// Files the token service keeps in the data directory.
const (
	RootKeyFile    = "root.key"     // dev-mode root key (0600)
	KeyringFile    = "keyring.json" // passphrase unsealing's salt and parameters (no secret)
	AdminTokenFile = "admin.token"  // dev-mode admin token (0600)
	StoreFile      = "keygate.db"   // the SQLite store (0600)
	LockFile       = "keygate.lock" // serializes set-up by servers starting at once
)

// DemoClientID is the id of the client dev mode creates on first start.
const DemoClientID = "kgc_demo"

// TickInterval is how often Serve runs the signing-key schedule.
const TickInterval = time.Minute

// Bootstrap reports what New created on this start; the secrets in it are
// set only when they were created now, so that they are shown once.
type Bootstrap struct {
	Dev              bool   // dev mode: generated root key, admin token and demo client
	RootKeyPath      string // where the root key came from when it is a file
	RootKeyCreated   bool
	AdminTokenPath   string // the dev admin token file
	AdminToken       string // set only when the admin token file was created now
	DemoClientID     string // set only when the demo client was created now
	DemoClientSecret string
}

// openTokenService sets up the keyring, store, signing keys, revocations,
// the token service and its admin API.
func (s *Server) openTokenService(ctx context.Context) (err error) {
	cfg := &s.cfg
	unlock, err := lockDir(cfg.DataDir)
	if err != nil {
		return fmt.Errorf("server: lock data directory: %w", err)
	}
	defer unlock()
	dev, err := s.initKeyring()
	if err != nil {
		return err
	}
	if err := s.openStore(ctx); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			s.store.Close()
			s.store = nil
		}
	}()
	if err := s.loadSigningKeys(ctx); err != nil {
		return err
	}
	nrevs, err := s.loadRevocations(ctx)
	if err != nil {
		return err
	}
	icfg := s.issuerConfig()
	if err := s.openFleet(ctx, s.revoked); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			s.closeFleet()
		}
	}()
	if s.fleet != nil {
		s.revocation = s.fleet.fanout
	}
	icfg.Checker = s.revocation // introspection answers from memory, like /auth
	if icfg.Limiter, err = s.loginLimiter(); err != nil {
		return fmt.Errorf("server: login rate limit: %w", err)
	}
	if icfg.TokenLimiter, err = s.tokenLimiter(); err != nil {
		return fmt.Errorf("server: token rate limit: %w", err)
	}
	if icfg.PreAuthLimiter, err = s.limiter("preauth", PreAuthLimit); err != nil {
		return fmt.Errorf("server: pre-authentication rate limit: %w", err)
	}
	if s.tokens, err = issuer.New(icfg); err != nil {
		return fmt.Errorf("server: token service: %w", err)
	}
	if err := s.openAdmin(dev); err != nil {
		return err
	}
	if dev {
		if err := s.demoClient(ctx); err != nil {
			return err
		}
	}
	s.log.Info("token service ready", "store", storeKind(cfg.DatabaseURL), "dev", dev, "sealed", s.keyring.Sealed(),
		"kid", s.Thumbprint(), "revocations", nrevs, "redis", s.fleet != nil)
	return nil
}

// initKeyring opens the keyring from the root key file, the root key
// variable or the passphrase header, or starts it sealed; with none of them
// and no shared database it is dev mode, with a root key generated in the
// data directory. It reports whether the node runs in dev mode.
func (s *Server) initKeyring() (dev bool, err error) {
	cfg := &s.cfg
	dev = cfg.Dev
	kopts := keyring.Options{Rand: cfg.Rand, LookupEnv: cfg.LookupEnv}
	lookup := cfg.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	envSet := false
	if cfg.RootKeyEnv != "" {
		_, envSet = lookup(cfg.RootKeyEnv)
	}
	header := s.keyringFile()
	if _, err := os.Stat(header); err == nil {
		kopts.HeaderFile = header
	}
	switch {
	case cfg.RootKeyFile != "":
		kopts.KeyFile = cfg.RootKeyFile
		s.boot.RootKeyPath = cfg.RootKeyFile
	case envSet:
		kopts.KeyEnv = cfg.RootKeyEnv
	case kopts.HeaderFile != "":
		s.log.Warn("starting sealed: unseal with the passphrase (keygate unseal) before tokens can be issued", "keyring", header)
	case cfg.DatabaseURL != "" && !dev:
		s.log.Warn("starting sealed: no root key (--root-key-file, KEYGATE_ROOT_KEY or a keyring passphrase); unseal with `keygate unseal --key-file FILE` (an empty store must first be initialized: keygate operator init)")
	default:
		dev = true
		path := filepath.Join(cfg.DataDir, RootKeyFile)
		switch err := keyring.GenerateKeyFile(path, cfg.Rand); {
		case err == nil:
			s.boot.RootKeyCreated = true
			s.log.Warn("generated a dev root key; use --root-key-file or KEYGATE_ROOT_KEY in production", "path", path)
		case errors.Is(err, fs.ErrExist):
			s.log.Info("dev root key loaded", "path", path)
		default:
			return false, fmt.Errorf("server: dev root key: %w", err)
		}
		kopts.KeyFile = path
		s.boot.RootKeyPath = path
	}
	s.boot.Dev = dev
	if s.keyring, err = keyring.New(kopts); err != nil {
		return false, fmt.Errorf("server: root key: %w", err)
	}
	return dev, nil
}

// openStore opens PostgreSQL when a database URL is set, else SQLite in
// the data directory.
func (s *Server) openStore(ctx context.Context) error {
	cfg := &s.cfg
	var st store.Store
	var err error
	if cfg.DatabaseURL != "" {
		st, err = postgres.Open(ctx, cfg.DatabaseURL, postgres.WithTimeout(cfg.StoreTimeout))
	} else {
		st, err = sqlite.Open(ctx, filepath.Join(cfg.DataDir, StoreFile))
	}
	if err != nil {
		return fmt.Errorf("server: store: %w", err)
	}
	s.store = st
	return nil
}

// loadSigningKeys loads the signing keys, creating the first one if the
// store has none and the node is unsealed.
func (s *Server) loadSigningKeys(ctx context.Context) error {
	stored, err := s.store.ListSigningKeys(ctx)
	if err != nil {
		return fmt.Errorf("server: signing keys: %w", err)
	}
	km := issuer.NewKeyManager(s.store, s.keyring, s.keyPolicy(), s.cfg.Now)
	switch err := km.Load(ctx); {
	case err == nil && km.Sealed():
		s.log.Info("signing keys published; sealed, so none signs", "published", km.KeySet().Len())
	case err == nil:
		msg := "signing keys loaded"
		if len(stored) == 0 {
			msg = "signing key created"
		}
		s.log.Info(msg, "alg", km.Signer().Alg().String(), "thumbprint", km.Signer().Key().Thumbprint(), "published", km.KeySet().Len())
	case errors.Is(err, issuer.ErrSealed):
		s.log.Info("no signing key yet: with a keyring.json the first is created at unseal; without one, initialize the store with keygate operator init")
	default:
		return fmt.Errorf("server: signing keys: %w", err)
	}
	s.keys = km
	return nil
}

// loadRevocations fills the node's in-memory revocation set from the store
// and returns how many revocations it holds.
func (s *Server) loadRevocations(ctx context.Context) (int, error) {
	revs, err := s.store.Revocations(ctx, s.cfg.Now().Add(-RevocationGrace))
	if err != nil {
		return 0, fmt.Errorf("server: revocations: %w", err)
	}
	mem := revoke.NewMemory()
	mem.Update(func(b *revoke.Batch) {
		for _, r := range revs {
			if r.JTI != "" {
				b.RevokeID(r.Issuer, r.JTI, r.Until)
			} else if r.Subject != "" {
				b.RevokeSubjectUntil(r.Issuer, r.Subject, r.Before, r.Until)
			}
		}
	})
	s.revoked = mem
	s.revocation = mem
	return len(revs), nil
}

// issuerConfig is the token service's configuration on a node without a
// fleet; openTokenService adds the fleet's callbacks and the limiters.
func (s *Server) issuerConfig() issuer.Config {
	cfg := &s.cfg
	icfg := issuer.Config{
		Issuer:         cfg.Issuer,
		Audience:       []string{cfg.Audience},
		Store:          s.store,
		Keys:           s.keys,
		Publisher:      publisher{s},
		Trusts:         s.trusts,
		Now:            cfg.Now,
		Rand:           cfg.Rand,
		Logger:         s.log,
		AccessTokenTTL: cfg.AccessTokenTTL,
		TrustedProxies: cfg.TrustedProxies,
		IPv6Prefix:     cfg.IPv6Prefix,
		PasswordHashes: cfg.PasswordHashes,
	}
	if s.metrics != nil {
		icfg.Observe = s.metrics.TokenRequest
	}
	return icfg
}

// trusts reports whether the gateway's configuration in force trusts
// issuer's tokens: what the admin API may revoke besides the token
// service's own. It reads the runtime at each call, so a reload that adds
// or removes an issuer is seen at once.
func (s *Server) trusts(issuer string) bool {
	rt := s.rt.Load()
	if rt == nil {
		return false
	}
	_, ok := rt.sources[issuer]
	return ok
}

// openAdmin enables the admin API when an admin token is configured (or,
// in dev mode, generated).
func (s *Server) openAdmin(dev bool) error {
	if !s.operator.Set() && dev {
		token, err := s.devAdminToken()
		if err != nil {
			return err
		}
		s.operator = issuer.NewBearer(token)
	}
	if !s.operator.Set() {
		s.log.Warn("no admin token configured: the admin API (/v1/admin/) is off")
		return nil
	}
	var err error
	if s.admin, err = issuer.NewAdmin(s.tokens, s.operator); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	return nil
}

// SigningAlgs are the algorithms Config.SigningAlg may name.
var SigningAlgs = []jose.Alg{jose.ES256, jose.ES384, jose.ES512, jose.RS256, jose.PS256, jose.EdDSA}

// keyPolicy is the signing-key schedule the configuration asks for.
func (s *Server) keyPolicy() issuer.KeyPolicy {
	cfg := &s.cfg
	p := issuer.KeyPolicy{Alg: cfg.SigningAlg, RotateEvery: cfg.KeyRotation, PrePublish: cfg.KeyPrePublish}
	if p.Alg == 0 {
		p.Alg = jose.ES256
	}
	switch {
	case cfg.KeyRotation < 0:
		p.RotateEvery = 0
	case cfg.KeyRotation == 0:
		p.RotateEvery = 30 * 24 * time.Hour
	}
	ttl := cfg.AccessTokenTTL
	if ttl <= 0 {
		ttl = 15 * time.Minute
	}
	p.MaxTokenTTL = max(time.Hour, ttl)
	return p
}

// devAlgs are the algorithms /auth accepts in dev mode: the configured
// signing algorithm and those of the keys already published.
func (s *Server) devAlgs() []jose.Alg {
	algs := []jose.Alg{s.keyPolicy().Alg}
	if s.keys != nil {
		for _, k := range s.keys.KeySet().Keys() {
			if !slices.Contains(algs, k.Alg()) {
				algs = append(algs, k.Alg())
			}
		}
	}
	return algs
}

func storeKind(url string) string {
	if url != "" {
		return "postgres"
	}
	return "sqlite"
}

// devAdminToken returns the dev admin token from the data directory,
// creating it if needed.
func (s *Server) devAdminToken() (string, error) {
	path := filepath.Join(s.cfg.DataDir, AdminTokenFile)
	s.boot.AdminTokenPath = path
	// The data directory is locked (lockDir) while the service is set up,
	// so the file cannot appear between this read and the write below.
	switch token, err := readToken("dev admin token", path, ""); {
	case err == nil:
		s.log.Info("dev admin token loaded", "path", path)
		return token, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", err
	}
	token, err := NewAdminToken(s.cfg.Rand)
	if err != nil {
		return "", fmt.Errorf("server: admin token: %w", err)
	}
	if err := keyfile.WriteNew(path, []byte(token+"\n")); err != nil {
		return "", fmt.Errorf("server: admin token: %w", err)
	}
	s.boot.AdminToken = token
	s.log.Info("dev admin token created", "path", path)
	return token, nil
}

// NewAdminToken draws an admin token from rand: 32 random bytes in
// base64url, 43 characters.
func NewAdminToken(rand io.Reader) (string, error) {
	b := make([]byte, 32)
	if _, err := io.ReadFull(rand, b); err != nil {
		return "", fmt.Errorf("random source: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// demoClient creates the dev demo client unless it exists.
func (s *Server) demoClient(ctx context.Context) error {
	secret, err := issuer.NewSecret(s.cfg.Rand)
	if err != nil {
		return fmt.Errorf("server: demo client: %w", err)
	}
	now := s.cfg.Now().UTC()
	d := issuer.SecretDigest(secret)
	err = s.store.CreateClient(ctx, store.Client{ID: DemoClientID, Name: "demo", SecretDigest: d[:],
		Scopes: []string{"demo"}, CreatedAt: now, UpdatedAt: now})
	switch {
	case errors.Is(err, store.ErrConflict):
		return nil
	case err != nil:
		return fmt.Errorf("server: demo client: %w", err)
	}
	s.boot.DemoClientID, s.boot.DemoClientSecret = DemoClientID, secret
	s.log.Info("demo client created", "client_id", DemoClientID)
	return nil
}

// PurgeInterval is how often Serve deletes expired refresh tokens and
// revocations.
const PurgeInterval = time.Hour

// tick runs the signing-key schedule and sweeps expired revocations every
// interval, and deletes expired refresh tokens and revocations every
// PurgeInterval (and on the first tick), until ctx is done.
func (s *Server) tick(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	var purged time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.keys.Tick(ctx); err != nil && ctx.Err() == nil {
				s.log.Error("signing key schedule failed", "err", err)
				if s.metrics != nil {
					s.metrics.KeyScheduleFailed()
				}
			}
			now := s.cfg.Now()
			if s.fleet == nil { // with Redis, the fan-out sweeps at each resync
				s.revoked.Sweep(now.Add(-RevocationGrace))
				s.revoked.SweepSubjects(now.Add(-s.subjectRetention()), now.Add(-RevocationGrace))
			}
			if now.Sub(purged) >= PurgeInterval {
				purged = now
				s.purge(ctx, now)
			}
		}
	}
}

// subjectRetention is how long a subject revocation ("everything issued
// before T") is kept past T: the longest a token issued before T can live
// (a refresh token, or an access token if configured longer) plus the
// verifiers' leeway and a margin. Past it every token the entry refuses
// has expired anyway. The same retention applies to the subject
// revocations of the gateway's issuers, whose tokens' lifetimes keygate
// cannot know (issuer.ExternalTokenLifetime, also 30 days): a revocation
// made with an until is kept until then if that is later.
func (s *Server) subjectRetention() time.Duration {
	return max(issuer.DefaultRefreshTTL, s.cfg.AccessTokenTTL) + RevocationGrace
}

// RevocationGrace is how long past a revoked token's expiry its revocation
// is kept, in memory, in the store and in Redis: verifiers accept a token
// up to their leeway past exp, and the revocation must outlive that.
const RevocationGrace = Leeway + 4*time.Minute

// purge deletes refresh tokens past their expiry, spent or not, jti
// revocations of tokens that have expired anyway, and subject revocations
// past subjectRetention, so that no table grows with every login, refresh
// and revocation. Every node of a fleet runs it; the deletes are
// idempotent.
func (s *Server) purge(ctx context.Context, now time.Time) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	revocations := func(ctx context.Context, now time.Time) (int, error) {
		return s.store.DeleteExpiredRevocations(ctx, now.Add(-RevocationGrace), now.Add(-s.subjectRetention()))
	}
	for _, p := range []struct {
		what string
		del  func(context.Context, time.Time) (int, error)
	}{{"expired refresh tokens", s.store.DeleteExpiredRefreshTokens}, {"expired revocations", revocations}} {
		n, err := p.del(ctx, now)
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Warn("deleting "+p.what+" failed; retrying at the next purge", "err", err)
		case n > 0:
			s.log.Info(p.what+" deleted", "count", n)
		}
	}
}
