package cli

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/store/snapshot"
)

// TestBackupRestoreCommands: keygate backup against a running serve --dev
// (the admin API) and offline (--data-dir) writes snapshots of the same
// rows; keygate restore puts one into a new data directory and a node
// started there with the dev root key serves the same JWKS and demo
// client. A second restore into it, a truncated or altered file, an
// existing --out and missing flags are refused, and a refused restore
// creates no store.
func TestBackupRestoreCommands(t *testing.T) {
	h := newHarness(t)
	s, admin := h.serveDev(t)
	data := h.path("data")

	online := h.path("online.snapshot")
	out := h.must(append([]string{"backup", "--out", online}, admin...)...)
	if !strings.Contains(out, "Wrote "+online+": ") || !strings.Contains(out, "same root key") {
		t.Errorf("backup printed %q", out)
	}
	expect(t, h.run(append([]string{"backup", "--out", online}, admin...)...), ExitFail, "", "exists: a backup never overwrites a file")
	expect(t, h.run("backup", "--out", h.path("x"), "--admin", s.adminURL(t), "--admin-token-file", h.write("bad.token", []byte("wrong-token-0123456789abcdef"))),
		ExitFail, "", "401")
	if _, err := os.Stat(h.path("x")); !os.IsNotExist(err) {
		t.Errorf("a refused backup left %s: %v", h.path("x"), err)
	}
	offline := h.path("offline.snapshot")
	h.must("backup", "--out", offline, "--data-dir", data)
	wantJWKS := getBody(t, "http://"+s.addr+"/.well-known/jwks.json")
	for _, f := range []string{online, offline} {
		fi, err := os.Stat(f)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v; want 0600", f, err, fi.Mode())
		}
	}
	entries, _ := os.ReadDir(h.dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".partial-") {
			t.Errorf("a temporary file is left: %s", e.Name())
		}
	}

	raw, err := os.ReadFile(online)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"truncated", raw[:len(raw)*2/3]},
		{"altered", bytes.Replace(raw, []byte(`"kgc_demo"`), []byte(`"kgc_demX"`), 1)},
		{"empty", nil},
	} {
		target := h.path("refused-" + c.name)
		r := h.run("restore", "--in", h.write(c.name+".snapshot", c.data), "--data-dir", target)
		expect(t, r, ExitFail, "", "not a complete, intact keygate snapshot")
		if _, err := os.Stat(filepath.Join(target, node.StoreFile)); !os.IsNotExist(err) {
			t.Errorf("%s: the refused restore created the store: %v", c.name, err)
		}
	}
	expect(t, h.run("restore", "--in", online), ExitUsage, "", "give exactly one of --data-dir and --database-url")
	expect(t, h.run("restore", "--data-dir", h.path("r")), ExitUsage, "", "--in FILE is required")
	expect(t, h.run("backup"), ExitUsage, "", "--out FILE is required")

	restored := h.path("restored")
	out = h.must("restore", "--in", online, "--data-dir", restored)
	if !strings.Contains(out, "Restored ") || !strings.Contains(out, "a sqlite snapshot") {
		t.Errorf("restore printed %q", out)
	}
	expect(t, h.run("restore", "--in", online, "--data-dir", restored), ExitFail, "", "the target store is not empty")
	expect(t, h.run("restore", "--in", offline, "--data-dir", data), ExitFail, "", "the target store is not empty")

	// The dev root key is the data directory's: the new node needs it.
	key, err := os.ReadFile(filepath.Join(data, node.RootKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	h.write("restored/"+node.RootKeyFile, key)
	s2 := h.serve("--listen", "127.0.0.1:0", "--dev", "--data-dir", restored)
	t.Cleanup(func() { s2.stop() })
	if got := getBody(t, "http://"+s2.addr+"/.well-known/jwks.json"); got != wantJWKS {
		t.Errorf("JWKS of the restored node:\n%s\nwant\n%s", got, wantJWKS)
	}
	if strings.Contains(s2.stdout.String(), "client_secret") {
		t.Errorf("the restored node made a new demo client:\n%s", s2.stdout)
	}
}

func getBody(t *testing.T, url string) string {
	t.Helper()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	var b bytes.Buffer
	if _, err := b.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestBackupKilled: a backup process killed with SIGKILL while the
// snapshot arrives leaves no file at --out, only its temporary file, which
// restore refuses.
func TestBackupKilled(t *testing.T) {
	h := newHarness(t)
	sent := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", snapshotContentType)
		w.WriteHeader(http.StatusOK)
		w.Write([]byte(`{"format":"keygate-snapshot","version":1,"backend":"sqlite","schema":6,"created_at":"2026-01-01T00:00:00Z"}` + "\n" +
			`{"table":"clients","columns":[{"name":"id","kind":"text"}]}` + "\n" + `["kgc_1"]` + "\n"))
		w.(http.Flusher).Flush()
		close(sent)
		select { // the rest never comes
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out := h.path("killed.snapshot")
	cmd := exec.Command(exe, "backup", "--out", out, "--admin", srv.URL, "--admin-token-file", h.write("t", []byte("token-0123456789abcdef0123456789")))
	cmd.Env = append(os.Environ(), "KEYGATE_TEST_AS_CLI=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sent:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the backup never asked")
	}
	// Wait until the part sent is in the temporary file, then kill.
	var partial string
	for deadline := time.Now().Add(10 * time.Second); partial == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		m, _ := filepath.Glob(filepath.Join(h.dir, ".killed.snapshot.partial-*"))
		if len(m) == 1 {
			if fi, err := os.Stat(m[0]); err == nil && fi.Size() > 0 {
				partial = m[0]
			}
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait() //nolint:errcheck // killed
	if partial == "" {
		t.Fatal("no temporary file with the part received")
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a killed backup left %s: %v", out, err)
	}
	expect(t, h.run("restore", "--in", partial, "--data-dir", h.path("r")), ExitFail, "", "not a complete, intact keygate snapshot")
	if f, err := os.Open(partial); err == nil {
		_, err := snapshot.Read(f)
		f.Close()
		if err == nil {
			t.Error("the partial file reads as a snapshot")
		}
	}
}

// TestBackupCutShort: a node that stops sending midway (its store failed
// while it streamed) leaves the command an answer without its trailer: it
// fails, saying so, and writes no file.
func TestBackupCutShort(t *testing.T) {
	h := newHarness(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", snapshotContentType)
		w.Write([]byte(`{"format":"keygate-snapshot","version":1,"backend":"postgres","schema":6,"created_at":"2026-01-01T00:00:00Z"}` + "\n"))
	}))
	defer srv.Close()
	out := h.path("cut.snapshot")
	expect(t, h.run("backup", "--out", out, "--admin", srv.URL, "--admin-token-file", h.write("t", []byte("token-0123456789abcdef0123456789"))),
		ExitFail, "", "the snapshot received does not check")
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a cut-short backup left %s: %v", out, err)
	}
	if m, _ := filepath.Glob(filepath.Join(h.dir, ".cut.snapshot.partial-*")); len(m) != 0 {
		t.Errorf("temporary files left: %v", m)
	}
}
