package postgres

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/testnet"
)

// TestCloseInBlackhole: PostgreSQL stops answering without closing
// anything. An operation (a statement or a transaction) fails with
// store.ErrUnavailable after the store timeout, and Close returns within about that timeout too, rather than
// after pgx's own 15 s wait on the connections it gives up on.
func TestCloseInBlackhole(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: PostgreSQL behind a proxy that stops answering; run without -short")
	}
	const timeout = 300 * time.Millisecond
	u, err := url.Parse(newSchema(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := testnet.NewProxy(t, u.Host)
	u.Host = proxy.Addr()
	s, err := Open(context.Background(), u.String(), WithTimeout(timeout))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.ListClients(ctx); err != nil {
		t.Fatal(err)
	}
	control := open(t, newSchema(t))
	if _, err := control.ListClients(ctx); err != nil {
		t.Fatal(err)
	}
	if err := control.Close(); err != nil {
		t.Errorf("Close of a healthy store: %v", err)
	}
	proxy.Blackhole()
	start := time.Now()
	if _, err := s.ListClients(ctx); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("ListClients in a black hole: %v, want store.ErrUnavailable", err)
	}
	if took := time.Since(start); took > 10*timeout {
		t.Errorf("ListClients failed after %v; the store timeout is %v", took, timeout)
	}
	// A statement with arrays, a transaction, an aggregate: the same.
	for name, f := range map[string]func() error{
		"AppendAudit": func() error {
			return s.AppendAudit(ctx, []store.AuditEntry{{Node: "n", Seq: 1, Line: []byte("{}")}})
		},
		"TrimTransitKey": func() error { return s.TrimTransitKey(ctx, store.DefaultTenant, "k", 1) },
		"GetTransitKey":  func() error { _, _, err := s.GetTransitKey(ctx, store.DefaultTenant, "k"); return err },
	} {
		if err := f(); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s in a black hole: %v, want store.ErrUnavailable", name, err)
		}
	}
	start = time.Now()
	err = s.Close()
	t.Logf("Close: %v", err)
	if took := time.Since(start); took > 3*timeout+time.Second {
		t.Errorf("Close took %v in a black hole; the store timeout is %v", took, timeout)
	}
}
