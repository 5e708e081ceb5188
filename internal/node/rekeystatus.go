package node

import "github.com/keygate/keygate/internal/store"

// Rewrapping reports whether the rotation is under way: its records are
// being rewrapped under the new root key, and every node holds both keys.
func (s RekeyStatus) Rewrapping() bool { return s.State == store.RekeyRewrapping }
