package node

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/keygate/keygate/internal/audit"
	"github.com/keygate/keygate/internal/audit/httpaudit"
	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/issuer"
	"github.com/keygate/keygate/internal/keyfile"
	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/telemetry"
	"github.com/keygate/keygate/jose"
)

// The audit log. Every node that runs the token service keeps one (unless
// audit.disabled): a chain of records of its own, named by its node id, in
// the sinks the audit section names. Its two keys, the Ed25519 key that
// signs checkpoints and the HMAC key of hashed values, are derived from the
// root key (keyring.DeriveKey under the labels below), so every node of a
// fleet holds the same ones without another secret to hand out, and they
// are never written anywhere. A sealed node has neither: it writes and
// chains its records all the same, leaves hashed values out, and signs the
// lines since the last checkpoint once it is unsealed. The public key is
// kept in the data directory (AuditKeyFile) so that a node starting sealed
// can check the checkpoints of the chain it continues.

// Files of the audit log in the data directory.
const (
	NodeIDFile   = "node.id"   // the node's id, generated at the first start (0600)
	AuditKeyFile = "audit.pub" // the audit signing key's public key (PEM), kept by an unsealed node
)

// Labels of the audit keys derived from the root key.
const (
	auditSigningLabel = "keygate audit checkpoint signing key v1"
	auditHMACLabel    = "keygate audit hmac key v1"
)

// AuditReadOp is the operation of a request for the audit log's state
// (GET /v1/admin/audit), which signs the log (AuditCheckpoint) and whose
// own record, when it succeeds, is followed at once by a checkpoint: an
// operator who asks for the key to verify with finds the files signed up
// to that request. A refused one (no admin token) gets no checkpoint.
const AuditReadOp audit.Operation = "admin.audit.read"

// closeAuditTimeout bounds the final checkpoint and the sinks' close.
const closeAuditTimeout = 10 * time.Second

// errDuplicateNode marks a store sink that found its lines' seqs taken.
var errDuplicateNode = errors.New("another node writes the same audit chain to the store")

// nodeID returns the configured audit node id, or the one kept in the
// data directory, generating it at the first start.
func (n *Node) nodeID() (string, error) {
	if id := n.cfg.Audit.Node; id != "" {
		return id, nil
	}
	path := filepath.Join(n.cfg.DataDir, NodeIDFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		raw := make([]byte, 16)
		if _, err := rand.Read(raw); err != nil {
			return "", err
		}
		id := "kgn_" + base64.RawURLEncoding.EncodeToString(raw)
		if err := keyfile.WriteNew(path, []byte(id+"\n")); err != nil {
			return "", fmt.Errorf("%s: %w", NodeIDFile, err)
		}
		n.log.Info("node id generated for the audit log", "node", id, "path", path)
		return id, nil
	}
	if err != nil {
		return "", fmt.Errorf("%s: %w", NodeIDFile, err)
	}
	id := strings.TrimSpace(string(b))
	if !audit.ValidID(id) {
		return "", fmt.Errorf("%s does not hold a node id (1 to %d printable characters without spaces)", path, audit.MaxIDLen)
	}
	return id, nil
}

