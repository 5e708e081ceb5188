package mint

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestPayload(t *testing.T) {
	now := time.Unix(1_700_000_000, 999_000_000)
	tests := []struct {
		name   string
		claims Claims
		want   string
	}{
		{"minimal", Claims{TTL: time.Minute},
			`{"exp":1700000060,"iat":1700000000,"nbf":1700000000}`},
		{"one audience is a string", Claims{Issuer: "i", Subject: "s", Audience: []string{"a"}, Scope: "x y", TTL: time.Hour},
			`{"aud":"a","exp":1700003600,"iat":1700000000,"iss":"i","nbf":1700000000,"scope":"x y","sub":"s"}`},
		{"several audiences are an array", Claims{Audience: []string{"a", "b"}, TTL: time.Second},
			`{"aud":["a","b"],"exp":1700000001,"iat":1700000000,"nbf":1700000000}`},
		{"extra claims", Claims{TTL: time.Second, Extra: map[string]json.RawMessage{"n": json.RawMessage(` 3 `), "o": json.RawMessage(`{"a":1}`)}},
			`{"exp":1700000001,"iat":1700000000,"n":3,"nbf":1700000000,"o":{"a":1}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			zero := bytes.NewReader(make([]byte, 16))
			got, err := Payload(tt.claims, now, zero)
			if err != nil {
				t.Fatal(err)
			}
			want := strings.TrimSuffix(tt.want, "}") + `,"jti":"AAAAAAAAAAAAAAAAAAAAAA"}`
			if !sameJSON(t, got, []byte(want)) {
				t.Errorf("payload\n got %s\nwant %s", got, want)
			}
		})
	}
}

func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

func TestPayloadRefuses(t *testing.T) {
	now := time.Now()
	for _, name := range Reserved {
		c := Claims{TTL: time.Hour, Extra: map[string]json.RawMessage{name: json.RawMessage(`1`)}}
		if _, err := Payload(c, now, rand.Reader); !errors.Is(err, ErrReservedClaim) {
			t.Errorf("extra %q: err %v", name, err)
		}
	}
	for _, ttl := range []time.Duration{0, -time.Second} {
		if _, err := Payload(Claims{TTL: ttl}, now, rand.Reader); !errors.Is(err, ErrTTL) {
			t.Errorf("ttl %v: err %v", ttl, err)
		}
	}
	if _, err := Payload(Claims{TTL: time.Hour}, now, bytes.NewReader(make([]byte, 15))); err == nil {
		t.Error("short random source accepted")
	}
	bad := Claims{TTL: time.Hour, Extra: map[string]json.RawMessage{"x": json.RawMessage(`{`)}}
	if _, err := Payload(bad, now, rand.Reader); err == nil {
		t.Error("invalid JSON claim accepted")
	}
}

func TestNewIDIsRandom(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id, err := NewID(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		if len(id) != 22 || seen[id] {
			t.Fatalf("id %q (len %d, seen %v)", id, len(id), seen[id])
		}
		seen[id] = true
	}
}
