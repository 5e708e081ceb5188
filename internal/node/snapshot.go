package node

import (
	"context"
	"errors"
	"io"
)

// snapshotter is a store that writes a snapshot of itself (package
// snapshot): both backends are.
type snapshotter interface {
	Snapshot(ctx context.Context, w io.Writer) error
}

// ErrNoSnapshot: the node's store cannot write a snapshot.
var ErrNoSnapshot = errors.New("the store cannot write a snapshot")

// Snapshot writes a snapshot of the node's store to w: every row, read in
// one transaction while the node serves, sealed values still sealed (see
// package snapshot). It needs no root key, and works on a sealed node.
func (n *Node) Snapshot(ctx context.Context, w io.Writer) error {
	st := any(n.store)
	if t, ok := st.(tracedStore); ok {
		st = t.st
	}
	s, ok := st.(snapshotter)
	if !ok {
		return ErrNoSnapshot
	}
	return s.Snapshot(ctx, w)
}
