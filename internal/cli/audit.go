package cli

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
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

// auditStatus is the answer of GET /v1/admin/audit, which signs the
// node's audit log before it answers (and its own record right after).
type auditStatus struct {
	Enabled        bool   `json:"enabled"`
	Node           string `json:"node"`
	Signing        bool   `json:"signing"`
	PublicKey      string `json:"public_key"`
	KeyID          string `json:"key_id"`
	LastCheckpoint *struct {
		Seq  uint64 `json:"seq"`
		Hash string `json:"hash"`
	} `json:"last_checkpoint"`
}

func (f *adminFlags) auditStatus(ctx context.Context, a *app) (*auditStatus, error) {
	var out auditStatus
	if err := f.call(ctx, a, http.MethodGet, "/v1/admin/audit", nil, &out); err != nil {
		return nil, err
	}
	if !out.Enabled {
		return nil, errors.New("the node's audit log is off (audit.disabled)")
	}
	return &out, nil
}

// auditKey prints the public key a node's audit checkpoints verify with,
// read from its admin API: PEM, as audit verify --key takes it. The key is
// derived from the root key, so every node of a fleet prints the same one.
func (a *app) auditKey(ctx context.Context, args []string) error {
	fs := a.flags("keygate audit key", "[flags]",
		"Prints, in PEM, the Ed25519 public key a running node's audit checkpoints are signed\n"+
			"with (GET /v1/admin/audit): save it for keygate audit verify --key. The key is derived\n"+
			"from the root key, the same on every node of a fleet; a sealed node prints the one it\n"+
			"kept from when it was last unsealed. An unsealed node signs its audit log, this\n"+
			"request's record included, before it answers. On stderr: the node's id, the key's id\n"+
			"and the last checkpoint (for verify --expect-seq N --expect-hash HEX).")
	var af adminFlags
	af.register(fs)
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	out, err := af.auditStatus(ctx, a)
	if err != nil {
		return err
	}
	if out.PublicKey == "" {
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

func (a *app) auditVerify(ctx context.Context, args []string) error {
	fs := a.flags("keygate audit verify", "--key PUBKEYFILE [--live | --expect-seq N [--expect-hash HEX]] [flags] FILE...",
		"Verifies audit log FILEs, given in chain order (audit-*.jsonl sort so), as one\n"+
			"chain: every line's hash and link, the seqs, and every checkpoint's signature\n"+
			"under a key given with --key, never one named in a file. A record counts as signed\n"+
			"only when a checkpoint its writer wrote after it, in the same run, verifies. Prints\n"+
			"a summary (per file, how many records are signed), or names the first bad line\n"+
			"(file:line, seq, what is wrong) on stderr and exits 1. Lines no checkpoint signs\n"+
			"fail unless accepted: the end of a file still being written (--live, or\n"+
			"--allow-unsigned-tail), and what a crash left before a restart or a new segment\n"+
			"(--allow-crash-tail FILE); accepted lines are listed, never counted as signed.\n"+
			"A truncation right after a checkpoint shows only against --live or --expect-seq\n"+
			"(a seq known to have been written, such as the last checkpoint kept in the store).")
	var keys, crashTails stringsFlag
	fs.Var(&keys, "key", "a `PUBKEYFILE` with the audit signing key's Ed25519 public key (PEM or JWK);\nrepeat for earlier keys (required)")
	expectSeq := fs.Uint64("expect-seq", 0, "fail unless the chain reaches seq `N`")
	expectHash := fs.String("expect-hash", "", "with --expect-seq: the `HEX` hash the line with that seq must have")
	node := fs.String("node", "", "fail unless the files hold the chain of `NODE`")
	unsigned := fs.Bool("allow-unsigned-tail", false, "accept lines after the last checkpoint (a file still being written):\nthey are listed, not counted as signed")
	fs.Var(&crashTails, "allow-crash-tail", "accept the lines that no checkpoint signed before their writer stopped (a crash,\nor a stop while sealed), ending in `FILE` (by name), followed by a restart or a new\nsegment: they are listed, not counted as signed; repeat for more files")
	live := fs.Bool("live", false, "the files are a running node's: ask it (--admin) to sign its audit log now, then\nrequire its chain up to that checkpoint and list the lines written after it as its\nlive tail, not counted as signed")
	var af adminFlags
	af.register(fs)
	files, err := fs.parse(args, 1, -1)
	if err != nil {
		return err
	}
	switch {
	case len(keys) == 0:
		return usageErrorf(fs.Name(), "--key is required")
	case *expectHash != "" && *expectSeq == 0:
		return usageErrorf(fs.Name(), "--expect-hash needs --expect-seq")
	case *live && *expectSeq != 0:
		return usageErrorf(fs.Name(), "--live takes the checkpoint to expect from the node: give no --expect-seq")
	}
	opts := audit.VerifyOptions{Node: *node, MinSeq: *expectSeq, AllowUnsignedTail: *unsigned, CrashTails: crashTails}
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
	if *live {
		if err := a.liveAnchor(ctx, fs.Name(), &af, &opts); err != nil {
			return err
		}
	}
	sum, err := audit.Verify(opts, files...)
	var p *audit.Problem
	if errors.As(err, &p) {
		printAuditProblem(a.stderr, p, sum)
		return silentError{err}
	}
	if err != nil {
		return err
	}
	printAuditSummary(a.stdout, sum, *live)
	return nil
}

// liveAnchor asks the node to sign its audit log and makes the checkpoint
// it answers the one the files must reach; lines after it are its live
// tail.
func (a *app) liveAnchor(ctx context.Context, cmd string, af *adminFlags, opts *audit.VerifyOptions) error {
	st, err := af.auditStatus(ctx, a)
	if err != nil {
		return fmt.Errorf("--live: %w", err)
	}
	if opts.Node != "" && opts.Node != st.Node {
		return usageErrorf(cmd, "--node %s, but the node at --admin writes the chain of %s", opts.Node, st.Node)
	}
	cp := st.LastCheckpoint
	if cp == nil {
		return errors.New("--live: the node has written no checkpoint (sealed since it started): unseal it and verify again")
	}
	h, err := audit.ParseHash(cp.Hash)
	if err != nil {
		return fmt.Errorf("--live: the node's last checkpoint: %w", err)
	}
	if !st.Signing {
		fmt.Fprintf(a.stderr, "the node is sealed: it cannot sign what it wrote after seq %d now\n", cp.Seq)
	}
	opts.Node, opts.Anchor, opts.MinSeq, opts.AllowUnsignedTail = st.Node, &audit.Anchor{Seq: cp.Seq, Hash: h}, cp.Seq, true
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

func printAuditSummary(w io.Writer, s *audit.Summary, live bool) {
	fmt.Fprintf(w, "ok: node %s, %d file(s), %d lines: %d records, %d checkpoints, %d restarts, %d rotations, %d segments\n",
		s.Node, s.Files, s.Lines, s.Records, s.Checkpoints, s.Restarts, s.Rotations, s.Segments)
	if s.Signed == s.Records {
		fmt.Fprintf(w, "signed: all %d records\n", s.Records)
	} else {
		fmt.Fprintf(w, "signed: %d of %d records; %d accepted unsigned, listed below\n", s.Signed, s.Records, s.Records-s.Signed)
	}
	fmt.Fprintf(w, "seq %d to %d", s.FirstSeq, s.LastSeq)
	if s.Records > 0 {
		fmt.Fprintf(w, "; records from %s to %s", s.FirstTime.Format(time.RFC3339Nano), s.LastTime.Format(time.RFC3339Nano))
	}
	fmt.Fprintf(w, "\nlast checkpoint: seq %d hash %s\n", s.LastCheckpoint.Seq, s.LastCheckpoint.Hash)
	for _, f := range s.ByFile {
		fmt.Fprintf(w, "%s: seq %d to %d, %d records, %d signed", f.Name, f.FirstSeq, f.LastSeq, f.Records, f.Signed)
		if n := f.Records - f.Signed; n > 0 {
			fmt.Fprintf(w, ", %d unsigned (accepted, listed below)", n)
		}
		fmt.Fprintln(w)
	}
	for _, r := range s.Runs {
		fmt.Fprintf(w, "unsigned, accepted: %s to %s: %d line(s), %d record(s), %s\n", r.From, r.To, r.Lines, r.Records, runWhy(r, live))
	}
	for _, warn := range s.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
}

// runWhy says what an accepted unsigned run is.
func runWhy(r audit.UnsignedRun, live bool) string {
	switch {
	case r.Kind == audit.ProblemUnsignedTail && live:
		return "written after the checkpoint the node made for this check (its live tail)"
	case r.Kind == audit.ProblemUnsignedTail:
		return "after the last checkpoint (--allow-unsigned-tail): a file still being written, or truncated"
	case r.Kind == audit.ProblemUnsignedRestart:
		return "unsigned when their writer stopped and signed only as it read them back after its restart (--allow-crash-tail)"
	case r.Torn:
		return "unsigned when their writer stopped, the last one torn; a new segment follows, which signs nothing before it (--allow-crash-tail)"
	default:
		return "unsigned when their writer stopped; a new segment follows, which signs nothing before it (--allow-crash-tail)"
	}
}

// printAuditProblem says why the files do not verify, and what could
// accept lines that no checkpoint signs, if that is why.
func printAuditProblem(w io.Writer, p *audit.Problem, sum *audit.Summary) {
	fmt.Fprintf(w, "FAILED: %v\n", p)
	if p.Since != nil {
		fmt.Fprintf(w, "not authenticated from %s on\n", p.Since)
	}
	if sum.Lines > 0 {
		fmt.Fprintf(w, "read before it: %d lines, seq %d to %d; %d of %d records signed\n", sum.Lines, sum.FirstSeq, sum.LastSeq, sum.Signed, sum.Records)
	}
	switch p.Kind {
	case audit.ProblemUnsignedRestart, audit.ProblemUnsignedSegment:
		fmt.Fprintf(w, "if their writer crashed or was stopped while sealed there, --allow-crash-tail %s accepts these lines, as unsigned\n", filepath.Base(p.File))
	case audit.ProblemTorn:
		fmt.Fprintf(w, "if its writer crashed there and a new segment follows, --allow-crash-tail %s accepts the line, as unsigned\n", filepath.Base(p.File))
	case audit.ProblemUnsignedTail:
		fmt.Fprintln(w, "if a running node is still writing these files, --live asks it to sign them first (--allow-unsigned-tail accepts these lines, as unsigned)")
	}
}
