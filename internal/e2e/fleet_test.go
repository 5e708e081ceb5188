package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/issuer"
	"github.com/keygate/keygate/internal/mint"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/rootkey"
	"github.com/keygate/keygate/internal/server"
	"github.com/keygate/keygate/internal/testnet"
)

// redisPrefix returns REDIS_URL and a fresh prefix for t (testnet.RedisPrefix);
// under -short it skips.
func redisPrefix(t *testing.T) (redisURL, prefix string) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration: Redis; run without -short")
	}
	return testnet.RedisPrefix(t)
}

// TestFleet runs three nodes on one PostgreSQL schema and one Redis prefix:
// a token of one is accepted by the others, a revocation at one reaches the
// others within a second, and a key rotated at one is published and
// trusted by the others at once.
func TestFleet(t *testing.T) {
	if os.Getenv("REDIS_URL") == "" || os.Getenv("DATABASE_URL") == "" {
		t.Skip("needs PostgreSQL and Redis: DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable REDIS_URL=redis://127.0.0.1:6379/0")
	}
	redisURL, prefix := redisPrefix(t)
	fleetFlow(t, redisURL, prefix)
}

// TestFleetRedisCluster is TestFleet on a three-master Redis Cluster
// (testnet.RedisCluster), reached through a URL that lists its seeds: the
// revocation set, its sharded pub/sub, the login limiter and the rotation
// notices all work across the cluster's slots.
func TestFleetRedisCluster(t *testing.T) {
	if os.Getenv("DATABASE_URL") == "" {
		t.Skip("needs PostgreSQL: DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	}
	fleetFlow(t, testnet.RedisCluster(t), "kgcluster")
}

func fleetFlow(t *testing.T, redisURL, prefix string) {
	dbURL := newSchema(t)
	dir := t.TempDir()
	rootKey := filepath.Join(dir, "root.key")
	if err := rootkey.GenerateKeyFile(rootKey, rand.Reader); err != nil {
		t.Fatal(err)
	}
	adminToken := strings.Repeat("a", 16) + hex.EncodeToString([]byte(prefix))
	const iss = "https://keygate.fleet.test"
	var nodes []*live
	for i := range 3 {
		nodes = append(nodes, startLive(t, server.Config{AdminToken: adminToken,
			Node: &node.Config{DataDir: filepath.Join(dir, "node"+string(rune('a'+i))), Issuer: iss, Audience: testAudience,
				TokenService: config.TokenService{DatabaseURL: dbURL, RootKeyFile: rootKey, RedisURL: redisURL, RedisPrefix: prefix}}}))
	}
	a, b, c := nodes[0], nodes[1], nodes[2]
	hc := &http.Client{Timeout: 5 * time.Second}
	authStatus := func(base, tok string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+"/auth", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}

	// A client created at A gets a token from A that B accepts.
	jh := http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + adminToken}}
	resp, body := do(t, http.MethodPost, a.admin+"/v1/admin/clients", `{"name":"fleet","scopes":["demo"]}`, jh)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("admin create client at A: %d %s", resp.StatusCode, body)
	}
	var cl struct {
		ID     string `json:"client_id"`
		Secret string `json:"client_secret"`
	}
	if err := json.Unmarshal(body, &cl); err != nil || cl.ID == "" {
		t.Fatalf("admin create client answered %s: %v", body, err)
	}
	tok := clientToken(t, a.base, cl.ID, cl.Secret)
	for _, n := range nodes {
		if st := authStatus(n.base, tok); st != http.StatusOK {
			t.Fatalf("/auth at %s with A's token: %d", n.base, st)
		}
	}

	// Revoked at B, refused at C within a second.
	basic := form()
	req, _ := http.NewRequest(http.MethodPost, "/", nil)
	req.SetBasicAuth(url.QueryEscape(cl.ID), url.QueryEscape(cl.Secret))
	basic.Set("Authorization", req.Header.Get("Authorization"))
	const rounds = 50
	var lat []time.Duration
	for i := range rounds {
		tok := clientToken(t, a.base, cl.ID, cl.Secret)
		if st := authStatus(c.base, tok); st != http.StatusOK { // also caches it at C
			t.Fatalf("round %d: /auth at C before revocation: %d", i, st)
		}
		start := time.Now()
		if resp, body := do(t, http.MethodPost, b.base+"/oauth2/revoke", "token="+url.QueryEscape(tok), basic); resp.StatusCode != http.StatusOK {
			t.Fatalf("round %d: revoke at B: %d %s", i, resp.StatusCode, body)
		}
		for authStatus(c.base, tok) != http.StatusUnauthorized {
			if time.Since(start) > time.Second {
				t.Fatalf("round %d: C still accepts a token revoked at B after %v", i, time.Since(start))
			}
			time.Sleep(time.Millisecond)
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	t.Logf("revocation propagation B -> C over %d revocations (revoke request start to C's first refusal): p50 %v, p99 %v, max %v",
		rounds, lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1])

	// An immediate rotation at A: B and C trust the new key at once and
	// publish it within 2 s.
	resp, body = do(t, http.MethodPost, a.admin+"/v1/admin/keys/rotate", `{"immediate":true}`, jh)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("rotate at A: %d %s", resp.StatusCode, body)
	}
	rotated := time.Now()
	var rot struct {
		KID string `json:"kid"`
	}
	if err := json.Unmarshal(body, &rot); err != nil || rot.KID == "" {
		t.Fatalf("rotate answered %s: %v", body, err)
	}
	for _, n := range []*live{b, c} {
		for {
			resp, body := do(t, http.MethodGet, n.base+"/.well-known/jwks.json", "", nil)
			if resp.StatusCode == http.StatusOK && strings.Contains(string(body), rot.KID) {
				break
			}
			if time.Since(rotated) > 2*time.Second {
				t.Fatalf("%s does not publish the new kid %s 2 s after the rotation: %s", n.base, rot.KID, body)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	t.Logf("new key published by B and C %v after the rotation", time.Since(rotated))
	for i := range 20 {
		tok := clientToken(t, a.base, cl.ID, cl.Secret)
		if kid := tokenKID(t, tok); kid != rot.KID {
			t.Fatalf("token %d from A after the rotation has kid %s, want %s", i, kid, rot.KID)
		}
		for _, n := range []*live{b, c} {
			if st := authStatus(n.base, tok); st != http.StatusOK {
				t.Fatalf("token %d signed by the new key refused at %s: %d", i, n.base, st)
			}
		}
	}
	for _, n := range nodes {
		if resp, body := do(t, http.MethodGet, n.admin+"/readyz", "", nil); resp.StatusCode != http.StatusOK {
			t.Errorf("/readyz at %s: %d %s", n.admin, resp.StatusCode, body)
		}
	}

	// Login attempts are limited fleet-wide: the burst spent across the
	// nodes, the next attempt at any node is refused. A decision Redis does
	// not make within its 100 ms falls back to the node's own limit (by
	// design); on a loaded machine that can happen, and then the fleet-wide
	// count is not what this checks, so the check is made again.
	for try := 1; ; try++ {
		before := fallbackDecisions(nodes)
		user := fmt.Sprint("nobody-", try)
		for i := range node.LoginLimit.Burst {
			// Another try may find the address's budget (shared by the
			// fleet too) spent already.
			st := login(t, nodes[i%3].base, basic, user)
			if st != http.StatusBadRequest && st != http.StatusUnauthorized && (try == 1 || st != http.StatusTooManyRequests) {
				t.Fatalf("try %d, login attempt %d: %d", try, i, st)
			}
		}
		st := login(t, c.base, basic, user)
		if fallbackDecisions(nodes) == before {
			if st != http.StatusTooManyRequests {
				t.Errorf("login attempt past the fleet's burst: %d, want 429", st)
			}
			break
		}
		if try == 3 {
			t.Fatalf("Redis did not decide %d logins in a row without a fallback to the local limit", node.LoginLimit.Burst+1)
		}
		t.Logf("try %d: a limiter fell back to the node's own limit; trying again", try)
	}
}

// fallbackDecisions counts the rate-limit decisions the nodes' local
// fallbacks made while Redis did not answer in time.
func fallbackDecisions(nodes []*live) uint64 {
	var n uint64
	for _, l := range nodes {
		for _, ls := range l.FleetStats().Limiters {
			n += ls.Fallback
		}
	}
	return n
}

// login makes one failed /v1/login attempt and returns its status.
func login(t *testing.T, base string, h http.Header, user string) int {
	t.Helper()
	resp, _ := do(t, http.MethodPost, base+"/v1/login", "username="+user+"&password=wrong", h)
	return resp.StatusCode
}

func TestLoginRateLimitLocal(t *testing.T) {
	l := startLive(t, server.Config{Node: &node.Config{DataDir: filepath.Join(t.TempDir(), "data"), Issuer: testIssuer, Audience: testAudience, Dev: true}})
	b := l.Bootstrap()
	h := form()
	req, _ := http.NewRequest(http.MethodPost, "/", nil)
	req.SetBasicAuth(b.DemoClientID, b.DemoClientSecret)
	h.Set("Authorization", req.Header.Get("Authorization"))
	for i := range node.LoginLimit.Burst {
		if st := login(t, l.base, h, "nobody"); st == http.StatusTooManyRequests {
			t.Fatalf("login attempt %d refused by the limit", i)
		}
	}
	if st := login(t, l.base, h, "nobody"); st != http.StatusTooManyRequests {
		t.Errorf("login attempt past the burst: %d, want 429", st)
	}
}

// behindLoopbackProxy starts a dev node that trusts a reverse proxy on
// loopback (counting IPv6 clients by ipv6Prefix) and returns it with the
// headers of a login by its demo client forwarded for a client address.
func behindLoopbackProxy(t *testing.T, ipv6Prefix int) (*live, func(addr string) http.Header) {
	t.Helper()
	l := startLive(t, server.Config{Node: &node.Config{DataDir: filepath.Join(t.TempDir(), "data"), Issuer: testIssuer, Audience: testAudience, Dev: true,
		TokenService: config.TokenService{TrustedProxies: []string{"127.0.0.0/8", "::1/128"}, IPv6Prefix: ipv6Prefix}}})
	b := l.Bootstrap()
	h := form()
	req, _ := http.NewRequest(http.MethodPost, "/", nil)
	req.SetBasicAuth(b.DemoClientID, b.DemoClientSecret)
	h.Set("Authorization", req.Header.Get("Authorization"))
	return l, func(addr string) http.Header {
		c := h.Clone()
		c.Set("X-Forwarded-For", addr)
		return c
	}
}

// TestLoginRateLimitBehindProxy: with the loopback proxy trusted, the
// per-address login limit counts the X-Forwarded-For client, so one client
// using up its attempts does not lock out another behind the same proxy.
func TestLoginRateLimitBehindProxy(t *testing.T) {
	l, from := behindLoopbackProxy(t, 0)
	// Different accounts, so that only the per-address limit can refuse.
	for i := range node.LoginLimit.Burst {
		if st := login(t, l.base, from("198.51.100.1"), fmt.Sprintf("user%d", i)); st == http.StatusTooManyRequests {
			t.Fatalf("attempt %d refused by the limit", i)
		}
	}
	if st := login(t, l.base, from("198.51.100.1"), "another"); st != http.StatusTooManyRequests {
		t.Errorf("attempt past the burst from the same client: %d, want 429", st)
	}
	if st := login(t, l.base, from("198.51.100.2"), "yet-another"); st == http.StatusTooManyRequests {
		t.Error("a second client behind the same proxy was refused by the first one's limit")
	}
}

// TestLoginRateLimitIPv6Prefix: Config.IPv6Prefix reaches the per-address
// login limit: by default two clients of one /64 share a budget; with 128
// each address has its own.
func TestLoginRateLimitIPv6Prefix(t *testing.T) {
	for _, bits := range []int{0, 128} {
		t.Run(fmt.Sprint(bits), func(t *testing.T) {
			l, from := behindLoopbackProxy(t, bits)
			for i := range node.LoginLimit.Burst {
				if st := login(t, l.base, from("2001:db8:0:1::1"), fmt.Sprintf("user%d", i)); st == http.StatusTooManyRequests {
					t.Fatalf("attempt %d refused by the limit", i)
				}
			}
			st := login(t, l.base, from("2001:db8:0:1::2"), "another")
			if shared := st == http.StatusTooManyRequests; shared != (bits == 0) {
				t.Errorf("IPv6Prefix %d: an attempt from another address of the /64 after the burst: %d", bits, st)
			}
		})
	}
}

// TestRedisFailClosed: with MaxStaleness set and Redis unreachable, the node
// refuses every token and /readyz says why; refreshes, decided on the
// store, go on.
func TestRedisFailClosed(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: waits out the revocation set's staleness with Redis unreachable; run without -short")
	}
	l := startLive(t, server.Config{Node: &node.Config{DataDir: filepath.Join(t.TempDir(), "data"), Issuer: testIssuer, Audience: testAudience, Dev: true,
		TokenService: config.TokenService{RedisURL: "redis://127.0.0.1:1/0", RevocationMaxStaleness: 3 * time.Second}}})
	tok, err := l.Mint(mint.Claims{Subject: "x", Audience: []string{testAudience}, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if resp, _ := do(t, http.MethodGet, l.base+"/auth", "", bearer(tok)); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/auth while the revocation set was never loaded: %d", resp.StatusCode)
	}
	resp, body := do(t, http.MethodGet, l.admin+"/readyz", "", nil)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `"reasons":["redis_unreachable"]`) {
		t.Errorf("/readyz while failing closed: %d %s", resp.StatusCode, body)
	}

	// A refresh is decided on the store, which the stale set does not
	// stop: a subject not revoked there refreshes; once it is revoked
	// there, the refresh is refused and the family revoked.
	b := l.Bootstrap()
	jh := http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + b.AdminToken}}
	resp, body = do(t, http.MethodPost, l.admin+"/v1/admin/users", `{"username":"alice","password":"a long password","scopes":["demo"]}`, jh)
	var user struct {
		ID string `json:"id"`
	}
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(body, &user) != nil || user.ID == "" {
		t.Fatalf("create user: %d %s", resp.StatusCode, body)
	}
	creds := "&client_id=" + b.DemoClientID + "&client_secret=" + b.DemoClientSecret
	var tr struct {
		Refresh string `json:"refresh_token"`
	}
	resp, body = do(t, http.MethodPost, l.base+"/v1/login", "username=alice&password=a+long+password"+creds, form())
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &tr) != nil || tr.Refresh == "" {
		t.Fatalf("login while failing closed: %d %s", resp.StatusCode, body)
	}
	resp, body = do(t, http.MethodPost, l.base+"/oauth2/token", "grant_type=refresh_token&refresh_token="+tr.Refresh+creds, form())
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &tr) != nil || tr.Refresh == "" {
		t.Fatalf("refresh while failing closed, subject not revoked: %d %s, want 200", resp.StatusCode, body)
	}
	if resp, body := do(t, http.MethodPost, l.admin+"/v1/admin/revocations", `{"subject":"`+user.ID+`"}`, jh); resp.StatusCode != http.StatusCreated {
		t.Fatalf("revoke the subject: %d %s", resp.StatusCode, body)
	}
	resp, body = do(t, http.MethodPost, l.base+"/oauth2/token", "grant_type=refresh_token&refresh_token="+tr.Refresh+creds, form())
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"invalid_grant"`) {
		t.Errorf("refresh while failing closed, subject revoked in the store: %d %s, want 400 invalid_grant", resp.StatusCode, body)
	}
	d := issuer.SecretDigest(tr.Refresh)
	if rt, err := l.Store().GetRefreshToken(context.Background(), d[:]); err != nil || !rt.Revoked {
		t.Errorf("the refresh token refused for its revoked subject: %+v, %v; want its family revoked", rt, err)
	}
}

func tokenKID(t *testing.T, tok string) string {
	t.Helper()
	h, err := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[0])
	if err != nil {
		t.Fatal(err)
	}
	var hdr struct {
		KID string `json:"kid"`
	}
	if err := json.Unmarshal(h, &hdr); err != nil {
		t.Fatal(err)
	}
	return hdr.KID
}

// TestFleetTokenRateLimit: the per-client limit at /oauth2/token is one
// budget for the whole fleet, kept in Redis.
func TestFleetTokenRateLimit(t *testing.T) {
	if os.Getenv("REDIS_URL") == "" || os.Getenv("DATABASE_URL") == "" {
		t.Skip("needs PostgreSQL and Redis: DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable REDIS_URL=redis://127.0.0.1:6379/0")
	}
	redisURL, prefix := redisPrefix(t)
	dbURL := newSchema(t)
	dir := t.TempDir()
	rootKey := filepath.Join(dir, "root.key")
	if err := rootkey.GenerateKeyFile(rootKey, rand.Reader); err != nil {
		t.Fatal(err)
	}
	var nodes []*live
	for i := range 2 {
		nodes = append(nodes, startLive(t, server.Config{Node: &node.Config{DataDir: filepath.Join(dir, "node"+string(rune('a'+i))), Issuer: testIssuer, Audience: testAudience,
			TokenService: config.TokenService{DatabaseURL: dbURL, RootKeyFile: rootKey, RedisURL: redisURL, RedisPrefix: prefix, TokenRateLimit: new(1.5)}}}))
	}
	secret := addClient(t, nodes[0], "svc")
	for i, n := range []*live{nodes[0], nodes[1], nodes[0]} {
		if _, err := clientToken2(n.base, "svc", secret); err != nil {
			t.Fatalf("request %d within the fleet's budget: %v", i+1, err)
		}
	}
	for i, n := range nodes {
		_, err := clientToken2(n.base, "svc", secret)
		if err == nil || !strings.Contains(err.Error(), "429") {
			t.Errorf("node %d past the fleet's budget: %v, want 429", i, err)
		}
	}
}
