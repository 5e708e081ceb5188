// Package audittest helps the tests of packages that write audit records:
// an in-memory sink, a started audit log with fixed keys, and a check of
// the records one request left. It imports testing, so only tests import
// it (server's TestDependencies keeps testing out of the binary).
package audittest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"sync"
	"testing"

	"github.com/keygate/keygate/internal/audit"
)

// MemSink is an audit.Sink that keeps the lines written to it in memory.
type MemSink struct {
	mu       sync.Mutex
	buf, log bytes.Buffer // since the last Take, and all
}

func (m *MemSink) Name() string { return "mem" }
func (m *MemSink) Close() error { return nil }

func (m *MemSink) Write(_ context.Context, lines []audit.Line) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, l := range lines {
		m.buf.Write(l.Bytes)
		m.log.Write(l.Bytes)
	}
	return nil
}

// All returns every line written.
func (m *MemSink) All() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return bytes.Clone(m.log.Bytes())
}

// Take returns the records written since the last Take; checkpoints and
// the other lines are not records and are left out.
func (m *MemSink) Take(t testing.TB) []audit.Record {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []audit.Record
	for _, line := range bytes.Split(bytes.TrimSpace(m.buf.Bytes()), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		e, err := audit.ParseLine(line)
		if err != nil {
			t.Fatalf("ParseLine(%s): %v", line, err)
		}
		if e.Type == audit.TypeRecord {
			out = append(out, e.Record)
		}
	}
	m.buf.Reset()
	return out
}

// node is the node name NewLog's log writes and Verify expects.
const node = "n1"

// signingKey is the checkpoint key NewLog's log signs with: fixed, so
// that Verify can check what it wrote.
func signingKey() *audit.SigningKey {
	sk, err := audit.NewSigningKey(bytes.Repeat([]byte{7}, audit.SeedSize))
	if err != nil {
		panic(err) // a seed of SeedSize bytes is always a key
	}
	return sk
}

// NewLog starts an audit log of node "n1" writing to sink, closed when
// the test ends. It returns the HMAC key the log hashes values with, for
// Check.
func NewLog(t testing.TB, sink audit.Sink) (*audit.Log, *audit.HMACKey) {
	t.Helper()
	mac, err := audit.NewHMACKey(bytes.Repeat([]byte{8}, 32))
	if err != nil {
		t.Fatal(err)
	}
	l, err := audit.New(audit.Config{Node: node, Signer: signingKey(), HMAC: mac, Sinks: []audit.Sink{sink}})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	return l, mac
}

// Verify verifies a chain a log from NewLog wrote, as `keygate audit
// verify` would with that log's public key.
func Verify(chain []byte) (*audit.Summary, error) {
	v, err := audit.NewVerifier(audit.VerifyOptions{Keys: []ed25519.PublicKey{signingKey().Public()}, Node: node})
	if err != nil {
		return nil, err
	}
	if err := v.File("mem", bytes.NewReader(chain)); err != nil {
		return v.Summary(), err
	}
	return v.Finish()
}

// Any, as a value in Want.Hashed, asks only that the record hash a value
// under that name, whatever the value is.
const Any = "\x00any"

// Want is what an audit record should say.
type Want struct {
	Op        audit.Operation
	Result    audit.Result
	Principal audit.PrincipalKind
	ID        string // the principal's
	Reason    audit.Reason
	Key       string
	Hashed    map[string]string // name → the value whose HMAC it holds, or Any
}

// Check fails t unless got are the records ws, in order, all of one
// request from a loopback address (an httptest server's client); mac is
// the key the log hashed values with. step names the request in the
// failures.
func Check(t testing.TB, mac *audit.HMACKey, step string, got []audit.Record, ws ...Want) {
	t.Helper()
	if len(got) != len(ws) {
		t.Fatalf("%s: %d records, want %d: %+v", step, len(got), len(ws), got)
	}
	for i, w := range ws {
		r := got[i]
		if r.Operation != w.Op || r.Result != w.Result || r.Principal.Kind != w.Principal || r.Principal.ID != w.ID ||
			r.Reason != w.Reason || r.Key.Name != w.Key || r.RequestID != got[0].RequestID || !r.Remote.IsLoopback() {
			t.Errorf("%s: record %d %+v, want %+v", step, i, r, w)
		}
		if len(r.Hashed) != len(w.Hashed) {
			t.Errorf("%s: record %d hashed %v, want %v", step, i, r.Hashed, w.Hashed)
		}
		for name, v := range w.Hashed {
			if d, ok := r.Hashed[name]; !ok || v != Any && !d.Equal(mac.Sum(v)) {
				t.Errorf("%s: record %d: hashed %s is not the HMAC of %q", step, i, name, v)
			}
		}
	}
}
