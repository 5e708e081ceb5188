// Package testnet holds the tests' helpers for real network services: a
// dialer whose connections can all be dropped at once, a proxy that can go
// down or black-hole, an address nothing listens on, Redis clients and a
// Redis Cluster, a PostgreSQL schema per test, and certificate authorities
// and certificates made up at test time. It is imported by tests only.
package testnet

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"testing"
)

// Switch is a dialer whose network can be cut: Down closes every
// connection it made and refuses new ones until Up.
type Switch struct {
	mu    sync.Mutex
	down  bool
	conns map[net.Conn]struct{}
}

// Dial dials like net.Dialer unless the switch is down.
func (s *Switch) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return nil, errors.New("network is down")
	}
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if s.conns == nil {
		s.conns = make(map[net.Conn]struct{})
	}
	s.conns[c] = struct{}{}
	return c, nil
}

// Down closes every connection and refuses new ones.
func (s *Switch) Down() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = true
	for c := range s.conns {
		_ = c.Close()
	}
	clear(s.conns)
}

// Up lets new connections through again.
func (s *Switch) Up() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = false
}

// ClosedAddr returns a loopback address nothing listens on.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// SyncBuffer is a log sink safe for concurrent writes, for the tests that
// read what a server logged.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
