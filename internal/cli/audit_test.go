package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/keygate/keygate/internal/audit"
	"github.com/keygate/keygate/jose"
)

// auditLog writes n records to a file-sink audit log in a new directory,
// rotating every few records, and returns its files, the public key file
// and the last checkpoint.
func auditLog(t *testing.T, h *harness, n int) ([]string, string, audit.Anchor) {
	t.Helper()
	signer, pem := auditKey(t)
	dir := h.path("audit")
	sink, err := audit.NewFileSink(audit.FileConfig{Dir: dir, MaxSize: 2048, Sync: audit.SyncNever})
	if err != nil {
		t.Fatal(err)
	}
	l, err := audit.New(audit.Config{Node: "node-1", Signer: signer, Sinks: []audit.Sink{sink}, CheckpointEvery: 4})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := l.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		r := audit.Record{RequestID: fmt.Sprintf("req-%d", i), Operation: "transit.encrypt", Result: audit.ResultOK, Status: 200}
		if err := l.Write(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	cp, _ := l.LastCheckpoint()
	files, err := sink.Files()
	if err != nil || len(files) < 3 {
		t.Fatalf("files %v, %v", files, err)
	}
	return files, h.write("audit.pub", pem), cp
}

func TestAuditVerify(t *testing.T) {
	h := newHarness(t)
	files, pub, cp := auditLog(t, h, 40)
	_, otherPEM := auditKey(t)
	other := h.write("other.pub", otherPEM)
	args := func(extra ...string) []string {
		return append(append([]string{"audit", "verify", "--key", pub}, extra...), files...)
	}
	last := files[len(files)-1]
	tampered := func(t *testing.T) string {
		b, err := os.ReadFile(files[1])
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), filepath.Base(files[1]))
		os.WriteFile(p, bytes.Replace(b, []byte(`"result":"ok"`), []byte(`"result":"refused"`), 1), 0o600)
		return p
	}

	tests := []struct {
		name           string
		args           func(t *testing.T) []string
		code           int
		stdout, stderr string
	}{
		{"the files as written", func(*testing.T) []string { return args() }, ExitOK,
			"ok: node node-1, " + fmt.Sprint(len(files)) + " file(s)", ""},
		{"with the last checkpoint as anchor", func(*testing.T) []string {
			return args("--expect-seq", fmt.Sprint(cp.Seq), "--expect-hash", cp.Hash.String())
		}, ExitOK, fmt.Sprintf("last checkpoint: seq %d hash %s", cp.Seq, cp.Hash), ""},
		{"an edited line", func(t *testing.T) []string {
			return []string{"audit", "verify", "--key", pub, files[0], tampered(t), files[2]}
		}, ExitFail, "", ":2 (seq "},
		{"files out of order", func(*testing.T) []string {
			return []string{"audit", "verify", "--key", pub, files[0], files[2], files[1]}
		}, ExitFail, "", "seq_gap"},
		{"a truncation the anchor shows", func(*testing.T) []string {
			return append([]string{"audit", "verify", "--key", pub, "--expect-seq", fmt.Sprint(cp.Seq + 1)}, files...)
		}, ExitFail, "", "short_of_anchor"},
		{"the wrong key", func(*testing.T) []string {
			return append([]string{"audit", "verify", "--key", other}, files...)
		}, ExitFail, "", "unknown_key"},
		{"the wrong key and the right one", func(*testing.T) []string {
			return append([]string{"audit", "verify", "--key", other, "--key", pub}, files...)
		}, ExitOK, "ok: ", ""},
		{"another node", func(*testing.T) []string { return args("--node", "node-2") }, ExitFail, "", "wrong_node"},
		{"no key", func(*testing.T) []string { return append([]string{"audit", "verify"}, files...) }, ExitUsage, "", "--key is required"},
		{"no file", func(*testing.T) []string { return []string{"audit", "verify", "--key", pub} }, ExitUsage, "", "too few arguments"},
		{"a hash without a seq", func(*testing.T) []string { return args("--expect-hash", cp.Hash.String()) }, ExitUsage, "", "--expect-hash needs --expect-seq"},
		{"a malformed hash", func(*testing.T) []string { return args("--expect-seq", "3", "--expect-hash", "xyz") }, ExitUsage, "", "64 lower-case hex"},
		{"a key that is not Ed25519", func(t *testing.T) []string {
			p := h.path("es256.pem")
			h.must("keys", "generate", "--alg", "ES256", "--out", p)
			return append([]string{"audit", "verify", "--key", p}, files...)
		}, ExitFail, "", "--key"},
		{"a missing file", func(*testing.T) []string {
			return []string{"audit", "verify", "--key", pub, h.path("nope.jsonl")}
		}, ExitFail, "", "no such file"},
		{"the last file alone", func(*testing.T) []string {
			return []string{"audit", "verify", "--key", pub, last}
		}, ExitOK, "warning: the chain is verified from seq", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expect(t, h.run(tt.args(t)...), tt.code, tt.stdout, tt.stderr)
		})
	}
}