// openAudit opens and starts the audit log the settings describe, and the
// Auditor the HTTP handlers are wrapped with.
func (n *Node) openAudit(ctx context.Context, id string) error {
	ac := n.cfg.Audit.WithDefaults(n.cfg.DataDir)
	// A tail that does not verify (a line torn by a crash, a file edited,
	// checkpoints a sealed node has no key for) begins a new segment in a
	// new file rather than keep the node from starting: the file is left
	// as it is, for keygate audit verify to judge, and the log says why.
	acfg := audit.Config{Node: id, CheckpointEvery: ac.CheckpointEvery, CheckpointInterval: ac.CheckpointInterval, Logger: n.log,
		NewSegment: true, SignAfter: []audit.Operation{AuditReadOp}}
	var files *audit.FileSink
	if !ac.File.Disabled {
		sync := map[string]audit.SyncPolicy{"batch": audit.SyncBatch, "interval": audit.SyncInterval, "never": audit.SyncNever}[ac.File.Sync]
		fsink, err := audit.NewFileSink(audit.FileConfig{Dir: ac.File.Dir, MaxSize: ac.File.MaxSize, Sync: sync, SyncInterval: ac.File.SyncInterval,
			MinFree: ac.File.MinFree, Statfs: n.cfg.AuditStatfs, OnSpace: n.auditSpaceChanged})
		if err != nil {
			return fmt.Errorf("audit.file: %w", err)
		}
		files = fsink
		acfg.Sinks = append(acfg.Sinks, fsink)
	}
	if ac.Stdout {
		out := n.cfg.AuditStdout
		if out == nil {
			out = os.Stdout
		}
		acfg.Sinks = append(acfg.Sinks, audit.NewWriterSink("stdout", out))
	}
	if ac.Store {
		ss := audit.NewStoreSink("store", id, n.store, func(node string, seq uint64, line []byte) store.AuditEntry {
			return store.AuditEntry{Node: node, Seq: seq, Line: append([]byte(nil), line...)}
		})
		acfg.Sinks = append(acfg.Sinks, storeSink{ss, id})
		if files == nil && !ac.Stdout {
			// The store is the only sink that keeps the chain: continue it
			// from its last line.
			after, err := lastAuditLine(ctx, n.store, id)
			if err != nil {
				return fmt.Errorf("audit.store: %w", err)
			}
			acfg.After = after
		}
	}
	acfg.Sinks = append(acfg.Sinks, n.cfg.AuditSinks...)

	signer, mac, err := n.auditKeys()
	if err != nil {
		return err
	}
	if signer != nil {
		acfg.Signer, acfg.HMAC = signer, mac
	} else {
		acfg.Sealed = true
		if pub, err := readAuditKey(n.auditKeyFile()); err == nil {
			acfg.PreviousKeys = []ed25519.PublicKey{pub}
		} else if !errors.Is(err, fs.ErrNotExist) {
			n.log.Warn("the audit public key kept in the data directory does not load", "path", n.auditKeyFile(), "err", err)
		}
	}
	var m *telemetry.AuditMetrics // nil counts nothing
	if n.cfg.Metrics != nil {
		m = n.cfg.Metrics.Audit(n.auditSinks)
		if files != nil {
			n.cfg.Metrics.AuditDisk(n.auditDiskMetric)
		}
	}
	acfg.OnBatch = func(b audit.BatchStats) { m.Batch(b.Records, b.Elapsed) }
	acfg.OnSinkFailure = func(sink string, _ error) { m.SinkFailure(sinkLabel(sink)) }

	l, err := audit.New(acfg)
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	if signer == nil && acfg.PreviousKeys == nil && files != nil {
		if existing, _ := files.Files(); len(existing) > 0 {
			n.log.Warn("starting sealed without the audit public key (" + AuditKeyFile + ", kept while the node was last unsealed): a signed chain in the audit files cannot be checked, and continues in a new segment")
		}
	}
	if err := l.Start(ctx); err != nil {
		l.Close(context.Background()) //nolint:errcheck // the start's error says more
		return fmt.Errorf("audit log: %w", err)
	}
	n.audit.log, n.audit.files, n.audit.node = l, files, id
	for _, s := range l.Health().Sinks {
		if s.Disabled && errors.Is(s.Err, errDuplicateNode) {
			return fmt.Errorf("audit log: %w", s.Err)
		}
	}
	if signer != nil {
		n.keepAuditKey(signer.Public())
	}
	trusted, _ := config.ParsePrefixes(n.ts.TrustedProxies) // validated by config and serve
	bits := n.ts.IPv6Prefix
	n.audit.auditor, err = httpaudit.New(httpaudit.Config{Log: l, Logger: n.log, OnRecord: m.Record, Rand: n.cfg.Rand,
		Remote: func(r *http.Request) netip.Addr { return issuer.ClientIP(r, trusted) },
		Refusals: httpaudit.RefusalConfig{Limiter: n.limits.refused, Total: n.limits.refusedTotal, Now: n.cfg.Now, OnTally: m.Tallied,
			Key: func(a netip.Addr) string { return "unauthenticated:ip:" + issuer.AddrKey(a, bits) }}})
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	n.log.Info("audit log started", "node", id, "sinks", len(acfg.Sinks), "sealed", signer == nil)
	return nil
}

