package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/jose"
)

// keyFileYAML trusts idpIssuer's tokens verified with the keys in path.
func keyFileYAML(path string) string {
	return fmt.Sprintf(`
issuers:
  - issuer: %s
    key_files: [%s]
    algorithms: [ES256]
    audiences: [api]
`, idpIssuer, path)
}

// keyFile is a JWKS file of the signers' public keys.
type keyFile struct {
	t    *testing.T
	path string
}

func newKeyFile(t *testing.T, signers ...*jose.Signer) *keyFile {
	t.Helper()
	f := &keyFile{t: t, path: filepath.Join(t.TempDir(), "keys.jwks.json")}
	f.write(signers...)
	return f
}

func jwksOf(t *testing.T, signers ...*jose.Signer) []byte {
	t.Helper()
	var ks []*jose.Key
	for _, s := range signers {
		ks = append(ks, s.Key())
	}
	b, err := jose.NewKeySet(ks...).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// write replaces the file in place.
func (f *keyFile) write(signers ...*jose.Signer) { f.writeRaw(jwksOf(f.t, signers...)) }

func (f *keyFile) writeRaw(b []byte) {
	f.t.Helper()
	if err := os.WriteFile(f.path, b, 0o600); err != nil {
		f.t.Fatal(err)
	}
}

// rename replaces the file atomically, as configuration management and
// Kubernetes volume updates do: a new file renamed over the old one.
func (f *keyFile) rename(signers ...*jose.Signer) {
	f.t.Helper()
	tmp := f.path + ".tmp"
	if err := os.WriteFile(tmp, jwksOf(f.t, signers...), 0o600); err != nil {
		f.t.Fatal(err)
	}
	if err := os.Rename(tmp, f.path); err != nil {
		f.t.Fatal(err)
	}
}

// eventually polls cond until it holds or 8 s (four watcher periods) pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(8 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 8s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func authCode(t *testing.T, c *configured, tok string) int {
	t.Helper()
	code, _, _ := get(t, c.url+"/auth", tok)
	return code
}

// TestKeyFileRemovedOnReload: a key removed from a key file stops
// verifying as soon as Reload returns, though the configuration file did
// not change, and though its tokens were in the verified-token cache.
func TestKeyFileRemovedOnReload(t *testing.T) {
	k1, k2 := ecSigner(t, "k1"), ecSigner(t, "k2")
	f := newKeyFile(t, k1, k2)
	c := startConfigured(t, keyFileYAML(f.path))
	tok1, tok2 := idpToken(t, k1, nil), idpToken(t, k2, nil)
	for range 2 { // the second time from the cache
		if code := authCode(t, c, tok1); code != 200 {
			t.Fatalf("k1 token before removal: %d", code)
		}
	}
	f.write(k2) // k1 is compromised: the operator removes it
	if err := c.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code := authCode(t, c, tok1); code != 401 {
		t.Errorf("token of the removed key after Reload: %d, want 401", code)
	}
	if code := authCode(t, c, tok2); code != 200 {
		t.Errorf("token of the kept key after Reload: %d, want 200", code)
	}
}

// TestKeyFileAddedOnReload: a key added to a key file verifies after Reload.
func TestKeyFileAddedOnReload(t *testing.T) {
	k1, k2 := ecSigner(t, "k1"), ecSigner(t, "k2")
	f := newKeyFile(t, k1)
	c := startConfigured(t, keyFileYAML(f.path))
	tok2 := idpToken(t, k2, nil)
	if code := authCode(t, c, tok2); code != 401 {
		t.Fatalf("k2 token before k2 is in the file: %d", code)
	}
	f.write(k1, k2)
	if err := c.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code := authCode(t, c, tok2); code != 200 {
		t.Errorf("token of the added key after Reload: %d, want 200", code)
	}
}

