package vaultapi

import (
	"strings"
	"testing"
)

func TestPermits(t *testing.T) {
	tests := []struct {
		scopes string
		op     op
		key    string
		want   bool
	}{
		{"transit:admin", opAdmin, "", true},
		{"transit:admin", opRead, "k", true},
		{"transit:admin", opEncrypt, "k", false},
		{"transit:admin", opRandom, "", false},
		{"transit:encrypt:k", opEncrypt, "k", true},
		{"transit:encrypt:k", opEncrypt, "k2", false},
		{"transit:encrypt:k", opEncrypt, "", false},
		{"transit:encrypt:k", opDecrypt, "k", false},
		{"transit:encrypt:k", opAdmin, "", false},
		{"transit:encrypt:pay*", opEncrypt, "payments", true},
		{"transit:encrypt:pay*", opEncrypt, "pay", true},
		{"transit:encrypt:pay*", opEncrypt, "pa", false},
		{"transit:encrypt:pay*", opEncrypt, "xpayments", false},
		{"transit:encrypt:*", opEncrypt, "anything", true},
		{"transit:encrypt:*", opDecrypt, "anything", false},
		{"transit:encrypt:p*y", opEncrypt, "pay", false},
		{"transit:encrypt:p**", opEncrypt, "pay", false},
		{"transit:encrypt:", opEncrypt, "", false},
		{"transit:encrypt", opEncrypt, "k", false},
		{"transit:encryptx:k", opEncrypt, "k", false},
		{"transit:encrypt:k:extra", opEncrypt, "k", false},
		{"transit:read:k", opRead, "k", true},
		{"transit:read:*", opRead, "k", true},
		{"transit:read:k", opAdmin, "", false},
		{"transit:verify:k", opVerify, "k", true},
		{"transit:sign:k", opVerify, "k", false},
		{"transit:hmac:k", opHMAC, "k", true},
		{"transit:datakey:k", opDataKey, "k", true},
		{"transit:rewrap:k", opRewrap, "k", true},
		{"transit:rewrap:k", opDecrypt, "k", false},
		{"transit:random", opRandom, "", true},
		{"transit:random:x", opRandom, "", false},
		{"transit:hash", opHash, "", true},
		{"transit:hash", opRandom, "", false},
		{"TRANSIT:admin", opAdmin, "", false},
		{"transit:Admin", opAdmin, "", false},
		{"xtransit:admin", opAdmin, "", false},
		{"demo transit:decrypt:k openid", opDecrypt, "k", true},
		{"demo  transit:decrypt:k", opDecrypt, "k", true},
		{"demo openid", opDecrypt, "k", false},
		{"", opDecrypt, "k", false},
		{"transit:decrypt:k", 0, "k", false},
	}
	for _, tt := range tests {
		if got := permits(tt.scopes, tt.op, tt.key); got != tt.want {
			t.Errorf("permits(%q, %s, %q) = %v, want %v", tt.scopes, tt.op, tt.key, got, tt.want)
		}
	}
}

// grantsRef is the scope grammar written out another way, for the fuzz
// target to compare with.
func grantsRef(scope string, o op, key string) bool {
	parts := strings.SplitN(scope, ":", 3)
	if parts[0] != "transit" || len(parts) < 2 {
		return false
	}
	switch o {
	case 0:
		return false
	case opAdmin, opRandom, opHash:
		return len(parts) == 2 && parts[1] == o.String()
	}
	if o == opRead && len(parts) == 2 && parts[1] == "admin" {
		return true
	}
	if len(parts) != 3 || parts[1] != o.String() {
		return false
	}
	pat := parts[2]
	if strings.Count(pat, "*") == 1 && strings.HasSuffix(pat, "*") {
		return strings.HasPrefix(key, pat[:len(pat)-1])
	}
	return !strings.Contains(pat, "*") && pat == key && key != ""
}

// FuzzPermits: the matcher agrees with grantsRef, scope by scope, and a
// list of scopes grants exactly what one of its scopes grants.
func FuzzPermits(f *testing.F) {
	for _, s := range []string{"transit:admin", "transit:encrypt:pay*", "transit:read:*", "transit:random transit:hash", "transit:decrypt:k x"} {
		f.Add(s, uint8(opEncrypt), "payments")
	}
	f.Fuzz(func(t *testing.T, scopes string, o uint8, key string) {
		op := op(o % uint8(opHash+2))
		any := false
		for _, tok := range strings.Split(scopes, " ") {
			g := grants(tok, op, key)
			if g != grantsRef(tok, op, key) {
				t.Fatalf("grants(%q, %s, %q) = %v, reference says %v", tok, op, key, g, !g)
			}
			any = any || g
		}
		if permits(scopes, op, key) != any {
			t.Fatalf("permits(%q, %s, %q) disagrees with its scopes", scopes, op, key)
		}
	})
}

// TestPermitsAllocations: deciding from the scopes allocates nothing.
func TestPermitsAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are checked without -race")
	}
	scopes := "openid transit:admin transit:decrypt:orders transit:encrypt:pay*"
	if n := testing.AllocsPerRun(100, func() { permits(scopes, opEncrypt, "payments") }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}
