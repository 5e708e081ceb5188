package storetest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/store"
)

// DurabilityChildEnv is set in the environment of the child process that
// [Durability] starts; a backend's durability test that finds it set calls
// [DurabilityChild] instead of running as the parent.
const DurabilityChildEnv = "KEYGATE_STORETEST_DURABILITY_CHILD"

// The child's workload: workers goroutines, each working through its own
// families; a family is created, rotated rotations times, gets a jti
// revocation, and every third family is revoked; then the worker's transit
// key gets a version and the audit log a batch of auditBatch entries for
// the family.
const (
	workers   = 4
	rotations = 4
	childTime = 30 * time.Second // the child stops by itself after this
	minAcks   = 200              // acknowledged writes before the kill

	auditBatch = 3
	auditNode  = "durability"
)

func famID(i int) string        { return "fam-" + strconv.Itoa(i) }
func tokName(i, gen int) string { return fmt.Sprintf("fam-%d/%d", i, gen) }

// workerKey is the transit key of worker w; family i is worker i%workers's.
func workerKey(w int) string { return "key-" + strconv.Itoa(w) }

// familyAudit is the batch of audit entries of family i.
func familyAudit(i int) []store.AuditEntry {
	return auditEntries(auditNode, uint64(auditBatch*i), uint64(auditBatch*i+auditBatch-1))
}