// TestKeyFileBrokenOnReload: a key file that no longer parses, or holds no
// usable key, fails the reload as a bad configuration does: counted and
// logged, and the keys last read keep serving (neither an empty set nor a
// silent success).
func TestKeyFileBrokenOnReload(t *testing.T) {
	k1 := ecSigner(t, "k1")
	f := newKeyFile(t, k1)
	c := startConfigured(t, keyFileYAML(f.path))
	tok1 := idpToken(t, k1, nil)
	for i, bad := range [][]byte{
		[]byte(`{"keys":[{"kty":"EC",`), // cut short
		[]byte(`{"keys":[]}`),           // no key at all
		[]byte("not a key"),
	} {
		f.writeRaw(bad)
		err := c.Reload(context.Background())
		if err == nil || !strings.Contains(err.Error(), f.path) {
			t.Errorf("reload with key file %q: %v, want an error naming the file", bad, err)
		}
		if code := authCode(t, c, tok1); code != 200 {
			t.Errorf("after a refused reload (%q) the last good keys stopped serving: %d", bad, code)
		}
		want := fmt.Sprintf(`keygate_config_reloads_total{result="error"} %d`, i+1)
		if body := scrape(t, c); !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if body := scrape(t, c); !strings.Contains(body, `keygate_key_file_loads_total{issuer="https://idp.test/",result="error"} 3`) {
		t.Error("failed key-file loads not counted in keygate_key_file_loads_total")
	}
	// Fixed, the file loads again.
	f.write(k1)
	if err := c.Reload(context.Background()); err != nil {
		t.Fatalf("reload with the file fixed: %v", err)
	}
}

// TestKeyFileWatched: without any reload, the watcher notices a key file
// replaced by rename, and an edit of the same size whose modification time
// was put back, and applies both on the next request after it has.
func TestKeyFileWatched(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: waits for the key-file watcher's polls; run without -short")
	}
	k1, k2, k3 := ecSigner(t, "k1"), ecSigner(t, "k2"), ecSigner(t, "k3")
	f := newKeyFile(t, k1, k2)
	c := startConfigured(t, keyFileYAML(f.path))
	tok1, tok2, tok3 := idpToken(t, k1, nil), idpToken(t, k2, nil), idpToken(t, k3, nil)
	if authCode(t, c, tok1) != 200 || authCode(t, c, tok2) != 200 {
		t.Fatal("tokens of the file's keys refused")
	}

	f.rename(k2) // k1 removed, atomically
	eventually(t, "k1 refused after its removal by rename", func() bool { return authCode(t, c, tok1) == 401 })
	if code := authCode(t, c, tok2); code != 200 {
		t.Errorf("k2 token after k1's removal: %d", code)
	}

	// k2 replaced by k3 under a kid of the same length: the file keeps its
	// size, and its modification time is set back, so only its content
	// tells the change.
	st, err := os.Stat(f.path)
	if err != nil {
		t.Fatal(err)
	}
	before := jwksOf(t, k2)
	after := jwksOf(t, k3)
	if len(before) != len(after) {
		t.Fatalf("test set-up: the two files differ in size (%d, %d)", len(before), len(after))
	}
	f.writeRaw(after)
	if err := os.Chtimes(f.path, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "same-size edit with the old mtime applied", func() bool {
		return authCode(t, c, tok3) == 200 && authCode(t, c, tok2) == 401
	})
	if body := scrape(t, c); !strings.Contains(body, `keygate_key_file_loads_total{issuer="https://idp.test/",result="ok"}`) {
		t.Error("key-file loads not counted")
	}
}

// TestKeyFileWatchedBroken: a key file the watcher finds broken is logged
// once and counted, and the last good keys keep serving; once fixed it is
// read again.
func TestKeyFileWatchedBroken(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: waits for the key-file watcher's polls; run without -short")
	}
	k1, k2 := ecSigner(t, "k1"), ecSigner(t, "k2")
	f := newKeyFile(t, k1)
	var logs syncBuffer
	c := startConfiguredWith(t, keyFileYAML(f.path), &logs)
	tok1, tok2 := idpToken(t, k1, nil), idpToken(t, k2, nil)
	if authCode(t, c, tok1) != 200 {
		t.Fatal("k1 token refused")
	}
	f.writeRaw([]byte(`{"keys":[{"kty":"EC",`))
	eventually(t, "broken key file counted", func() bool {
		return strings.Contains(scrape(t, c), `keygate_key_file_loads_total{issuer="https://idp.test/",result="error"} 1`)
	})
	time.Sleep(4500 * time.Millisecond) // two more watcher periods on the same broken file
	if code := authCode(t, c, tok1); code != 200 {
		t.Errorf("last good keys stopped serving while the file is broken: %d", code)
	}
	body := scrape(t, c)
	if !strings.Contains(body, `keygate_key_file_loads_total{issuer="https://idp.test/",result="error"} 1`) {
		t.Error("the same broken file counted more than once")
	}
	if n := strings.Count(logs.String(), "key files failed to load"); n != 1 {
		t.Errorf("%d log lines for one broken file, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), f.path) {
		t.Errorf("log does not name the file:\n%s", logs.String())
	}
	f.write(k2)
	eventually(t, "fixed key file applied", func() bool { return authCode(t, c, tok2) == 200 && authCode(t, c, tok1) == 401 })
}

// TestKeyFileWatcherStops: the watcher goroutine ends with Serve.
func TestKeyFileWatcherStops(t *testing.T) {
	f := newKeyFile(t, ecSigner(t, "k1"))
	c := startConfigured(t, keyFileYAML(f.path))
	c.stop()
	if stacks := goroutineStacks(); strings.Contains(stacks, "(*Server).watch") {
		t.Errorf("the watcher outlived Serve:\n%s", stacks)
	}
}

func goroutineStacks() string {
	buf := make([]byte, 1<<20)
	return string(buf[:goruntime.Stack(buf, true)])
}
