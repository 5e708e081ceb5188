package issuer

import (
	"sync"
	"time"

	"github.com/keygate/keygate/jose"
)

// maxVerifiedTokens bounds the introspection cache; when it is full it
// starts over.
const maxVerifiedTokens = 10_000

// verifiedCache remembers the access tokens introspection has verified,
// until they expire, so that a resource server introspecting the same
// token on every request costs a map lookup instead of a signature check.
// Only the signature and the claims checks are remembered: a hit still
// requires the signing key to be published, and revocation and the
// caller's right to see the token are checked on every call.
type verifiedCache struct {
	mu      sync.RWMutex
	entries map[string]verifiedToken // by the whole compact token
}

// verifiedToken is a verified access token and its client_id and tenant
// (tenantOf), read once.
type verifiedToken struct {
	t        *jose.Token
	clientID string
	tenant   string
}

// get returns a verified token that has not expired at now and whose key
// is still published.
func (vc *verifiedCache) get(token string, now time.Time, keys *jose.KeySet) (verifiedToken, bool) {
	vc.mu.RLock()
	v, ok := vc.entries[token]
	vc.mu.RUnlock()
	if !ok || !v.t.Claims.Expiry.Valid || now.Unix() >= v.t.Claims.Expiry.Unix {
		return verifiedToken{}, false
	}
	if _, err := keys.ResolveKey(v.t.Header.KeyID, v.t.Header.Alg); err != nil {
		return verifiedToken{}, false
	}
	return v, true
}

func (vc *verifiedCache) put(token string, v verifiedToken) {
	vc.mu.Lock()
	if vc.entries == nil || len(vc.entries) >= maxVerifiedTokens {
		vc.entries = make(map[string]verifiedToken)
	}
	vc.entries[token] = v
	vc.mu.Unlock()
}
