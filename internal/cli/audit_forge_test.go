package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// auditNode is a dev node over a data directory that outlives it, with
// checkpoints every 10 records and no others while it runs.
type auditNode struct {
	h      *harness
	data   string
	config string
}

func newAuditNode(h *harness, name string) *auditNode {
	return &auditNode{h: h, data: h.path(name), config: h.write(name+".yaml",
		[]byte("audit:\n  checkpoint_every: 10\n  checkpoint_interval: 1h\n"))}
}

// start runs the node; stop it with the stop of what it returns.
func (n *auditNode) start(t *testing.T) (*serving, []string) {
	t.Helper()
	s := n.h.serve("--listen", "127.0.0.1:0", "--dev", "--data-dir", n.data, "--config", n.config)
	return s, []string{"--admin", s.adminURL(t), "--admin-token-file", filepath.Join(n.data, "admin.token")}
}

func (n *auditNode) files(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(n.data, "audit", "audit-*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("audit files %v %v", files, err)
	}
	return files
}

// tokens creates a client and has it take n tokens; it returns its id.
func tokens(t *testing.T, h *harness, s *serving, admin []string, n int) string {
	t.Helper()
	out := h.must(append([]string{"clients", "create", "--name", "svc"}, admin...)...)
	id, secret := clientIDLine.FindStringSubmatch(out)[1], clientSecretLine.FindStringSubmatch(out)[1]
	for range n {
		h.must("token", "--client", id, "--secret", secret, "--url", "http://"+s.addr)
	}
	return id
}

var (
	seqMember  = regexp.MustCompile(`^\{"v":1,"node":"[^"]*","seq":(\d+),"prev":"([0-9a-f]{64})",`)
	hashMember = regexp.MustCompile(`,"hash":"[0-9a-f]{64}"\}$`)
)

