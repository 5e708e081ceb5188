package cli

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/rootkey"
	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/testnet"
)

// TestRekeyKill9: keygate operator rekey rotates a running node's root key;
// the node is killed with SIGKILL in the middle of rewrapping, restarted
// on the same store with the old key file (the operator has not replaced
// it yet), carries on where the records say and finishes; then a start
// with the old key is refused and one with the new key opens every record.
func TestRekeyKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the keygate binary")
	}
	bin := buildKeygate(t)
	h := newHarness(t)
	data := h.path("data")
	oldKey, newKey := h.path("old.key"), h.path("new.key")
	if err := rootkey.GenerateKeyFile(oldKey, rand.Reader); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 32)
	rand.Read(b)
	admin := base64.RawURLEncoding.EncodeToString(b)
	adminFile := h.write("admin.token", []byte(admin+"\n"))

	// Sixty tenants with a data key each, and a value sealed under each.
	const tenants = 60
	sealed := map[string][]byte{}
	withNode(t, data, oldKey, func(n *node.Node) {
		for i := range tenants {
			name := fmt.Sprintf("t%03d", i)
			if err := n.Store().CreateTenant(t.Context(), store.Tenant{Name: name, CreatedAt: time.Now()}); err != nil {
				t.Fatal(err)
			}
			k, err := n.TenantKeys().Fresh(t.Context(), name)
			if err != nil {
				t.Fatal(err)
			}
			if sealed[name], err = k.Seal([]byte(name), nil); err != nil {
				t.Fatal(err)
			}
		}
	})

	addr, adminAddr := testnet.ClosedAddr(t), testnet.ClosedAddr(t)
	args := []string{"serve", "--data-dir", data, "--listen", addr, "--admin-listen", adminAddr, "--issuer", "https://kg.test"}
	env := []string{"KEYGATE_TOKEN_SERVICE_ROOT_KEY_FILE=" + oldKey, "KEYGATE_TOKEN_SERVICE_ADMIN_TOKEN_FILE=" + adminFile}
	first := startChildEnv(t, bin, args, env, addr)
	adminURL := "http://" + adminAddr
	out := h.must("operator", "rekey", "--generate", newKey, "--current-key-file", oldKey, "--rate", "15", "--admin", adminURL, "--admin-token-file", adminFile)
	if !strings.Contains(out, "started") || !strings.Contains(out, newKey) {
		t.Fatalf("operator rekey printed %q", out)
	}
	progress := func() string {
		return h.must("operator", "rekey", "--status", "--admin", adminURL, "--admin-token-file", adminFile)
	}
	deadline := time.Now().Add(30 * time.Second)
	for st := progress(); !strings.Contains(st, "rewrapped=2") && !strings.Contains(st, "rewrapped=3"); st = progress() {
		if time.Now().After(deadline) || strings.Contains(st, "state=done") {
			t.Fatalf("the rotation did not get partway: %s", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	first.cmd.Process.Signal(syscall.SIGKILL)
	<-first.done
	if s := first.cmd.ProcessState; s.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("keygate did not die of SIGKILL: %v", s)
	}

	// Restarted with the old key file: the killed node's lease runs out,
	// and this one finishes the rotation.
	second := startChildEnv(t, bin, args, env, addr)
	st := h.must("operator", "rekey", "--status", "--wait", "--admin", adminURL, "--admin-token-file", adminFile)
	if !strings.Contains(st, "state=done") || !strings.Contains(st, fmt.Sprintf("rewrapped=%d/%d", tenants+1, tenants+1)) {
		t.Fatalf("after the restart: %s", st)
	}
	second.kill()

	// Only the new key opens the store now, and it opens every value.
	if _, err := openNode(data, oldKey); err == nil || !strings.Contains(err.Error(), "replaced by") {
		t.Fatalf("a start with the old key: %v, want a refusal saying it was replaced", err)
	}
	n, err := openNode(data, newKey)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	for name, ct := range sealed {
		k, err := n.TenantKeys().Fresh(t.Context(), name)
		if err != nil {
			t.Fatalf("tenant %s: %v", name, err)
		}
		if pt, err := k.Open(ct, nil); err != nil || string(pt) != name {
			t.Fatalf("tenant %s: opened %q, %v", name, pt, err)
		}
	}
}

// openNode opens a node on data with the root key file.
func openNode(data, keyFile string) (*node.Node, error) {
	return node.Open(context.Background(), node.Config{DataDir: data, Issuer: "https://kg.test", Audience: "api",
		TokenService: config.TokenService{RootKeyFile: keyFile}})
}

// withNode opens a node on data with the root key file, runs f, closes it.
func withNode(t *testing.T, data, keyFile string, f func(n *node.Node)) {
	t.Helper()
	n, err := openNode(data, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	f(n)
}

// TestTenantRotateKeyKill9: keygate tenants rotate-key rotates a tenant's
// data key on a running node that holds the tenant's secrets; the node is
// killed with SIGKILL partway through the rewrapping and started again:
// it carries on once the killed node's lease runs out, finishes with the
// old version retired, and every secret reads back as it was written.
func TestTenantRotateKeyKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the keygate binary")
	}
	bin := buildKeygate(t)
	h := newHarness(t)
	data, keyFile := h.path("data"), h.path("root.key")
	if err := rootkey.GenerateKeyFile(keyFile, rand.Reader); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 32)
	rand.Read(b)
	adminFile := h.write("admin.token", []byte(base64.RawURLEncoding.EncodeToString(b)+"\n"))
	addr, adminAddr := testnet.ClosedAddr(t), testnet.ClosedAddr(t)
	args := []string{"serve", "--data-dir", data, "--listen", addr, "--admin-listen", adminAddr, "--issuer", "https://kg.test"}
	env := []string{"KEYGATE_TOKEN_SERVICE_ROOT_KEY_FILE=" + keyFile, "KEYGATE_TOKEN_SERVICE_ADMIN_TOKEN_FILE=" + adminFile}
	first := startChildEnv(t, bin, args, env, addr)
	base, adm := "http://"+addr, []string{"--admin", "http://" + adminAddr, "--admin-token-file", adminFile}

	// Thirty secrets of acme, two versions each: 90 records with their metadata.
	h.must(append([]string{"tenants", "create", "acme"}, adm...)...)
	created := h.must(append([]string{"clients", "create", "--name", "app", "--scopes", "secrets:read:*,secrets:write:*", "--tenant", "acme"}, adm...)...)
	id, secret := clientIDLine.FindStringSubmatch(created)[1], clientSecretLine.FindStringSubmatch(created)[1]
	tok := strings.TrimSpace(h.must("token", "--client", id, "--secret", secret, "--url", base))
	kv := func(method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, base+"/v1/secret/data/"+path, strings.NewReader(body))
		req.Header.Set("X-Vault-Token", tok)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}
	for i := range 30 {
		for v := range 2 {
			if code, out := kv(http.MethodPost, fmt.Sprintf("s%02d", i), fmt.Sprintf(`{"data":{"v":"%d.%d"}}`, i, v)); code != http.StatusOK {
				t.Fatalf("write s%02d: %d %s", i, code, out)
			}
		}
	}

	out := h.must(append([]string{"tenants", "rotate-key", "--rate", "15", "acme"}, adm...)...)
	if !strings.Contains(out, "version 2 is current") {
		t.Fatalf("rotate-key printed %q", out)
	}
	status := func() string { return h.must(append([]string{"tenants", "rotate-key", "--status", "acme"}, adm...)...) }
	deadline := time.Now().Add(30 * time.Second)
	for st := status(); !strings.Contains(st, "rewrapped=3") && !strings.Contains(st, "rewrapped=4"); st = status() {
		if time.Now().After(deadline) || strings.Contains(st, "rotation=done") {
			t.Fatalf("the rotation did not get partway: %s", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	first.cmd.Process.Signal(syscall.SIGKILL)
	<-first.done
	if s := first.cmd.ProcessState; s.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("keygate did not die of SIGKILL: %v", s)
	}

	second := startChildEnv(t, bin, args, env, addr)
	defer second.kill()
	st := h.must(append([]string{"tenants", "rotate-key", "--status", "--wait", "acme"}, adm...)...)
	if !strings.Contains(st, "current=2 versions=[2] rotation=done") || !strings.Contains(st, "rewrapped=90/90") {
		t.Fatalf("after the restart: %s", st)
	}
	tok = strings.TrimSpace(h.must("token", "--client", id, "--secret", secret, "--url", base))
	for i := range 30 {
		for v := range 2 {
			code, out := kv(http.MethodGet, fmt.Sprintf("s%02d?version=%d", i, v+1), "")
			if code != http.StatusOK || !strings.Contains(out, fmt.Sprintf(`"v":"%d.%d"`, i, v)) {
				t.Errorf("s%02d version %d after the rotation: %d %s", i, v+1, code, out)
			}
		}
	}
}
