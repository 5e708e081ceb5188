package gateway

import (
	"crypto/sha256"
	"encoding/hex"
)

// Fingerprint names a token in logs without revealing it: the first 8 hex
// digits of its SHA-256.
func Fingerprint(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:4])
}
