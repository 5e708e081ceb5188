package audittest

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/keygate/keygate/internal/audit"
)

// recorder is a testing.TB that keeps what Errorf reports instead of
// failing the test.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// TestLogSinkCheck: records written to NewLog's log come back from Take
// once each, Check accepts them as written and refuses any field changed,
// and Verify accepts the chain and refuses it altered.
func TestLogSinkCheck(t *testing.T) {
	sink := &MemSink{}
	log, mac := NewLog(t, sink)
	loopback := netip.MustParseAddr("127.0.0.1")
	written := []audit.Record{
		{RequestID: "r1", Operation: "login.password", Result: audit.ResultPending, Remote: loopback,
			Principal: audit.Principal{Kind: audit.PrincipalUser, ID: "u1"}, Hashed: map[string]audit.Digest{"family": mac.Sum("f1")}},
		{RequestID: "r1", Operation: "login.password", Result: audit.ResultOK, Remote: loopback, Key: audit.KeyRef{Name: "kid1"},
			Principal: audit.Principal{Kind: audit.PrincipalUser, ID: "u1"}, Hashed: map[string]audit.Digest{"jti": mac.Sum("j1")}},
	}
	for _, r := range written {
		if err := log.Write(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	if err := log.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := sink.Take(t)
	pending := Want{Op: "login.password", Result: audit.ResultPending, Principal: audit.PrincipalUser, ID: "u1",
		Hashed: map[string]string{"family": Any}}
	ok := Want{Op: "login.password", Result: audit.ResultOK, Principal: audit.PrincipalUser, ID: "u1", Key: "kid1",
		Hashed: map[string]string{"jti": "j1"}}
	Check(t, mac, "as written", got, pending, ok)
	if again := sink.Take(t); len(again) != 0 {
		t.Errorf("a second Take returned %d records, want none", len(again))
	}

	for name, change := range map[string]func(w *Want){
		"operation": func(w *Want) { w.Op = "oauth2.token" },
		"result":    func(w *Want) { w.Result = audit.ResultRefused },
		"principal": func(w *Want) { w.Principal = audit.PrincipalClient },
		"id":        func(w *Want) { w.ID = "u2" },
		"reason":    func(w *Want) { w.Reason = "invalid_client" },
		"key":       func(w *Want) { w.Key = "kid2" },
		"value":     func(w *Want) { w.Hashed = map[string]string{"jti": "j2"} },
		"name":      func(w *Want) { w.Hashed = map[string]string{"sub": Any} },
		"count":     func(w *Want) { w.Hashed = map[string]string{"jti": "j1", "sub": Any} },
	} {
		w := ok
		change(&w)
		r := &recorder{TB: t}
		Check(r, mac, name, got, pending, w)
		if len(r.errs) == 0 {
			t.Errorf("Check accepted the record with its %s changed: %+v", name, w)
		}
	}

	if _, err := Verify(sink.All()); err != nil {
		t.Errorf("Verify of the chain as written: %v", err)
	}
	altered := bytes.Replace(sink.All(), []byte(`"u1"`), []byte(`"u2"`), 1)
	if bytes.Equal(altered, sink.All()) {
		t.Fatal("the chain does not hold the principal u1")
	}
	if _, err := Verify(altered); err == nil {
		t.Error("Verify accepted a chain with a record altered")
	}
}
