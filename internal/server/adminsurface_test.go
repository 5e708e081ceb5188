package server

import "testing"

func TestAllowedAdminHost(t *testing.T) {
	for host, want := range map[string]bool{
		"": true, "localhost": true, "localhost:1": true, "127.0.0.1": true, "[::1]": true, "::1": true,
		"192.0.2.7:9090": true, "[2001:db8::1]:9090": true, "ops.example": true, "OPS.example:1": true,
		"example.com": false, "127.0.0.1.nip.io": false, "localhost.attacker.test": false, "ops.example.evil": false,
	} {
		if got := allowedAdminHost(host, []string{"ops.example"}); got != want {
			t.Errorf("allowedAdminHost(%q) = %v, want %v", host, got, want)
		}
	}
}
