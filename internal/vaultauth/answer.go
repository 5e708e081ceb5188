package vaultauth

import (
	"crypto/rand"
	"encoding/hex"

	"github.com/keygate/keygate/internal/audit/httpaudit"
	"github.com/keygate/keygate/internal/verify"
)

// Envelope is Vault's answer to a request that succeeded, which every
// Vault API keygate serves answers in.
type Envelope struct {
	RequestID     string   `json:"request_id"`
	LeaseID       string   `json:"lease_id"`
	Renewable     bool     `json:"renewable"`
	LeaseDuration int      `json:"lease_duration"`
	Data          any      `json:"data"`
	WrapInfo      any      `json:"wrap_info"`
	Warnings      []string `json:"warnings"`
	Auth          any      `json:"auth"`
}

// RequestID is a request's id as its answer names it: its audit record's
// (which the X-Request-Id header carries), else a new random UUID
// (version 4), as Vault's request ids are.
func RequestID(n *httpaudit.Note) string {
	if id := n.RequestID(); id != "" {
		return id
	}
	var b [16]byte
	rand.Read(b[:]) //nolint:errcheck // crypto/rand never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Caller names the token's caller on the request's audit record: the
// client it was issued to, else its subject as a user.
func Caller(n *httpaudit.Note, res *verify.Result) {
	if n == nil || res == nil {
		return
	}
	client, _ := res.Token.Claims.StringClaim("client_id")
	switch sub := res.Subject; {
	case client != "" && (sub == "" || sub == client):
		n.Client(client)
	case sub != "":
		n.User(sub)
	}
}
