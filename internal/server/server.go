// Package server runs keygate's HTTP service: a health check, the public
// JWKS and the /auth forward-auth decision, behind the timeouts, header
// limits and graceful shutdown a public listener needs.
//
// Its ES256 signing key lives in the data directory, created on first start
// with mode 0600 and reused afterwards. Key material and whole tokens never
// reach its logs: a token appears only as an 8-hex-digit SHA-256 fingerprint.
package server

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/keygate/keygate/internal/mint"
	"github.com/keygate/keygate/jose"
)

// Limits and timeouts of the HTTP server.
const (
	MaxHeaderBytes    = 16 << 10
	ReadHeaderTimeout = 5 * time.Second
	ReadTimeout       = 10 * time.Second
	WriteTimeout      = 10 * time.Second
	IdleTimeout       = 120 * time.Second
	ShutdownTimeout   = 10 * time.Second // how long Serve drains on shutdown
	Leeway            = 60 * time.Second // clock skew /auth tolerates
)

// Config configures a Server.
type Config struct {
	DataDir  string           // holds the signing key; created (0700) if missing
	Issuer   string           // the "iss" /auth demands and Mint writes
	Audience string           // the "aud" /auth demands
	Logger   *slog.Logger     // nil discards logs
	Now      func() time.Time // nil means time.Now
	Rand     io.Reader        // source of jti values; nil means crypto/rand
}

// Validate reports a missing required field.
func (c *Config) Validate() error {
	switch {
	case c.DataDir == "":
		return errors.New("server: no data directory")
	case c.Issuer == "":
		return errors.New("server: no issuer")
	case c.Audience == "":
		return errors.New("server: no audience")
	}
	return nil
}

// Server is keygate's HTTP service. Create it with New.
type Server struct {
	cfg      Config
	log      *slog.Logger
	signer   *jose.Signer
	verifier *jose.Verifier
	jwks     []byte
	handler  http.Handler
}

// New loads or creates the signing key in cfg.DataDir and builds the
// handlers. It does not listen.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	s := &Server{cfg: cfg, log: cfg.Logger}
	if err := s.loadKeys(); err != nil {
		return nil, err
	}
	s.handler = s.routes()
	return s, nil
}

func (s *Server) loadKeys() error {
	signer, err := loadOrCreateSigner(s.cfg.DataDir, s.log)
	if err != nil {
		return err
	}
	key := signer.Key()
	s.signer = signer
	s.verifier, err = jose.NewVerifier(key, []jose.Alg{jose.ES256}, jose.Expected{
		Issuer:   s.cfg.Issuer,
		Audience: []string{s.cfg.Audience},
		Require:  []string{"exp"},
		Leeway:   Leeway,
	}, jose.WithClock(s.cfg.Now))
	if err != nil {
		return fmt.Errorf("server: verifier: %w", err)
	}
	if s.jwks, err = jose.NewKeySet(key).MarshalJSON(); err != nil {
		return fmt.Errorf("server: encode JWKS: %w", err)
	}
	s.jwks = append(s.jwks, '\n')
	return nil
}

// Handler returns the HTTP handler, for tests and for embedding.
func (s *Server) Handler() http.Handler { return s.handler }

// Thumbprint returns the RFC 7638 thumbprint of the signing key, which is
// also its kid.
func (s *Server) Thumbprint() string { return s.signer.Key().Thumbprint() }

// Mint signs claims with the server's key; an empty Issuer becomes the
// server's own.
func (s *Server) Mint(c mint.Claims) (string, error) {
	if c.Issuer == "" {
		c.Issuer = s.cfg.Issuer
	}
	return mint.Sign(s.signer, c, s.cfg.Now(), s.cfg.Rand)
}

// Serve serves HTTP on ln until ctx is done, then stops accepting, waits up
// to ShutdownTimeout for requests in flight, and returns. It closes ln.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := s.httpServer()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	s.log.Info("listening", "addr", ln.Addr().String(), "issuer", s.cfg.Issuer, "kid", s.Thumbprint())
	select {
	case err := <-errc:
		return fmt.Errorf("server: serve: %w", err)
	case <-ctx.Done():
	}
	s.log.Info("shutting down", "drain", ShutdownTimeout)
	return s.shutdown(srv, errc)
}

func (s *Server) shutdown(srv *http.Server, errc <-chan error) error {
	ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		return errors.Join(fmt.Errorf("server: drain: %w", err), srv.Close())
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("server: serve: %w", err)
	}
	s.log.Info("stopped")
	return nil
}

func (s *Server) httpServer() *http.Server {
	return &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}
