package issuer

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// The token endpoint's two JSON documents (the access token's claims and
// the token response) are built by appending, not by encoding/json: they
// are on the path of every issuance, and reflection over a map was a tenth
// of the handler's time. Each is checked against encoding/json in tests.

// appendString appends s as a JSON string, byte for byte as json.Marshal
// writes it: printable ASCII without quotes, backslashes or <>& (which
// every identifier keygate makes is) is copied; anything else goes through
// encoding/json.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20, c >= utf8.RuneSelf, c == '"', c == '\\', c == '<', c == '>', c == '&':
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendField appends ,"name":value-string; the first field of an object
// is written by the caller.
func appendField(b []byte, name, v string) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return appendString(b, v)
}

// appendStringsField appends ,"name":[strings].
func appendStringsField(b []byte, name string, vs []string) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':', '[')
	for i, v := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, v)
	}
	return append(b, ']')
}

func appendIntField(b []byte, name string, v int64) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return strconv.AppendInt(b, v, 10)
}

// marshal is accessClaims' JSON, as encoding/json writes it.
func (c *accessClaims) marshal() []byte {
	b := make([]byte, 0, 256+len(c.Scope))
	b = append(b, `{"iss":`...)
	b = appendString(b, c.Iss)
	b = appendField(b, "sub", c.Sub)
	if len(c.Aud) > 0 {
		b = appendStringsField(b, "aud", c.Aud)
	}
	b = appendIntField(b, "exp", c.Exp)
	b = appendIntField(b, "iat", c.Iat)
	b = appendField(b, "jti", c.Jti)
	b = appendField(b, "client_id", c.ClientID)
	b = appendField(b, "tenant", c.Tenant)
	if c.Scope != "" {
		b = appendField(b, "scope", c.Scope)
	}
	return append(b, '}')
}

// tokenResponse is RFC 6749 §5.1's answer.
type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int    `json:"expires_in"`
	RefreshToken string `json:"refresh_token,omitempty"`
	Scope        string `json:"scope,omitempty"`
}

// marshal is the response's JSON, as encoding/json writes it, with a
// trailing newline like json.Encoder.
func (t *tokenResponse) marshal() []byte {
	b := make([]byte, 0, 128+len(t.AccessToken)+len(t.RefreshToken)+len(t.Scope))
	b = append(b, `{"access_token":`...)
	b = appendString(b, t.AccessToken)
	b = appendField(b, "token_type", t.TokenType)
	b = appendIntField(b, "expires_in", int64(t.ExpiresIn))
	if t.RefreshToken != "" {
		b = appendField(b, "refresh_token", t.RefreshToken)
	}
	if t.Scope != "" {
		b = appendField(b, "scope", t.Scope)
	}
	return append(b, '}', '\n')
}

// activeToken is RFC 7662 §2.2's answer for an active token, its members in
// the order encoding/json writes a map's (introspection of distinct tokens
// spent 3% of its time marshalling one).
type activeToken struct {
	Aud      []string
	ClientID string
	Exp, Iat int64
	Iss, Jti string
	Scope    string // omitted when empty
	Sub      string
	Tenant   string // omitted when empty
}

func (a *activeToken) marshal() []byte {
	b := make([]byte, 0, 256+len(a.Scope))
	b = append(b, `{"active":true`...)
	if len(a.Aud) > 0 {
		b = appendStringsField(b, "aud", a.Aud)
	}
	b = appendField(b, "client_id", a.ClientID)
	b = appendIntField(b, "exp", a.Exp)
	b = appendIntField(b, "iat", a.Iat)
	b = appendField(b, "iss", a.Iss)
	b = appendField(b, "jti", a.Jti)
	if a.Scope != "" {
		b = appendField(b, "scope", a.Scope)
	}
	b = appendField(b, "sub", a.Sub)
	if a.Tenant != "" {
		b = appendField(b, "tenant", a.Tenant)
	}
	return append(b, `,"token_type":"Bearer"}`+"\n"...)
}