// DurabilityChild writes to s until ctx ends (or the process is killed),
// writing one "ACK <kind> <family> [<generation>]" line to out after each
// write returned nil. It returns the first error.
func DurabilityChild(ctx context.Context, s store.Store, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, childTime)
	defer cancel()
	var mu sync.Mutex
	ack := func(format string, args ...any) {
		line := fmt.Sprintf("ACK "+format+"\n", args...)
		mu.Lock()
		defer mu.Unlock()
		io.WriteString(out, line) // one write: a pipe write this small is atomic
	}
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			k, first := transitKey(store.DefaultTenant, workerKey(w), time.Now())
			if err := s.CreateTransitKey(ctx, k, first); err != nil {
				errs <- fmt.Errorf("CreateTransitKey: %w", err)
				cancel()
				return
			}
			ack("transit %d 1", w)
			version := 1
			for i := w; ctx.Err() == nil; i += workers {
				if err := childFamily(ctx, s, i, &version, ack); err != nil {
					if ctx.Err() == nil {
						errs <- err
					}
					cancel()
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// childFamily writes family i; version is the latest version of the
// worker's transit key.
func childFamily(ctx context.Context, s store.Store, i int, version *int, ack func(string, ...any)) error {
	now := time.Now()
	first := refresh(tokName(i, 0), famID(i), now)
	first.ExpiresAt = now.Add(24 * time.Hour)
	if err := s.CreateRefreshToken(ctx, first); err != nil {
		return fmt.Errorf("CreateRefreshToken: %w", err)
	}
	ack("create %d", i)
	for gen := 1; gen <= rotations; gen++ {
		now := time.Now()
		next := refresh(tokName(i, gen), "", now)
		if _, err := s.RotateRefreshToken(ctx, "iss", Digest(tokName(i, gen-1)), next, now); err != nil {
			return fmt.Errorf("RotateRefreshToken: %w", err)
		}
		ack("rotate %d %d", i, gen)
	}
	if err := s.AddRevocation(ctx, store.Revocation{
		Issuer: "durability", JTI: "jti-" + strconv.Itoa(i), Until: now.Add(24 * time.Hour), CreatedAt: now,
	}); err != nil {
		return fmt.Errorf("AddRevocation: %w", err)
	}
	ack("revoke-jti %d", i)
	if i%3 == 0 {
		if err := s.RevokeRefreshFamily(ctx, Digest(tokName(i, rotations))); err != nil {
			return fmt.Errorf("RevokeRefreshFamily: %w", err)
		}
		ack("revoke-family %d", i)
	}
	v := keyVersion(store.DefaultTenant, workerKey(i%workers), *version+1, time.Now())
	if err := s.AddTransitKeyVersion(ctx, v); err != nil {
		return fmt.Errorf("AddTransitKeyVersion: %w", err)
	}
	*version = v.Version
	ack("transit %d %d", i, v.Version)
	if err := s.AppendAudit(ctx, familyAudit(i)); err != nil {
		return fmt.Errorf("AppendAudit: %w", err)
	}
	ack("audit %d", i)
	return nil
}

// acks is what the child acknowledged.
type acks struct {
	n         int
	created   map[int]bool
	rotated   map[int]int // family → highest generation acknowledged
	jti       map[int]bool
	famRevoke map[int]bool
	transit   map[int]int // worker → highest key version acknowledged
	audit     map[int]bool
	maxFamily int
}

func parseAcks(t *testing.T, out []byte) acks {
	a := acks{created: map[int]bool{}, rotated: map[int]int{}, jti: map[int]bool{}, famRevoke: map[int]bool{},
		transit: map[int]int{}, audit: map[int]bool{}, maxFamily: -1}
	// Only whole lines count; a line cut by the kill was never acknowledged.
	if i := bytes.LastIndexByte(out, '\n'); i >= 0 {
		out = out[:i+1]
	} else {
		out = nil
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 || f[0] != "ACK" {
			continue
		}
		i, err := strconv.Atoi(f[2])
		if err != nil {
			t.Fatalf("bad ack line %q", sc.Text())
		}
		a.n++
		a.maxFamily = max(a.maxFamily, i)
		switch f[1] {
		case "create":
			a.created[i] = true
		case "rotate", "transit":
			if len(f) < 4 {
				t.Fatalf("bad ack line %q", sc.Text())
			}
			n, err := strconv.Atoi(f[3])
			if err != nil {
				t.Fatalf("bad ack line %q", sc.Text())
			}
			if f[1] == "rotate" {
				a.rotated[i] = max(a.rotated[i], n)
			} else {
				a.transit[i%workers] = max(a.transit[i%workers], n)
			}
		case "audit":
			a.audit[i] = true
		case "revoke-jti":
			a.jti[i] = true
		case "revoke-family":
			a.famRevoke[i] = true
		default:
			t.Fatalf("bad ack line %q", sc.Text())
		}
	}
	return a
}

// Durability re-executes the test binary to run the test named test
// alone, with env added to its environment and [DurabilityChildEnv] set;
// that test must then call [DurabilityChild] on the store under test and
// print to stdout. After the child has acknowledged a few hundred writes,
// Durability kills it with SIGKILL, opens the store with open and checks
// that every acknowledged write is there and that every refresh family is
// consistent: its tokens are generations 0..n without gaps, every one but
// the last spent (none both unused and superseded, none spent without a
// successor), and revoked exactly when the family was revoked; that each
// transit key has every version from 1 to its latest; and that each batch
// of audit entries is there whole or not at all.
func Durability(t *testing.T, test string, env []string, open func(t *testing.T) store.Store) {
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), DurabilityChildEnv+"=1"), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}

	// Read everything the child says; count the acks as they come.
	var (
		mu     sync.Mutex
		out    []byte
		count  int
		signal sync.Once
	)
	enough := make(chan struct{})
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		buf := make([]byte, 32<<10)
		for {
			n, err := pipe.Read(buf)
			mu.Lock()
			out = append(out, buf[:n]...)
			count += bytes.Count(buf[:n], []byte("\n"))
			if count >= minAcks {
				signal.Do(func() { close(enough) })
			}
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()

	timeout := time.NewTimer(20 * time.Second)
	defer timeout.Stop()
	select {
	case <-enough:
	case <-readDone:
	case <-timeout.C:
	}
	// Kill mid-burst, at a random moment.
	time.Sleep(time.Duration(rand.IntN(20_000)) * time.Microsecond)
	killErr := cmd.Process.Signal(syscall.SIGKILL)
	<-readDone
	waitErr := cmd.Wait()

	mu.Lock()
	a := parseAcks(t, out)
	mu.Unlock()
	var exit *exec.ExitError
	if killErr != nil || !errors.As(waitErr, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the child was not killed mid-burst (kill: %v, wait: %v) after %d acks; stderr:\n%s", killErr, waitErr, a.n, stderr.Bytes())
	}
	if a.n < minAcks {
		t.Fatalf("the child acknowledged %d writes, want at least %d; stderr:\n%s", a.n, minAcks, stderr.Bytes())
	}
	t.Logf("child killed after %d acknowledged writes (%d families)", a.n, a.maxFamily+1)

	s := open(t)
	defer s.Close()
	checkDurability(t, s, a)
}

