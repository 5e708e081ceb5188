package cli

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/keygate/keygate/internal/audit"
	"github.com/keygate/keygate/internal/keyfile"
	"github.com/keygate/keygate/jose"
)

// auditCommands are the subcommands of "keygate audit".
func auditCommands() []*command {
	return []*command{
		{name: "verify", summary: "verify audit log files: their hash chain and signed checkpoints", run: (*app).auditVerify},
		{name: "key", summary: "print a running node's audit checkpoint key (for verify --key)", run: (*app).auditKey},
	}
}

// auditKey prints the public key a node's audit checkpoints verify with,
// read from its admin API: PEM, as audit verify --key takes it. The key is
// derived from the root key, so every node of a fleet prints the same one.
func (a *app) auditKey(ctx context.Context, args []string) error {
	fs := a.flags("keygate audit key", "[flags]",
		"Prints, in PEM, the Ed25519 public key a running node's audit checkpoints are signed\n"+
			"with (GET /v1/admin/audit): save it for keygate audit verify --key. The key is derived\n"+
			"from the root key, the same on every node of a fleet; a sealed node prints the one it\n"+
			"kept from when it was last unsealed. On stderr: the node's id, the key's id and the\n"+
			"last checkpoint (for verify --expect-seq N --expect-hash HEX).")
	var af adminFlags
	af.register(fs)
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	var out struct {
		Enabled        bool   `json:"enabled"`
		Node           string `json:"node"`
		PublicKey      string `json:"public_key"`
		KeyID          string `json:"key_id"`
		LastCheckpoint *struct {
			Seq  uint64 `json:"seq"`
			Hash string `json:"hash"`
		} `json:"last_checkpoint"`
	}
	if err := af.call(ctx, a, http.MethodGet, "/v1/admin/audit", nil, &out); err != nil {
		return err
	}
	switch {
	case !out.Enabled:
		return errors.New("the node's audit log is off (audit.disabled)")
	case out.PublicKey == "":
		return errors.New("the node is sealed and has not kept its audit key: unseal it (keygate unseal) and ask again")
	}
	fmt.Fprint(a.stdout, out.PublicKey)
	fmt.Fprintf(a.stderr, "node %s, key %s", out.Node, out.KeyID)
	if cp := out.LastCheckpoint; cp != nil {
		fmt.Fprintf(a.stderr, ", last checkpoint: --expect-seq %d --expect-hash %s", cp.Seq, cp.Hash)
	}
	fmt.Fprintln(a.stderr)
	return nil
}

func (a *app) auditVerify(_ context.Context, args []string) error {
	fs := a.flags("keygate audit verify", "--key PUBKEYFILE [--expect-seq N [--expect-hash HEX]] [flags] FILE...",
		"Verifies audit log FILEs, given in chain order (audit-*.jsonl sort so), as one\n"+
			"chain: every line's hash and link, the seqs, and every checkpoint's signature\n"+
			"under a key given with --key, never one named in a file. Prints a summary, or\n"+
			"names the first bad line (file:line, seq, what is wrong) on stderr and exits 1.\n"+
			"A truncation right after a checkpoint shows only against --expect-seq (a seq\n"+
			"known to have been written, such as the last checkpoint kept in the store).")
	var keys stringsFlag
	fs.Var(&keys, "key", "a `PUBKEYFILE` with the audit signing key's Ed25519 public key (PEM or JWK);\nrepeat for earlier keys (required)")
	expectSeq := fs.Uint64("expect-seq", 0, "fail unless the chain reaches seq `N`")
	expectHash := fs.String("expect-hash", "", "with --expect-seq: the `HEX` hash the line with that seq must have")
	node := fs.String("node", "", "fail unless the files hold the chain of `NODE`")
	unsigned := fs.Bool("allow-unsigned-tail", false, "accept lines after the last checkpoint (a file still being written):\nthey are counted, not authenticated")
	files, err := fs.parse(args, 1, -1)
	if err != nil {
		return err
	}
	switch {
	case len(keys) == 0:
		return usageErrorf(fs.Name(), "--key is required")
	case *expectHash != "" && *expectSeq == 0:
		return usageErrorf(fs.Name(), "--expect-hash needs --expect-seq")
	}
	opts := audit.VerifyOptions{Node: *node, MinSeq: *expectSeq, AllowUnsignedTail: *unsigned}
	if *expectHash != "" {
		h, err := audit.ParseHash(*expectHash)
		if err != nil {
			return usageErrorf(fs.Name(), "--expect-hash: %v", err)
		}
		opts.Anchor = &audit.Anchor{Seq: *expectSeq, Hash: h}
	}
	for _, path := range keys {
		pub, err := loadAuditKey(path)
		if err != nil {
			return err
		}
		opts.Keys = append(opts.Keys, pub)
	}
	sum, err := audit.Verify(opts, files...)
	var p *audit.Problem
	if errors.As(err, &p) {
		fmt.Fprintf(a.stderr, "FAILED: %v\n", p)
		if p.Since != nil {
			fmt.Fprintf(a.stderr, "not authenticated from %s on\n", p.Since)
		}
		if sum.Lines > 0 {
			fmt.Fprintf(a.stderr, "verified before it: %d lines, seq %d to %d\n", sum.Lines, sum.FirstSeq, sum.LastSeq)
		}
		return silentError{err}
	}
	if err != nil {
		return err
	}
	printAuditSummary(a.stdout, sum)
	return nil
}

// loadAuditKey reads an Ed25519 public key (a private key file gives its
// public half).
func loadAuditKey(path string) (ed25519.PublicKey, error) {
	ks, err := keyfile.LoadKeys(path, []jose.Alg{jose.EdDSA}, "")
	if err != nil {
		return nil, fmt.Errorf("--key: %w", err)
	}
	pub, ok := ks[0].Public().(ed25519.PublicKey)
	if !ok || len(ks) != 1 {
		return nil, fmt.Errorf("--key %s: not one Ed25519 public key", path)
	}
	return pub, nil
}

func printAuditSummary(w io.Writer, s *audit.Summary) {
	fmt.Fprintf(w, "ok: node %s, %d file(s), %d lines: %d records, %d checkpoints, %d restarts, %d rotations, %d segments\n",
		s.Node, s.Files, s.Lines, s.Records, s.Checkpoints, s.Restarts, s.Rotations, s.Segments)
	fmt.Fprintf(w, "seq %d to %d", s.FirstSeq, s.LastSeq)
	if s.Records > 0 {
		fmt.Fprintf(w, "; records from %s to %s", s.FirstTime.Format(time.RFC3339Nano), s.LastTime.Format(time.RFC3339Nano))
	}
	fmt.Fprintf(w, "\nlast checkpoint: seq %d hash %s\n", s.LastCheckpoint.Seq, s.LastCheckpoint.Hash)
	if s.Unsigned > 0 {
		fmt.Fprintf(w, "unsigned: the last %d line(s) follow the last checkpoint and are not authenticated\n", s.Unsigned)
	}
	for _, warn := range s.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
}
