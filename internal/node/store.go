package node

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/issuer"
	"github.com/keygate/keygate/internal/keyfile"
	"github.com/keygate/keygate/internal/operr"
	"github.com/keygate/keygate/internal/revoke"
	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/store/postgres"
	"github.com/keygate/keygate/internal/store/sqlite"
)

// The store's tracing wrapper (tracedStore, Config.Traced) is generated
// from store.Store's method set; a test in gentrace fails when it is out
// of date.
//go:generate go run ./internal/gentrace -o storetrace.go

// openStore opens PostgreSQL when ts has a database URL, else SQLite in
// dataDir. Its error is for the operator (operr), with the driver's text:
// why the store cannot be reached. Except for a connection string pgx cannot
// parse: it masks the password only as far as it can parse the string, so
// that text stays out of the message.
func openStore(ctx context.Context, ts config.TokenService, dataDir string) (store.Store, error) {
	var st store.Store
	var err error
	if ts.DatabaseURL != "" {
		st, err = postgres.Open(ctx, ts.DatabaseURL, postgres.WithTimeout(ts.StoreTimeout))
	} else {
		st, err = sqlite.Open(ctx, filepath.Join(dataDir, StoreFile))
	}
	var pce *pgconn.ParseConfigError
	switch {
	case errors.As(err, &pce):
		return nil, operr.Wrap(err, "opening the store: the database URL is not a PostgreSQL connection string (postgres://user@host/db, or key=value pairs)")
	case err != nil:
		return nil, operr.Errorf("opening the store: %w", err)
	}
	return st, nil
}

// readURLFiles reads the database and Redis URLs from the files the
// settings name instead (database_url_file, redis_url_file).
func (n *Node) readURLFiles() error {
	for _, u := range []struct {
		name       string
		file       string
		url        *string
		prefixes   []string
		prefixText string
	}{
		{"database-url", n.ts.DatabaseURLFile, &n.ts.DatabaseURL, []string{"postgres://", "postgresql://"}, "a postgres:// URL"},
		{"redis-url", n.ts.RedisURLFile, &n.ts.RedisURL, []string{"redis://", "rediss://"}, "a redis:// or rediss:// URL"},
	} {
		if u.file == "" {
			continue
		}
		v, err := readURLFile(u.file, u.prefixes)
		if errors.Is(err, errNotURL) { // the content is a secret: the error names the file only
			return fmt.Errorf("--%s-file %s: does not hold %s", u.name, u.file, u.prefixText)
		} else if err != nil {
			return fmt.Errorf("--%s-file: %w", u.name, err)
		}
		*u.url = v
	}
	return nil
}

var errNotURL = errors.New("not a URL of the kind required")

// readURLFile reads a URL from file: its content, trimmed, which must
// begin with one of prefixes.
func readURLFile(file string, prefixes []string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	v := strings.TrimSpace(string(b))
	for _, p := range prefixes {
		if strings.HasPrefix(v, p) {
			return v, nil
		}
	}
	return "", errNotURL
}

// databaseTLSWarning returns why the connection to PostgreSQL that url
// describes can be read or changed on the network, or "" when it cannot:
// a server on loopback or a Unix socket, or TLS that verifies the server's
// certificate (sslmode=verify-full, or verify-ca / require with
// sslrootcert). libpq's and pgx's default, sslmode=prefer, encrypts without
// verifying and falls back to plain text. The environment (PGSSLMODE, ...)
// counts, as it does when the store connects.
func databaseTLSWarning(rawURL string) string {
	cfg, err := pgconn.ParseConfig(rawURL)
	if err != nil {
		return "" // the store reports the error when it connects
	}
	targets := []*pgconn.FallbackConfig{{Host: cfg.Host, Port: cfg.Port, TLSConfig: cfg.TLSConfig}}
	targets = append(targets, cfg.Fallbacks...)
	unverified := ""
	for _, t := range targets {
		if localHost(t.Host) {
			continue
		}
		switch tc := t.TLSConfig; {
		case tc == nil:
			return fmt.Sprintf("the connection to PostgreSQL at %s can be plain text (sslmode disable, allow, or prefer, the default): use sslmode=verify-full with sslrootcert", t.Host)
		case tc.InsecureSkipVerify && tc.VerifyPeerCertificate == nil && unverified == "":
			unverified = fmt.Sprintf("the connection to PostgreSQL at %s does not verify the server's certificate (sslmode=require without sslrootcert): use sslmode=verify-full with sslrootcert", t.Host)
		}
	}
	return unverified
}

// localHost reports whether host is a Unix socket directory, localhost or
// a loopback address.
func localHost(host string) bool {
	if strings.HasPrefix(host, "/") || strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// loadRevocations fills the node's in-memory revocation set from the store
// and returns how many revocations it holds.
func (n *Node) loadRevocations(ctx context.Context) (int, error) {
	revs, err := n.store.Revocations(ctx, n.cfg.Now().Add(-RevocationGrace))
	if err != nil {
		return 0, fmt.Errorf("revocations: %w", err)
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
	n.revs.mem = mem
	return len(revs), nil
}

// devAdminToken loads the dev admin token from the data directory,
// creating it if needed.
func (n *Node) devAdminToken() error {
	path := filepath.Join(n.cfg.DataDir, AdminTokenFile)
	n.boot.AdminTokenPath = path
	// The data directory is locked (lockDir) while the node is set up, so
	// the file cannot appear between this read and the write below.
	switch tok, err := issuer.ReadBearer("dev admin token", path, ""); {
	case err == nil:
		n.log.Info("dev admin token loaded", "path", path)
		n.admin = tok
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	token, err := NewAdminToken(n.cfg.Rand)
	if err != nil {
		return fmt.Errorf("admin token: %w", err)
	}
	if err := keyfile.WriteNew(path, []byte(token+"\n")); err != nil {
		return fmt.Errorf("admin token: %w", err)
	}
	n.boot.AdminToken = token
	n.admin = issuer.NewBearer(token)
	n.log.Info("dev admin token created", "path", path)
	return nil
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

// demoClient creates the dev demo client, in the default tenant, unless it
// exists.
func (n *Node) demoClient(ctx context.Context) error {
	secret, err := issuer.NewSecret(n.cfg.Rand)
	if err != nil {
		return fmt.Errorf("demo client: %w", err)
	}
	now := n.cfg.Now().UTC()
	d := issuer.SecretDigest(secret)
	err = n.store.CreateClient(ctx, store.Client{ID: DemoClientID, Tenant: store.DefaultTenant, Name: "demo", SecretDigest: d[:],
		Scopes: []string{"demo"}, CreatedAt: now, UpdatedAt: now})
	switch {
	case errors.Is(err, store.ErrConflict):
		return nil
	case err != nil:
		return fmt.Errorf("demo client: %w", err)
	}
	n.boot.DemoClientID, n.boot.DemoClientSecret = DemoClientID, secret
	n.log.Info("demo client created", "client_id", DemoClientID)
	return nil
}
