package vaultapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/server"
)

// must is the data of a request that must succeed.
func (e *env) must(tok, method, path, body string) map[string]any {
	e.t.Helper()
	st, b := e.call(tok, method, path, body)
	if st != http.StatusOK && st != http.StatusNoContent {
		e.t.Fatalf("%s %s: %d %s", method, path, st, b)
	}
	if st == http.StatusNoContent {
		return nil
	}
	return data(e.t, b)
}

// dropKey deletes a key through the API.
func (e *env) dropKey(tok, name string) {
	e.t.Helper()
	e.must(tok, "POST", "/v1/transit/keys/"+name+"/config", `{"deletion_allowed":true}`)
	e.must(tok, "DELETE", "/v1/transit/keys/"+name, "")
}

// TestTenantRecreated: a tenant deleted and made again under the same name
// gets a data key of its own, stored in its row, and the keys made in it
// open after the node restarts (the node once went on sealing under the
// deleted tenant's data key, which it kept in memory, so that they no
// longer opened once it was forgotten).
func TestTenantRecreated(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	open := func() *env {
		s, err := server.New(ctx, server.Config{Node: &node.Config{DataDir: dir, Issuer: "https://kg.test", Audience: audience, Dev: true}})
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(s.Handler())
		t.Cleanup(func() { ts.Close(); s.Close() })
		return &env{t: t, srv: s, node: s.Node(), url: ts.URL}
	}
	e := open()
	e.tenant("acme")
	tok := e.token("acme", allScopes...)
	e.must(tok, "POST", "/v1/transit/keys/old", "")
	e.must(tok, "GET", "/v1/transit/wrapping_key", "")
	e.dropKey(tok, "old")
	old, err := e.node.Store().GetTenant(ctx, "acme")
	if err != nil || old.DataKey == nil {
		t.Fatalf("acme's data key: %v", err)
	}
	if err := e.node.Store().DeleteTenant(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	e.tenant("acme")
	e.must(tok, "POST", "/v1/transit/keys/payments", "")
	ct := e.must(tok, "POST", "/v1/transit/encrypt/payments", `{"plaintext":"aGVsbG8="}`)["ciphertext"].(string)
	tn, err := e.node.Store().GetTenant(ctx, "acme")
	if err != nil || tn.DataKey == nil || string(tn.DataKey) == string(old.DataKey) {
		t.Errorf("the new acme's row: data key stored %v, the old one's %v (%v)", tn.DataKey != nil,
			string(tn.DataKey) == string(old.DataKey), err)
	}
	e.srv.Close()

	e = open()
	tok = e.token("acme", allScopes...)
	if st, b := e.call(tok, "POST", "/v1/transit/decrypt/payments", `{"ciphertext":"`+ct+`"}`); st != http.StatusOK ||
		data(t, b)["plaintext"] != "aGVsbG8=" {
		t.Errorf("decrypt after a restart: %d %s", st, b)
	}
	if st, b := e.call(tok, "GET", "/v1/transit/keys/payments", ""); st != http.StatusOK {
		t.Errorf("read after a restart: %d %s", st, b)
	}
}

// TestFleetTenantRecreated: two nodes on one PostgreSQL and one Redis use
// a tenant, which is deleted (announced as the admin API does) and made
// again: the nodes drop what they held of it at once, so that both, and a
// third that never knew the old tenant, agree on the new tenant's wrapping
// key, and a key made at one node opens at the others.
func TestFleetTenantRecreated(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: three nodes on one store, a tenant deleted and made again; run without -short")
	}
	ctx := context.Background()
	nodes := fleetOf(t, 3)
	a, b, c := nodes[0], nodes[1], nodes[2]
	a.tenant("acme")
	tok := a.token("acme", allScopes...)
	a.must(tok, "POST", "/v1/transit/keys/old", "")
	ct := b.must(tok, "POST", "/v1/transit/encrypt/old", `{"plaintext":"aGk="}`)["ciphertext"].(string)
	a.must(tok, "POST", "/v1/transit/decrypt/old", `{"ciphertext":"`+ct+`"}`)
	oldWrap := a.must(tok, "GET", "/v1/transit/wrapping_key", "")["public_key"]
	if w := b.must(tok, "GET", "/v1/transit/wrapping_key", "")["public_key"]; w != oldWrap {
		t.Fatal("the nodes disagree on the wrapping key")
	}
	a.dropKey(tok, "old")
	if err := a.node.Store().DeleteTenant(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	a.node.Publisher().TenantDeleted(ctx, "acme")
	a.tenant("acme")

	b.must(tok, "POST", "/v1/transit/keys/payments", "")
	ct = b.must(tok, "POST", "/v1/transit/encrypt/payments", `{"plaintext":"aGVsbG8="}`)["ciphertext"].(string)
	for name, e := range map[string]*env{"a": a, "b": b, "c": c} {
		if d := e.must(tok, "POST", "/v1/transit/decrypt/payments", `{"ciphertext":"`+ct+`"}`); d["plaintext"] != "aGVsbG8=" {
			t.Errorf("decrypt at %s: %v", name, d)
		}
	}
	// Every node sees the new tenant's wrapping key, made once: a's is
	// gone at once, b's as soon as the notice arrives (within a second),
	// not after a restart.
	wc := c.must(tok, "GET", "/v1/transit/wrapping_key", "")["public_key"]
	if wc == oldWrap {
		t.Error("the new tenant has the deleted one's wrapping key")
	}
	if w := a.must(tok, "GET", "/v1/transit/wrapping_key", "")["public_key"]; w != wc {
		t.Errorf("a's wrapping key is not the new tenant's (the deleted one's: %v)", w == oldWrap)
	}
	for deadline := time.Now().Add(time.Second); ; time.Sleep(10 * time.Millisecond) {
		w := b.must(tok, "GET", "/v1/transit/wrapping_key", "")["public_key"]
		if w == wc {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b's wrapping key is not the new tenant's after 1 s (the deleted one's: %v)", w == oldWrap)
		}
	}
}
