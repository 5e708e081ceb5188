package node

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/keygate/keygate/internal/issuer/signingkeys"
	"github.com/keygate/keygate/internal/verify/verifykeys"
	"github.com/keygate/keygate/jose"
)

// KeySource is the node's published signing keys as a key source, for a
// gateway that verifies the node's own tokens (dev mode). An unknown kid
// re-reads them from the store, at most once a second, so that a key
// another node just rotated in is accepted before its notice arrives.
func (n *Node) KeySource() verifykeys.Source { return n.keySrc }

// managedKeys is the verifykeys.Source of a signingkeys.Manager's published keys.
type managedKeys struct {
	km   *signingkeys.Manager
	now  func() time.Time
	last atomic.Int64 // unix nanoseconds of the last re-read
}

var _ verifykeys.Source = (*managedKeys)(nil)

func (m *managedKeys) Current() *jose.KeySet {
	if ks := m.km.KeySet(); ks != nil {
		return ks
	}
	return jose.NewKeySet()
}

func (m *managedKeys) Refetch(ctx context.Context) *jose.KeySet {
	now := time.Now().UnixNano()
	prev := m.last.Load()
	if now-prev >= int64(time.Second) && m.last.CompareAndSwap(prev, now) {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		m.km.Reload(ctx) //nolint:errcheck // the keys in force stay; the tick logs store failures
		cancel()
	}
	return m.Current()
}

// Status is ready while keys are published, sealed or not: a sealed node
// still verifies the tokens its fleet issues.
func (m *managedKeys) Status() verifykeys.Status {
	st := verifykeys.Status{}
	if n := m.Current().Len(); n > 0 {
		st.Keys = n
		st.LastSuccess = m.now()
		st.LastAttempt = st.LastSuccess
	} else {
		st.LastError = signingkeys.ErrNoActiveKey
	}
	return st
}
