package node

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/testnet"
)

// TestRedisTLS: a rediss:// URL with the CA file and client certificate
// reaches a Redis that speaks TLS only and requires client certificates;
// without the CA, or without the client certificate, it does not; and
// skip_verify, or TLS files with redis://, are refused.
func TestRedisTLS(t *testing.T) {
	ca := testnet.NewCA(t, "redis CA")
	dir := t.TempDir()
	srvCert, srvKey := ca.Issue(t, testnet.LeafOptions{Hosts: []string{"localhost"}}).Write(t, dir, "redis")
	caFile := ca.WriteCA(t, dir, "ca.pem")
	client := ca.Issue(t, testnet.LeafOptions{Hosts: []string{"keygate"}, Client: true})
	cliCert, cliKey := client.Write(t, dir, "client")
	addr := testnet.RedisTLS(t, srvCert, srvKey, caFile, &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost",
		Certificates: []tls.Certificate{client.TLSCertificate(t)}})
	ping := func(rawURL string, ts config.TokenService) error {
		c, _, err := redisClient(rawURL, ts)
		if err != nil {
			return err
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		return c.Ping(ctx).Err()
	}
	url := "rediss://localhost:" + strings.TrimPrefix(addr, "127.0.0.1:") + "/0"
	full := config.TokenService{RedisCAFile: caFile, RedisCertFile: cliCert, RedisKeyFile: cliKey}
	if err := ping(url, full); err != nil {
		t.Fatalf("rediss with the CA and a client certificate: %v", err)
	}
	var unknown x509.UnknownAuthorityError
	if err := ping(url, config.TokenService{RedisCertFile: cliCert, RedisKeyFile: cliKey}); !errors.As(err, &unknown) {
		t.Errorf("without the CA file (system roots): %v", err)
	}
	if err := ping(url, config.TokenService{RedisCAFile: caFile}); err == nil {
		t.Error("without a client certificate: answered")
	}
	if err := ping(strings.Replace(url, "localhost", "127.0.0.1", 1), full); err == nil {
		t.Error("a host name the certificate does not hold: answered")
	}
	for _, bad := range []struct{ url, want string }{
		{url + "?skip_verify=true", "skip_verify"},
		{url + "?skip_verify=1", "skip_verify"},
		{"redis://127.0.0.1:6379/0", "must be rediss://"},
	} {
		if _, _, err := redisClient(bad.url, full); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v", bad.url, err)
		}
	}
	if _, _, err := redisClient(url+"?skip_verify=false", full); err != nil {
		t.Errorf("skip_verify=false refused: %v", err)
	}

	// The whole node: the fleet's revocation fan-out syncs over TLS.
	n, err := Open(t.Context(), Config{DataDir: filepath.Join(t.TempDir(), "data"), Issuer: "https://keygate.test", Audience: "api",
		TokenService: config.TokenService{RedisURL: url, RedisCAFile: caFile, RedisCertFile: cliCert, RedisKeyFile: cliKey}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	deadline := time.Now().Add(10 * time.Second)
	for st, shared := n.RevocationStatus(); !shared || !st.Ready(); st, shared = n.RevocationStatus() {
		if time.Now().After(deadline) {
			t.Fatalf("the revocation set did not sync from Redis over TLS: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestNotices: a notice published on a named channel reaches every node of
// the fleet that subscribed to it, the publisher included, and no other
// channel's handler; without Redis, Publish and Subscribe do nothing.
func TestNotices(t *testing.T) {
	redisURL := os.Getenv("REDIS_URL")
	if redisURL == "" {
		t.Skip("needs Redis: REDIS_URL=redis://127.0.0.1:6379/0")
	}
	var b [6]byte
	rand.Read(b[:])
	prefix := "kgtest_" + hex.EncodeToString(b[:])
	open := func(ts config.TokenService) *Node {
		n, err := Open(t.Context(), Config{DataDir: filepath.Join(t.TempDir(), "data"), Issuer: "https://keygate.test", Audience: "api",
			TokenService: ts})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Close)
		return n
	}
	a := open(config.TokenService{RedisURL: redisURL, RedisPrefix: prefix})
	c := open(config.TokenService{RedisURL: redisURL, RedisPrefix: prefix})
	// The handlers never block: the loop below publishes until it has
	// heard both nodes, and a handler stuck on a full channel would hold
	// its node's notices, and Close, for ever.
	got := make(chan string, 64)
	hear := func(m string) {
		select {
		case got <- m:
		default:
		}
	}
	for name, n := range map[string]*Node{"a": a, "c": c} {
		if err := n.Subscribe(t.Context(), "transit", func(_ context.Context, payload string) { hear(name + " " + payload) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Subscribe(t.Context(), "other", func(_ context.Context, payload string) { hear("other " + payload) }); err != nil {
		t.Fatal(err)
	}
	// A subscription takes effect once Redis has it: publish until both
	// nodes have heard one.
	heard := map[string]bool{}
	deadline := time.Now().Add(10 * time.Second)
	for !heard["a k1"] || !heard["c k1"] {
		if time.Now().After(deadline) {
			t.Fatalf("heard %v, want a k1 and c k1", heard)
		}
		if err := a.Publish(t.Context(), "transit", "k1"); err != nil {
			t.Fatal(err)
		}
		select {
		case m := <-got:
			heard[m] = true
		case <-time.After(100 * time.Millisecond):
		}
	}
	for m := range heard {
		if strings.HasPrefix(m, "other") {
			t.Errorf("another channel's handler heard %q", m)
		}
	}

	alone := open(config.TokenService{})
	if err := alone.Subscribe(t.Context(), "transit", func(context.Context, string) { t.Error("a node without Redis heard a notice") }); err != nil {
		t.Fatal(err)
	}
	if err := alone.Publish(t.Context(), "transit", "k2"); err != nil {
		t.Errorf("Publish without Redis: %v", err)
	}
}
