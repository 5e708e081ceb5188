package vaultapi_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/rootkey"
	"github.com/keygate/keygate/internal/server"
	"github.com/keygate/keygate/internal/testnet"
)

// fleetOf starts n servers on one PostgreSQL schema and one Redis prefix,
// with one root key; it skips without DATABASE_URL and REDIS_URL.
func fleetOf(t *testing.T, n int) []*env {
	t.Helper()
	dbBase, redisURL := os.Getenv("DATABASE_URL"), os.Getenv("REDIS_URL")
	if dbBase == "" || redisURL == "" {
		t.Skip("needs PostgreSQL and Redis: DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable REDIS_URL=redis://127.0.0.1:6379/0")
	}
	db := testnet.PostgresSchema(t, dbBase, "kg_transitapi")
	var b [6]byte
	rand.Read(b[:])
	prefix := "kgtest_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		c := testnet.RedisClient(t, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := c.Scan(ctx, 0, prefix+":*", 100).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
	})
	dir := t.TempDir()
	root := filepath.Join(dir, "root.key")
	if err := rootkey.GenerateKeyFile(root, rand.Reader); err != nil {
		t.Fatal(err)
	}
	var out []*env
	for i := range n {
		s, err := server.New(context.Background(), server.Config{Node: &node.Config{
			DataDir: filepath.Join(dir, "node"+string(rune('a'+i))), Issuer: "https://kg.test", Audience: audience,
			TokenService: config.TokenService{DatabaseURL: db, RootKeyFile: root, RedisURL: redisURL, RedisPrefix: prefix}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		ts := httptest.NewServer(s.Handler())
		t.Cleanup(ts.Close)
		out = append(out, &env{t: t, srv: s, node: s.Node(), url: ts.URL})
	}
	return out
}

// TestFleetRotation runs two nodes on one PostgreSQL and one Redis while
// both encrypt, decrypt and rotate one key at once: every ciphertext made
// at either node decrypts at the other at once, whatever version it names,
// and a rotation made at one node is used for encryption at the other
// within a second.
func TestFleetRotation(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: two nodes on one store, rotating while both encrypt; run without -short")
	}
	nodes := fleetOf(t, 2)
	a, b := nodes[0], nodes[1]
	tok := a.token("default", allScopes...)
	if st, body := a.call(tok, "POST", "/v1/transit/keys/shared", ""); st != http.StatusOK {
		t.Fatalf("create: %d %s", st, body)
	}
	encrypt := func(e *env) (string, int, bool) {
		st, body := e.call(tok, "POST", "/v1/transit/encrypt/shared", `{"plaintext":"aGVsbG8="}`)
		if st != http.StatusOK {
			t.Errorf("encrypt: %d %s", st, body)
			return "", 0, false
		}
		d := data(t, body)
		return d["ciphertext"].(string), int(d["key_version"].(float64)), true
	}
	encrypt(b) // b caches version 1

	var stop atomic.Bool
	var wg sync.WaitGroup
	var decrypts atomic.Int64
	for _, pair := range [][2]*env{{a, b}, {b, a}} {
		wg.Go(func() {
			for !stop.Load() {
				ct, _, ok := encrypt(pair[0])
				if !ok {
					return
				}
				st, body := pair[1].call(tok, "POST", "/v1/transit/decrypt/shared", `{"ciphertext":"`+ct+`"}`)
				if st != http.StatusOK || data(t, body)["plaintext"] != "aGVsbG8=" {
					t.Errorf("a ciphertext of one node at the other: %d %s", st, body)
					return
				}
				decrypts.Add(1)
			}
		})
	}
	const rotations = 5
	var worst time.Duration
	for i := range rotations {
		time.Sleep(100 * time.Millisecond) // encryption and decryption go on meanwhile
		at := []*env{a, b}[i%2]
		other := []*env{b, a}[i%2]
		st, body := at.call(tok, "POST", "/v1/transit/keys/shared/rotate", "")
		if st != http.StatusOK {
			t.Fatalf("rotate: %d %s", st, body)
		}
		latest := int(data(t, body)["latest_version"].(float64))
		start := time.Now()
		for {
			_, v, ok := encrypt(other)
			if !ok {
				break
			}
			if v >= latest {
				break
			}
			if time.Since(start) > time.Second {
				t.Errorf("rotation to version %d not used for encryption at the other node after 1 s", latest)
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		worst = max(worst, time.Since(start))
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d rotations; the other node encrypted with each new version after at most %v; %d cross-node decrypts", rotations, worst, decrypts.Load())
	if decrypts.Load() == 0 {
		t.Error("no cross-node decryption ran")
	}
}
