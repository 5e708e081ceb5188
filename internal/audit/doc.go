// Package audit is keygate's audit log: fail-closed, tamper-evident, and
// group-committed so that it does not cap throughput.
//
// A [Log] takes [Record]s from many goroutines ([Log.Write]). One writer
// goroutine takes every record waiting, gives each the next sequence
// number, chains and hashes it, writes the batch to every [Sink] (one write
// and, by default, one fsync per sink per batch) and only then wakes the
// callers. Write returns nil only once at least one sink took the record;
// when none does, every caller in the batch gets an error matching
// [ErrNoSink] and must fail its request: nothing is answered as if it had
// succeeded unless its record was kept. Sinks: [FileSink] (JSON lines with
// a sync policy and rotation by size), [WriterSink] (stdout) and
// [StoreSink] (a store's AppendAudit).
//
// # What a record holds
//
// Time, request id, node, tenant, principal (kind and client or user id),
// operation, key name and version, result, reason, HTTP status, remote
// address, and HMAC-SHA256 digests of values that must be matchable but
// never stored ([HMACKey.Sum]). Every field is typed or checked (see
// [Record]): there is no free-form payload, identifiers cannot hold a
// token-sized value or spaces, and no plaintext, ciphertext, secret or
// token has a field to go in. A record's result is ok, refused, error,
// or pending: a request record, written before an operation changes
// anything so that no change is made unrecorded, and followed by the
// record of its outcome under the same request id.
//
// # Line format
//
// Each line is one JSON object, written by this package's own encoder in
// one canonical form, then a newline. Members appear in this order, and an
// optional member is omitted when empty (zero, "", no key); strings never
// need escapes, since every string is printable ASCII without space, '"'
// or '\'; numbers are decimal without leading zeros; times are UTC with
// nine fractional digits, as 2006-01-02T15:04:05.000000000Z:
//
//	v (1), node, seq, prev, time, type, then by type:
//	  record:     req?, tenant?, principal? {kind, id?}, op, key? {name, version?},
//	              result, reason?, status?, remote?, count? and since?,
//	              hmac? {name: "hmac-sha256:<hex>", ... in byte order of name}
//	  checkpoint: kid, sig
//	  open:       start ("new", "restart", "rotate" or "segment"), prevfile?, unsigned?
//	hash
//
// A record with count (and since, a time) is an aggregate: count requests
// alike, from since to time, recorded as one (see [Record].Count).
//
// seq counts every line of the node's chain from 1; prev is the previous
// line's hash (64 zeros for the first line of a chain). hash is the
// lower-case hex SHA-256 of the line's body: the line up to, not
// including, `,"hash":`, followed by `}`. For example:
//
//	{"v":1,"node":"n1","seq":2,"prev":"4c6b…","time":"2026-01-02T03:04:05.000000000Z","type":"record","req":"r-17","principal":{"kind":"client","id":"kgc_orders"},"op":"transit.encrypt","key":{"name":"orders","version":3},"result":"ok","status":200,"remote":"10.0.0.7","hmac":{"ref":"hmac-sha256:9f2c…"},"hash":"d1e0…"}
//	{"v":1,"node":"n1","seq":3,"prev":"d1e0…","time":"2026-01-02T03:04:06.000000000Z","type":"checkpoint","kid":"8e3f0c2a51b7d946","sig":"r0Vb…","hash":"07aa…"}
//
// A checkpoint's sig is the unpadded base64url Ed25519 signature, by the
// audit signing key ([SigningKey]), of "keygate audit checkpoint v1\n"
// followed by the checkpoint's body without its sig member: `{"v":1,…,"kid":"…"}`.
// Since that body holds prev, a checkpoint vouches for every line before
// it. kid is [KeyID] of the public key; it only says which key to use: a
// verifier is given the public keys out of band and never trusts one from
// a file. [ParseLine] accepts only the canonical form, so a line it
// accepts re-encodes to the same bytes.
//
// # Chains, files and restarts
//
// A chain is per node. The first line of a chain is an open line with
// start "new" (seq 1). A [FileSink] names its files after their first
// seq, audit-<20 digits>.jsonl, so that they sort in chain order. When
// the current file reaches its size limit, the next batch begins with a
// checkpoint (the old file's last line) and an open line with start
// "rotate" (the new file's first line), which links to that checkpoint's
// hash and names the old file in prevfile. A Log that starts again reads
// back the newest file, verifies it and continues it with an open line
// with start "restart", whose unsigned member counts the lines a crash
// left after the last checkpoint (the next checkpoint signs them, as read
// back: [Verify] does not count them as signed). A file whose tail does not verify
// (a torn last line, an edit) stops Start with [ErrBadTail], unless
// [Config].NewSegment is set: then a new chain begins, in a new file,
// with an open line with start "segment" (prev zeros, seq continuing,
// prevfile naming the damaged file, which is left as it is).
// [Log.Checkpoint] signs every line written so far on request, and
// [Config].SignAfter follows the records of some operations' successes
// with a checkpoint at once.
//
// # Keys, and a sealed node
//
// The [SigningKey] that signs checkpoints and the [HMACKey] behind Hashed
// are the Log's to hold ([Config].Signer and HMAC, [Log.SetKeys]). A
// node that derives them from a sealed root key has neither while it is
// sealed: its Log still writes, chains and answers every record (so
// fail-closed holds), [Log.Sum] makes no digest, so hashed values are
// left out, and no checkpoint is written, not even at a rotation (the old
// file then ends unsigned) or at Close. The first checkpoint after
// SetKeys gives a signer back signs every line since the last one; until
// then those lines are chained but not authenticated, like lines a crash
// left unsigned. Started without a signer ([Config].Sealed), a Log reads
// back its tail trusting [Config].PreviousKeys alone.
//
// # What Verify detects, and what it cannot
//
// [Verify] (or a [Verifier]) reads one or more files of a chain in
// order and names the first bad line, by file, line number and seq, with a
// [ProblemKind]: an edited line (its hash; or, re-hashed, the next line's
// prev), a removed line (a seq gap), an inserted, repeated or reordered
// line (seq), a torn last line, files swapped or missing (a file that does
// not continue the chain), a checkpoint whose signature does not verify or
// whose key is not trusted, and lines no checkpoint signs as written: after
// the last checkpoint, before a restart, before a new segment.
//
// A record is signed (Summary.Signed, and per file Summary.ByFile) when a
// checkpoint that its writer wrote later in the same run verifies: that
// checkpoint's prev is the hash the writer computed as it wrote, so it
// vouches for the record as written. A checkpoint written after a restart
// signs the lines before the restart only as the writer read them back,
// and a new segment's checkpoints sign nothing before it; such lines, and
// lines at the end, are a Problem unless VerifyOptions accepts them
// (AllowUnsignedTail, CrashTails), and then Summary.Runs lists them and
// they are never counted as signed.
//
// Its limits, stated plainly:
//   - The hashes alone prove nothing: anyone can recompute them. Only
//     checkpoints authenticate, and only what comes before them. Someone
//     who rewrites lines and re-hashes everything after them is caught at
//     the next checkpoint, which no longer verifies; Verify then names the
//     checkpoint and, as Problem.Since, the first line since the last good
//     checkpoint: the forgery is somewhere in between, and which line it is
//     cannot be known.
//   - Lines after the last checkpoint are chained but not signed. A file
//     that ends with them fails with ProblemUnsignedTail (a truncation at a
//     line boundary), unless VerifyOptions.AllowUnsignedTail accepts them
//     for a file still being written; checkpoints every
//     Config.CheckpointInterval bound that window, and Log.Checkpoint
//     closes it on request.
//   - A truncation right after a checkpoint leaves a file that verifies.
//     Only an anchor kept elsewhere can show it: VerifyOptions.MinSeq (a
//     seq known to have been written) or VerifyOptions.Anchor (a line's seq
//     and hash, such as [Log.LastCheckpoint], which the store sink also
//     keeps). The same holds for deleting a whole chain, or the newest
//     files.
//   - Someone holding the signing key can forge anything; keep it sealed,
//     apart from the files.
//   - Lines a crash (or a stop while sealed) left unsigned are signed by
//     the next checkpoint after a restart, as the writer read them back, so
//     whoever could write them while the node was down, or strip the
//     checkpoints before them, gets them signed; before a new segment they
//     are never signed. Verify refuses both (ProblemUnsignedRestart,
//     ProblemUnsignedSegment) unless VerifyOptions.CrashTails names the
//     file they end in; accepted, they are listed, not counted as signed,
//     and a crash tail accepted for a file is as long as the file's
//     unsigned end, however it came to be.
//   - A segment's chain starts from zero: two nodes that write under the
//     same node id, with the same key, have segments that can stand in
//     for each other's at the same seq. Give each node its own id.
//
// # Durability and failure
//
// Each sink's Write is all or nothing (the file sink truncates a partial
// write). A batch that no sink takes is undone: its sequence numbers are
// used again by the next batch. A sink that fails while another takes the
// batch gets the lines it missed again with the next batch, so its copy of
// the chain has no gap; one that falls more than Config.MaxBacklog lines
// behind, or cannot undo a partial write, or whose fsync fails (after
// which the file's contents are unknown), is disabled until restart, which
// [Log.Health] reports. The file sink's [SyncPolicy] says what a crash of
// the machine can lose. The queue is bounded: a Write that finds it full
// waits until its context is done and then fails; records are never
// dropped silently.
package audit