// forge does to an audit file what someone who can write it, but holds no
// key, can: from the line after the checkpoint before the last (or from
// the first line) it drops the checkpoints, gives n records of the
// client another principal, renumbers the lines and computes their hashes
// again, and appends a partial line if asked.
func forge(t *testing.T, path string, onlyLast bool, client string, n int, partial bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	var cps []int
	for i, l := range lines {
		if strings.Contains(l, `"type":"checkpoint"`) {
			cps = append(cps, i)
		}
	}
	from := 0
	if onlyLast {
		from = cps[len(cps)-2] + 1
	}
	out := slicesClone(lines[:from])
	for _, l := range lines[from:] {
		switch {
		case strings.Contains(l, `"type":"checkpoint"`):
			continue
		case n > 0 && strings.Contains(l, `"id":"`+client+`"`):
			l, n = strings.Replace(l, `"id":"`+client+`"`, `"id":"kgc_mallory"`, 1), n-1
		}
		out = append(out, l)
	}
	if n > 0 {
		t.Fatalf("forge: %d records of %s short", n, client)
	}
	for i := max(from, 1); i < len(out); i++ {
		m := seqMember.FindStringSubmatch(out[i-1])
		seq, _ := strconv.ParseUint(m[1], 10, 64)
		prevHash := out[i-1][len(out[i-1])-66 : len(out[i-1])-2]
		body := seqMember.ReplaceAllString(hashMember.ReplaceAllString(out[i], ""), "")
		body = `{"v":1,"node":"` + nodeOf(out[i]) + `","seq":` + strconv.FormatUint(seq+1, 10) + `,"prev":"` + prevHash + `",` + body
		sum := sha256.Sum256([]byte(body + "}"))
		out[i] = body + `,"hash":"` + hex.EncodeToString(sum[:]) + `"}`
	}
	data := strings.Join(out, "\n") + "\n"
	if partial {
		data += `{"v":1,"node":"`
	}
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func nodeOf(line string) string {
	_, rest, _ := strings.Cut(line, `"node":"`)
	node, _, _ := strings.Cut(rest, `"`)
	return node
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// dropPartialLine removes what follows the file's last newline.
func dropPartialLine(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b[:bytes.LastIndexByte(b, '\n')+1], 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestAuditVerifyForgedFiles runs the rewrites of an audit file that once
// verified through a real node: the file rewritten with its checkpoints
// stripped, the node restarted on it (with a partial line, which makes it
// begin a new segment, removed afterwards; or without, and the node signs
// the file as it reads it back) and one request made. keygate audit
// verify refuses each with the reason, says which lines no checkpoint
// signs, and accepts them, as unsigned, only when told which file's tail
// to accept.
func TestAuditVerifyForgedFiles(t *testing.T) {
	tests := []struct {
		name     string
		onlyLast bool
		n        int
		partial  bool
		kind     string
		unsigned string // the run accepted with --allow-crash-tail
	}{
		{"every checkpoint stripped, 13 records rewritten, a new segment", false, 13, true, "unsigned_before_segment", ":1 (seq 1) to "},
		{"the last checkpoint stripped, 5 records rewritten, a new segment", true, 5, true, "unsigned_before_segment", " 5 record(s)"},
		{"every checkpoint stripped, 13 records rewritten, a restart", false, 13, false, "unsigned_before_restart", ":1 (seq 1) to "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			n := newAuditNode(h, "data")
			s, admin := n.start(t)
			client := tokens(t, h, s, admin, 13)
			if code := s.stop(); code != ExitOK {
				t.Fatalf("serve exit %d", code)
			}
			first := n.files(t)[0]
			key := filepath.Join(n.data, "audit.pub")
			h.must(append([]string{"audit", "verify", "--key", key}, n.files(t)...)...)

			forge(t, first, tt.onlyLast, client, tt.n, tt.partial)
			s, admin = n.start(t)
			h.must(append([]string{"clients", "list"}, admin...)...)
			if tt.partial {
				if !strings.Contains(s.stderr.String(), "beginning a new segment after a tail that does not verify") {
					t.Fatalf("the node did not begin a new segment:\n%s", s.stderr)
				}
				dropPartialLine(t, first)
			}
			files := n.files(t)
			r := h.run(append(append([]string{"audit", "verify", "--key", key, "--live"}, admin...), files...)...)
			expect(t, r, ExitFail, "", tt.kind)
			if code := s.stop(); code != ExitOK {
				t.Fatalf("serve exit %d", code)
			}

			r = h.run(append([]string{"audit", "verify", "--key", key}, files...)...)
			expect(t, r, ExitFail, "", tt.kind)
			expect(t, r, ExitFail, "", "--allow-crash-tail "+filepath.Base(first))
			if strings.Contains(r.stdout, "ok:") {
				t.Errorf("a forged file verified:\n%s", r.stdout)
			}
			r = h.run(append([]string{"audit", "verify", "--key", key, "--allow-crash-tail", filepath.Base(first)}, files...)...)
			expect(t, r, ExitOK, "unsigned, accepted: "+first, "")
			expect(t, r, ExitOK, tt.unsigned, "")
			expect(t, r, ExitOK, filepath.Base(first)+": seq 1 to ", "")
			expect(t, r, ExitOK, " unsigned (accepted, listed below)", "")
			if strings.Contains(r.stdout, "signed: all") {
				t.Errorf("the forged records were counted as signed:\n%s", r.stdout)
			}
		})
	}
}

// TestAuditVerifyLiveNode: the README's recipe, keygate audit key and then
// keygate audit verify on the files of the running node, passes: asking
// for the key signs the log. Under traffic, --live asks the node to sign
// and verifies up to that checkpoint; what a sealed node, which cannot
// sign, wrote since its last checkpoint is listed as its live tail.
func TestAuditVerifyLiveNode(t *testing.T) {
	h := newHarness(t)
	s, admin := h.serveDev(t)
	data := h.path("data")
	tokens(t, h, s, admin, 5)
	key := h.write("audit.pem", []byte(h.must(append([]string{"audit", "key"}, admin...)...)))
	files, _ := filepath.Glob(filepath.Join(data, "audit", "audit-*.jsonl"))
	r := h.run(append([]string{"audit", "verify", "--key", key}, files...)...)
	expect(t, r, ExitOK, "signed: all", "")

	// Traffic while --live verifies.
	out := h.must(append([]string{"clients", "create", "--name", "busy"}, admin...)...)
	id, secret := clientIDLine.FindStringSubmatch(out)[1], clientSecretLine.FindStringSubmatch(out)[1]
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					h.run("token", "--client", id, "--secret", secret, "--url", "http://"+s.addr)
				}
			}
		})
	}
	for range 3 {
		r = h.run(append(append([]string{"audit", "verify", "--key", key, "--live"}, admin...), files...)...)
		expect(t, r, ExitOK, "ok: node kgn_", "")
	}
	close(stop)
	wg.Wait()

	// Sealed, the node cannot sign: what it wrote since is its live tail,
	// listed and not counted as signed; without --live it fails.
	h.must(append([]string{"seal"}, admin...)...)
	h.run("token", "--client", id, "--secret", secret, "--url", "http://"+s.addr) // refused, and recorded
	r = h.run(append([]string{"audit", "verify", "--key", key}, files...)...)
	expect(t, r, ExitFail, "", "unsigned_tail")
	expect(t, r, ExitFail, "", "--live asks it to sign them first")
	r = h.run(append(append([]string{"audit", "verify", "--key", key, "--live"}, admin...), files...)...)
	expect(t, r, ExitOK, "(its live tail)", "the node is sealed")
	if strings.Contains(r.stdout, "signed: all") {
		t.Errorf("the sealed node's live tail was counted as signed:\n%s", r.stdout)
	}
	expect(t, h.run(append(append([]string{"audit", "verify", "--key", key, "--live", "--node", "kgn_other"}, admin...), files...)...),
		ExitUsage, "", "writes the chain of kgn_")
}
