package issuer

import (
	"bytes"
	"encoding/json"
	"testing"
)

var jsonStrings = []string{"", "svc-a", "orders:read orders:write", `quote"d`, `back\slash`, "tab\there", "nul\x00",
	"<script>&", "ünïcødé", "line\u2028sep", "bad utf8 \xff\xfe", "emoji 🔑", "https://auth.example.com/"}

// TestClaimsJSON: the appended claims are byte for byte what encoding/json
// writes, for every kind of string.
func TestClaimsJSON(t *testing.T) {
	for _, s := range jsonStrings {
		for _, aud := range [][]string{nil, {s}, {"api", s}} {
			c := accessClaims{Iss: s, Sub: s, Aud: aud, Exp: 1_800_000_900, Iat: -5, Jti: s, ClientID: s, Tenant: s, Scope: s}
			want, err := json.Marshal(&c)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.marshal(); !bytes.Equal(got, want) {
				t.Errorf("claims with %q, aud %q:\n got %s\nwant %s", s, aud, got, want)
			}
		}
	}
}

func TestTokenResponseJSON(t *testing.T) {
	for _, s := range jsonStrings {
		for _, refresh := range []string{"", "kgr_abc"} {
			r := tokenResponse{AccessToken: "a.b.c", TokenType: "Bearer", ExpiresIn: 900, RefreshToken: refresh, Scope: s}
			want, err := json.Marshal(&r)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.marshal(); !bytes.Equal(got, append(want, '\n')) {
				t.Errorf("response with scope %q, refresh %q:\n got %s\nwant %s", s, refresh, got, want)
			}
		}
	}
}

// TestActiveTokenJSON: the appended introspection answer is byte for byte
// the map encoding/json wrote before.
func TestActiveTokenJSON(t *testing.T) {
	for _, s := range jsonStrings {
		for _, aud := range [][]string{nil, {s}, {"api", s}} {
			a := activeToken{Aud: aud, ClientID: s, Exp: 1_800_000_900, Iat: -5, Iss: s, Jti: s, Scope: s, Sub: s, Tenant: s}
			m := map[string]any{"active": true, "token_type": "Bearer", "iss": a.Iss, "sub": a.Sub,
				"exp": a.Exp, "iat": a.Iat, "jti": a.Jti, "client_id": a.ClientID}
			if a.Scope != "" {
				m["scope"] = a.Scope
			}
			if a.Tenant != "" {
				m["tenant"] = a.Tenant
			}
			if len(aud) > 0 {
				m["aud"] = aud
			}
			want, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if got := a.marshal(); !bytes.Equal(got, append(want, '\n')) {
				t.Errorf("introspection with %q, aud %q:\n got %s\nwant %s", s, aud, got, want)
			}
		}
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range jsonStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("appendString(%q) = %s, want %s", s, got, want)
		}
	})
}
