package e2e

import (
	"net/http"
	"strings"

	"github.com/keygate/keygate/internal/testnet"
)

// The token service's issuer and audience where a test does not need the
// node's own listener address (the same as internal/server's tests use).
const (
	testIssuer   = "https://keygate.test"
	testAudience = "api"
)

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer = testnet.SyncBuffer

func bearer(token string) http.Header {
	return http.Header{"Authorization": {"Bearer " + token}}
}

func signature(token string) string { return token[strings.LastIndexByte(token, '.')+1:] }