// auditKeys derives the audit keys from the root key; both are nil while
// the node is sealed.
func (n *Node) auditKeys() (*audit.SigningKey, *audit.HMACKey, error) {
	if n.keyring.Sealed() {
		return nil, nil, nil
	}
	seed := make([]byte, audit.SeedSize)
	defer clear(seed)
	if err := n.keyring.DeriveKey(auditSigningLabel, seed); err != nil {
		return nil, nil, fmt.Errorf("audit signing key: %w", err)
	}
	signer, err := audit.NewSigningKey(seed)
	if err != nil {
		return nil, nil, err
	}
	if err := n.keyring.DeriveKey(auditHMACLabel, seed); err != nil {
		return nil, nil, fmt.Errorf("audit HMAC key: %w", err)
	}
	mac, err := audit.NewHMACKey(seed)
	if err != nil {
		return nil, nil, err
	}
	return signer, mac, nil
}

// setAuditKeys gives the audit log the keys derived from the root key now
// held, after an unseal. The caller holds unsealMu.
func (n *Node) setAuditKeys() {
	if n.audit.log == nil {
		return
	}
	signer, mac, err := n.auditKeys()
	if err != nil { // the keyring was unsealed a moment ago
		n.log.Error("the audit keys could not be derived; checkpoints wait", "err", err)
		return
	}
	n.audit.log.SetKeys(signer, mac)
	if signer != nil {
		n.keepAuditKey(signer.Public())
	}
}

func (n *Node) auditKeyFile() string { return filepath.Join(n.cfg.DataDir, AuditKeyFile) }

// keepAuditKey writes the audit public key to the data directory, unless
// it is there already, so that a sealed start can check the chain's
// checkpoints. A failure is logged: the log runs without it.
func (n *Node) keepAuditKey(pub ed25519.PublicKey) {
	path := n.auditKeyFile()
	old, err := readAuditKey(path)
	if err == nil && old.Equal(pub) {
		return
	}
	if err == nil {
		// Earlier files verify with the old key only: keep it beside.
		prev := filepath.Join(n.cfg.DataDir, "audit-"+audit.KeyID(old)+".pub")
		if err := os.Link(path, prev); err != nil && !errors.Is(err, fs.ErrExist) {
			n.log.Warn("could not keep the previous audit public key", "path", prev, "err", err)
		}
		n.log.Warn("the audit signing key changed (another root key); checkpoints from now on are signed by the new one, verify earlier files with the old one",
			"old", audit.KeyID(old), "new", audit.KeyID(pub), "old_key_file", prev)
	}
	pemBytes, err := jose.MarshalPublicPEM(pub)
	if err == nil {
		tmp := path + ".tmp"
		if err = os.WriteFile(tmp, pemBytes, 0o600); err == nil {
			err = os.Rename(tmp, path)
		}
	}
	if err != nil {
		n.log.Warn("could not keep the audit public key in the data directory; a sealed restart could not check the chain's checkpoints", "path", path, "err", err)
	}
}

// readAuditKey reads an Ed25519 public key from a PEM file.
func readAuditKey(path string) (ed25519.PublicKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pub, err := jose.ParsePublicPEM(b)
	if err != nil {
		return nil, err
	}
	ed, ok := pub.(ed25519.PublicKey)
	if !ok {
		return nil, errors.New("not an Ed25519 public key")
	}
	return ed, nil
}