func checkDurability(t *testing.T, s store.Store, a acks) {
	ctx := t.Context()
	revs, err := s.Revocations(ctx, time.Now())
	if err != nil {
		t.Fatalf("Revocations: %v", err)
	}
	revoked := map[string]bool{}
	for _, r := range revs {
		revoked[r.JTI] = true
	}
	// Families past the last acknowledged one may have been written
	// without their ack; look a little further.
	for i := 0; i <= a.maxFamily+2*workers; i++ {
		var toks []store.RefreshToken
		for gen := 0; gen <= rotations; gen++ {
			tok, err := s.GetRefreshToken(ctx, Digest(tokName(i, gen)))
			if errors.Is(err, store.ErrNotFound) {
				// No gaps: nothing after a missing generation.
				for later := gen + 1; later <= rotations; later++ {
					if _, err := s.GetRefreshToken(ctx, Digest(tokName(i, later))); !errors.Is(err, store.ErrNotFound) {
						t.Errorf("family %d: generation %d missing but %d present (%v)", i, gen, later, err)
					}
				}
				break
			}
			if err != nil {
				t.Fatalf("GetRefreshToken: %v", err)
			}
			toks = append(toks, tok)
		}
		if a.created[i] && len(toks) == 0 {
			t.Errorf("family %d: acknowledged creation lost", i)
		}
		if gen, ok := a.rotated[i]; ok && len(toks) <= gen {
			t.Errorf("family %d: acknowledged rotation to generation %d lost (have %d tokens)", i, gen, len(toks))
		}
		anyRevoked := false
		for _, tok := range toks {
			anyRevoked = anyRevoked || tok.Revoked
		}
		for gen, tok := range toks {
			if tok.FamilyID != famID(i) {
				t.Errorf("family %d generation %d: FamilyID %q", i, gen, tok.FamilyID)
			}
			if !tok.OriginAt.Equal(toks[0].IssuedAt) {
				t.Errorf("family %d generation %d: OriginAt %v, want the first token's IssuedAt %v", i, gen, tok.OriginAt, toks[0].IssuedAt)
			}
			last := gen == len(toks)-1
			if last != tok.UsedAt.IsZero() {
				t.Errorf("family %d generation %d of %d: UsedAt %v (a token is spent exactly when it has a successor)", i, gen, len(toks), tok.UsedAt)
			}
			if a.famRevoke[i] && !tok.Revoked {
				t.Errorf("family %d generation %d: acknowledged family revocation lost", i, gen)
			}
			if tok.Revoked && i%3 != 0 {
				t.Errorf("family %d generation %d: revoked, but the family never was", i, gen)
			}
			if anyRevoked != tok.Revoked {
				t.Errorf("family %d generation %d: Revoked %v, but the family is half revoked", i, gen, tok.Revoked)
			}
		}
		if a.jti[i] && !revoked["jti-"+strconv.Itoa(i)] {
			t.Errorf("family %d: acknowledged jti revocation lost", i)
		}
		es, err := s.AuditEntries(ctx, auditNode, uint64(auditBatch*i), auditBatch)
		if err != nil {
			t.Fatalf("AuditEntries: %v", err)
		}
		// Without family i's, the next family's may be there.
		es = slices.DeleteFunc(es, func(e store.AuditEntry) bool { return e.Seq >= uint64(auditBatch*(i+1)) })
		switch {
		case len(es) != 0 && len(es) != auditBatch:
			t.Errorf("family %d: %d of its %d audit entries stored (a batch is all or nothing)", i, len(es), auditBatch)
		case a.audit[i] && len(es) == 0:
			t.Errorf("family %d: acknowledged audit entries lost", i)
		case len(es) != 0:
			same(t, fmt.Sprintf("family %d: audit entries", i), es, familyAudit(i))
		}
	}
	for w := range workers {
		checkWorkerKey(t, s, w, a.transit[w])
	}
}

// checkWorkerKey checks that worker w's transit key has at least version
// acked, and every version from 1 to its Latest, each counted once in its
// Revision.
func checkWorkerKey(t *testing.T, s store.Store, w, acked int) {
	k, vs, err := s.GetTransitKey(t.Context(), store.DefaultTenant, workerKey(w))
	switch {
	case errors.Is(err, store.ErrNotFound) && acked == 0:
		return
	case err != nil:
		t.Errorf("worker %d: GetTransitKey: %v (acknowledged version %d)", w, err, acked)
		return
	}
	if k.Latest < acked {
		t.Errorf("worker %d: transit key at version %d, acknowledged %d", w, k.Latest, acked)
	}
	if k.Revision != int64(k.Latest) || len(vs) != k.Latest {
		t.Errorf("worker %d: transit key at version %d has revision %d and %d versions", w, k.Latest, k.Revision, len(vs))
	}
	for i, v := range vs {
		want := keyVersion(store.DefaultTenant, workerKey(w), i+1, v.CreatedAt)
		same(t, fmt.Sprintf("worker %d: version %d", w, i+1), v, want)
	}
}