// auditKey returns a new audit signing key and its public key as PEM.
func auditKey(t *testing.T) (*audit.SigningKey, []byte) {
	t.Helper()
	k, err := audit.GenerateSigningKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := jose.MarshalPublicPEM(k.Public())
	if err != nil {
		t.Fatal(err)
	}
	return k, pem
}

// TestServeAuditRun: keygate serve records every token and admin request
// in its audit files, rotated by size; keygate audit key prints the key
// they verify with, whether the node is sealed or not; and keygate audit
// verify passes on the files after a run that was sealed, served more
// requests and was unsealed again, the lines written sealed signed by the
// first checkpoint after. No file holds the passphrase, the admin token, a
// client secret or a token.
func TestServeAuditRun(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: a sealed serve's audit log across seal and unseal (Argon2id); run without -short")
	}
	const pass = "a long unseal passphrase"
	h := newHarness(t)
	data := h.path("data")
	h.stdin = pass + "\n"
	h.must("keyring", "init", "--data-dir", data)
	adminToken := strings.Repeat("k", 40)
	tokenFile := h.write("admin.token", []byte(adminToken+"\n"))
	cfg := h.write("keygate.yaml", []byte("audit:\n  file: {max_size: 4096}\n  checkpoint_every: 5\n"))
	h.env = []string{"KEYGATE_TOKEN_SERVICE_ADMIN_TOKEN_FILE=" + tokenFile}
	s := h.serve("--listen", "127.0.0.1:0", "--config", cfg, "--data-dir", data)
	h.env = nil
	stop := sync.OnceValue(s.stop)
	defer stop()
	adminURL := s.adminURL(t)
	admin := []string{"--admin", adminURL, "--admin-token-file", tokenFile}
	if r := h.run(append([]string{"audit", "key"}, admin...)...); r.code != ExitFail || !strings.Contains(r.stderr, "sealed") {
		t.Errorf("audit key of a node never unsealed: %d %s", r.code, r.stderr)
	}
	h.stdin = pass + "\n"
	h.must("unseal", "--admin", adminURL)
	out := h.must(append([]string{"clients", "create", "--name", "svc"}, admin...)...)
	id, secret := clientIDLine.FindStringSubmatch(out)[1], clientSecretLine.FindStringSubmatch(out)[1]
	token := []string{"token", "--client", id, "--secret", secret, "--url", "http://" + s.addr}
	secrets := []string{pass, adminToken, secret}
	for range 12 {
		tok := strings.TrimSpace(h.must(token...))
		secrets = append(secrets, tok, tok[strings.LastIndexByte(tok, '.')+1:])
	}
	r := h.run(append([]string{"audit", "key"}, admin...)...)
	if r.code != ExitOK || !strings.Contains(r.stdout, "BEGIN PUBLIC KEY") || !strings.Contains(r.stderr, "--expect-seq") {
		t.Fatalf("audit key: %d %s %s", r.code, r.stdout, r.stderr)
	}
	key := h.write("audit-key.pem", []byte(r.stdout))

	h.must(append([]string{"seal"}, admin...)...)
	sealedKey := h.run(append([]string{"audit", "key"}, admin...)...)
	if sealedKey.stdout != r.stdout {
		t.Errorf("audit key while sealed: %q, want the same key", sealedKey.stdout)
	}
	for range 3 {
		if r := h.run(token...); r.code != ExitFail {
			t.Fatalf("token while sealed: %d", r.code)
		}
	}
	h.must(append([]string{"clients", "list"}, admin...)...)
	h.stdin = pass + "\n"
	h.must("unseal", "--admin", adminURL)
	h.must(token...)
	if code := stop(); code != ExitOK {
		t.Fatalf("serve exit %d:\n%s", code, s.stderr)
	}

	files, err := filepath.Glob(filepath.Join(data, "audit", "audit-*.jsonl"))
	if err != nil || len(files) < 2 {
		t.Fatalf("audit files %v %v: want rotations", files, err)
	}
	v := h.run(append([]string{"audit", "verify", "--key", key}, files...)...)
	if v.code != ExitOK || !strings.Contains(v.stdout, "ok: node kgn_") || strings.Contains(v.stdout, " 0 rotations") {
		t.Fatalf("audit verify: %d\n%s\n%s", v.code, v.stdout, v.stderr)
	}
	var all []byte
	for _, f := range files {
		b, _ := os.ReadFile(f)
		all = append(all, b...)
	}
	for _, op := range []string{`"op":"sys.unseal"`, `"op":"sys.seal"`, `"op":"admin.clients.create"`, `"op":"oauth2.token.client_credentials"`,
		`"op":"admin.clients.list"`, `"op":"admin.audit.read"`, `"result":"pending"`} {
		if !bytes.Contains(all, []byte(op)) {
			t.Errorf("no record with %s", op)
		}
	}
	for _, s := range secrets {
		if bytes.Contains(all, []byte(s)) {
			t.Errorf("an audit file holds a secret: %.12q…", s)
		}
	}
}