// closeAudit writes the final checkpoint (when unsealed) and closes the
// sinks.
func (n *Node) closeAudit() {
	if n.audit.log == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeAuditTimeout)
	defer cancel()
	n.flushAudit(ctx)
	if err := n.audit.log.Close(ctx); err != nil {
		n.log.Warn("closing the audit log", "err", err)
	}
	n.audit.log = nil
}

// flushAudit writes the aggregate records of the refusals tallied since
// the last flush (httpaudit.Auditor.Flush); Tick and closeAudit call it.
func (n *Node) flushAudit(ctx context.Context) {
	if n.audit.auditor == nil {
		return
	}
	if err := n.audit.auditor.Flush(ctx); err != nil {
		n.log.Error("the audit log's aggregate records of refused requests", "err", err)
	}
}

// Auditor is what the node's HTTP handlers are wrapped with (see package
// httpaudit); nil when the audit log is off.
func (n *Node) Auditor() *httpaudit.Auditor { return n.audit.auditor }

// AuditStatus is the audit log's state, for operators.
type AuditStatus struct {
	Enabled bool
	Node    string            // the chain's node id
	Key     ed25519.PublicKey // the checkpoint key; nil while sealed and none is kept
	Signing bool              // Key signs now (the node is unsealed)
	Dir     string            // the file sink's directory; "" without one
	Health  audit.Health
	// Disk is the room on the file sink's filesystem; nil without a file
	// sink, or when it cannot be read (DiskErr says why).
	Disk    *audit.DiskSpace
	DiskErr error
	// LastCheckpoint is the last checkpoint a sink took, an anchor to
	// verify the files against (keygate audit verify --expect-seq
	// --expect-hash).
	LastCheckpoint audit.Anchor
	HasCheckpoint  bool
}

// AuditStatus reports the audit log's state.
func (n *Node) AuditStatus() AuditStatus {
	if n.audit.log == nil {
		return AuditStatus{}
	}
	st := AuditStatus{Enabled: true, Node: n.audit.node, Health: n.audit.log.Health()}
	if st.Key = n.audit.log.Signing(); st.Key != nil {
		st.Signing = true
	} else if pub, err := readAuditKey(n.auditKeyFile()); err == nil {
		st.Key = pub
	}
	if n.audit.files != nil {
		st.Dir = n.cfg.Audit.WithDefaults(n.cfg.DataDir).File.Dir
		st.Disk, st.DiskErr = n.AuditDisk()
	}
	st.LastCheckpoint, st.HasCheckpoint = n.audit.log.LastCheckpoint()
	return st
}

// AuditCheckpoint signs every audit line written so far, unless signed
// already, and returns the last checkpoint; it fails with
// audit.ErrNoSigner while the node is sealed.
func (n *Node) AuditCheckpoint(ctx context.Context) (audit.Anchor, error) {
	if n.audit.log == nil {
		return audit.Anchor{}, errors.New("the audit log is off")
	}
	return n.audit.log.Checkpoint(ctx)
}

// AuditDisk reads the room on the audit file sink's filesystem; nil
// without a file sink.
func (n *Node) AuditDisk() (*audit.DiskSpace, error) {
	if n.audit.files == nil {
		return nil, nil
	}
	ds, err := n.audit.files.Space()
	if err != nil {
		return nil, err
	}
	return &ds, nil
}

// auditSpaceChanged logs the audit file sink's free space going low, well
// before writes fail (every audited request would then be answered 503),
// and coming back.
func (n *Node) auditSpaceChanged(ds audit.DiskSpace) {
	dir := n.cfg.Audit.WithDefaults(n.cfg.DataDir).File.Dir
	if ds.Low {
		n.log.Warn("the audit directory's filesystem is nearly full: when it is, every audited request is answered 503; archive old audit files (see docs/audit.md) or grow the disk",
			"dir", dir, "free_bytes", ds.Free, "min_free_bytes", ds.MinFree, "total_bytes", ds.Total)
		return
	}
	n.log.Info("the audit directory's filesystem has room again", "dir", dir, "free_bytes", ds.Free, "min_free_bytes", ds.MinFree)
}

