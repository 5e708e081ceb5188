package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
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