// TestServeAuditSettings: audit.disabled turns the log off, audit.file.dir
// moves it, audit.node names it, each from the environment; a bad node
// name and a configuration without a sink are refused before anything is
// opened.
func TestServeAuditSettings(t *testing.T) {
	h := newHarness(t)
	h.env = []string{"KEYGATE_AUDIT_NODE=two words"}
	if r := h.run("serve", "--data-dir", h.path("never")); r.code != ExitFail || !strings.Contains(r.stderr, "audit.node: must be") {
		t.Errorf("KEYGATE_AUDIT_NODE with a space: %d %s", r.code, r.stderr)
	}
	h.env = nil
	cfg := h.write("nosink.yaml", []byte("audit:\n  file: {disabled: true}\n"))
	if r := h.run("serve", "--config", cfg, "--data-dir", h.path("never")); r.code == ExitOK || !strings.Contains(r.stderr, "audit: no sink") {
		t.Errorf("no audit sink: %d %s", r.code, r.stderr)
	}
	if _, err := os.Stat(h.path("never")); err == nil {
		t.Error("the data directory was made for a configuration that does not validate")
	}

	dir := h.path("elsewhere")
	h.env = []string{"KEYGATE_AUDIT_FILE_DIR=" + dir, "KEYGATE_AUDIT_NODE=node-7"}
	s := h.serve("--listen", "127.0.0.1:0", "--dev", "--data-dir", h.path("d1"))
	s.stop()
	if files, _ := filepath.Glob(filepath.Join(dir, "audit-*.jsonl")); len(files) != 1 {
		t.Errorf("KEYGATE_AUDIT_FILE_DIR: files %v", files)
	} else if b, _ := os.ReadFile(files[0]); !bytes.Contains(b, []byte(`"node":"node-7"`)) {
		t.Errorf("KEYGATE_AUDIT_NODE: %s", b)
	}
	h.env = []string{"KEYGATE_AUDIT_DISABLED=true"}
	s = h.serve("--listen", "127.0.0.1:0", "--dev", "--data-dir", h.path("d2"))
	s.stop()
	if _, err := os.Stat(filepath.Join(h.path("d2"), "audit")); err == nil {
		t.Error("KEYGATE_AUDIT_DISABLED: an audit directory was made")
	}
	if !strings.Contains(s.stderr.String(), "audit log is off") {
		t.Errorf("KEYGATE_AUDIT_DISABLED is not warned about:\n%s", s.stderr)
	}
}