// AuditFiles lists the file sink's files in chain order.
func (n *Node) AuditFiles() ([]string, error) {
	if n.audit.files == nil {
		return nil, nil
	}
	return n.audit.files.Files()
}

// auditDiskMetric reads the audit disk's room for the metrics.
func (n *Node) auditDiskMetric() (free, minFree uint64, ok bool) {
	ds, err := n.AuditDisk()
	if err != nil || ds == nil {
		return 0, 0, false
	}
	return ds.Free, ds.MinFree, true
}

// auditSinks reports the sinks' state for the metrics.
func (n *Node) auditSinks() []telemetry.AuditSink {
	l := n.audit.log
	if l == nil {
		return nil
	}
	var out []telemetry.AuditSink
	for _, s := range l.Health().Sinks {
		out = append(out, telemetry.AuditSink{Name: sinkLabel(s.Name), Up: s.OK && !s.Disabled})
	}
	return out
}

// sinkLabel is a sink's metric label: its kind ("file" of "file:/dir").
func sinkLabel(name string) string {
	kind, _, _ := strings.Cut(name, ":")
	return kind
}

// storeSink is the store's audit sink: a seq the store holds already
// means another node writes under the same node id (or the files were
// lost), so the sink stops at once with an error that says so.
type storeSink struct {
	*audit.StoreSink[store.AuditEntry]
	node string
}

func (s storeSink) Write(ctx context.Context, lines []audit.Line) error {
	err := s.StoreSink.Write(ctx, lines)
	if errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("%w: %w: the store already holds lines of audit chain %q at seqs %d to %d (give each node its own audit.node, or its own data directory's %s; or the node's audit files were lost); the store sink is off until restart",
			audit.ErrSinkBroken, errDuplicateNode, s.node, lines[0].Seq, lines[len(lines)-1].Seq, NodeIDFile)
	}
	return err
}

// auditEntries is the one store method lastAuditLine reads through.
type auditEntries interface {
	AuditEntries(ctx context.Context, node string, fromSeq uint64, limit int) ([]store.AuditEntry, error)
}

// lastAuditLine finds the last line the store holds of node's chain, by
// galloping and then bisecting over AuditEntries (seqs ascend), and
// returns it as an anchor; nil when the store holds none.
func lastAuditLine(ctx context.Context, st auditEntries, node string) (*audit.Anchor, error) {
	first := func(from uint64) (uint64, bool, error) {
		es, err := st.AuditEntries(ctx, node, from, 1)
		if err != nil || len(es) == 0 {
			return 0, false, err
		}
		return es[0].Seq, true, nil
	}
	lo, ok, err := first(1)
	if err != nil || !ok {
		return nil, err
	}
	// lo is a seq the store holds; none at or past hi.
	var hi uint64
	for step := uint64(1); ; step *= 2 {
		probe := lo + step
		seq, ok, err := first(probe)
		if err != nil {
			return nil, err
		}
		if !ok {
			hi = probe
			break
		}
		lo = seq
	}
	for hi-lo > 1 {
		seq, ok, err := first(lo + (hi-lo)/2)
		if err != nil {
			return nil, err
		}
		if ok {
			lo = seq
		} else {
			hi = lo + (hi-lo)/2
		}
	}
	es, err := st.AuditEntries(ctx, node, lo, 1)
	if err != nil || len(es) == 0 {
		return nil, fmt.Errorf("reading the last audit line of %q: %v", node, err)
	}
	e, err := audit.ParseLine(es[0].Line)
	if err != nil {
		return nil, fmt.Errorf("the store's last audit line of %q (seq %d): %w", node, lo, err)
	}
	return &audit.Anchor{Seq: e.Seq, Hash: e.Hash}, nil
}
