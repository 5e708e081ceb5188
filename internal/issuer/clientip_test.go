package issuer

import (
	"net/http"
	"net/netip"
	"testing"
)

func TestClientIP(t *testing.T) {
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	tests := []struct {
		name    string
		remote  string
		xff     []string
		trusted []netip.Prefix
		want    string
	}{
		{"no proxies configured: the peer, XFF ignored", "203.0.113.7:4000", []string{"198.51.100.1"}, nil, "203.0.113.7"},
		{"untrusted peer: its XFF is not believed", "203.0.113.7:4000", []string{"198.51.100.1"}, proxies, "203.0.113.7"},
		{"trusted peer, one hop", "10.0.0.5:4000", []string{"198.51.100.1"}, proxies, "198.51.100.1"},
		{"trusted peer, no XFF", "10.0.0.5:4000", nil, proxies, "10.0.0.5"},
		{"chain of proxies", "10.0.0.5:4000", []string{"198.51.100.1, 10.0.0.9, 10.1.2.3"}, proxies, "198.51.100.1"},
		{"spoofed left entries are not read", "10.0.0.5:4000", []string{"1.2.3.4, 198.51.100.1"}, proxies, "198.51.100.1"},
		{"several XFF headers read as one list", "10.0.0.5:4000", []string{"1.2.3.4", "198.51.100.1, 10.0.0.9"}, proxies, "198.51.100.1"},
		{"garbage stops at the last proxy", "10.0.0.5:4000", []string{"198.51.100.1, not-an-ip"}, proxies, "10.0.0.5"},
		{"only proxies: the left-most one", "10.0.0.5:4000", []string{"10.9.9.9, 10.0.0.9"}, proxies, "10.9.9.9"},
		{"IPv6 loopback proxy", "[::1]:4000", []string{"2001:db8::1"}, proxies, "2001:db8::1"},
		{"IPv4-mapped peer", "[::ffff:10.0.0.5]:4000", []string{"198.51.100.1"}, proxies, "198.51.100.1"},
		{"IPv4-mapped hop", "10.0.0.5:4000", []string{"::ffff:198.51.100.1"}, proxies, "198.51.100.1"},
		{"hop with a port", "10.0.0.5:4000", []string{"198.51.100.1:4711, 10.0.0.9:80"}, proxies, "198.51.100.1"},
		{"IPv6 hop with a port", "10.0.0.5:4000", []string{"[2001:db8::1]:4711"}, proxies, "2001:db8::1"},
		{"unparsable peer: no address (addrKey keeps it as it is)", "pipe", nil, proxies, "invalid IP"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &http.Request{RemoteAddr: tt.remote, Header: http.Header{}}
			for _, v := range tt.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := clientIP(r, tt.trusted).String(); got != tt.want {
				t.Errorf("clientIP = %q, want %q", got, tt.want)
			}
		})
	}
}

func FuzzClientIP(f *testing.F) {
	f.Add("10.0.0.5:4000", "198.51.100.1, 10.0.0.9")
	f.Add("[::1]:1", "2001:db8::1,,")
	f.Fuzz(func(t *testing.T, remote, xff string) {
		r := &http.Request{RemoteAddr: remote, Header: http.Header{"X-Forwarded-For": {xff}}}
		trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
		if got, want := clientIP(r, trusted).IsValid(), remoteIP(remote).IsValid(); got != want {
			t.Fatalf("clientIP(%q, %q) valid: %v, the peer's address valid: %v", remote, xff, got, want)
		}
		for _, bits := range []int{MinIPv6Prefix, DefaultIPv6Prefix, MaxIPv6Prefix} {
			if got := addrKey(r, trusted, bits); got == "" && remote != "" {
				t.Fatalf("addrKey(%q, %q, %d) is empty", remote, xff, bits)
			}
		}
	})
}

func TestAddrKey(t *testing.T) {
	for _, tt := range []struct{ remote, want string }{
		{"203.0.113.7:4000", "203.0.113.7"},
		{"[2001:db8:1:2:aaaa::1]:4000", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2:bbbb::9]:4000", "2001:db8:1:2::/64"}, // the same /64: one budget
		{"[::ffff:198.51.100.1]:1", "198.51.100.1"},
		{"pipe", "pipe"},
	} {
		r := &http.Request{RemoteAddr: tt.remote, Header: http.Header{}}
		if got := addrKey(r, nil, DefaultIPv6Prefix); got != tt.want {
			t.Errorf("addrKey(%q) = %q, want %q", tt.remote, got, tt.want)
		}
	}
	for _, tt := range []struct {
		remote string
		bits   int
		want   string
	}{
		{"[2001:db8:1:2:aaaa::1]:4000", 48, "2001:db8:1::/48"},
		{"[2001:db8:1:ff:aaaa::1]:4000", 56, "2001:db8:1::/56"},
		{"[2001:db8:1:2:aaaa::1]:4000", 128, "2001:db8:1:2:aaaa::1/128"},
		{"203.0.113.7:4000", 48, "203.0.113.7"}, // IPv4 counts by address whatever the length
	} {
		r := &http.Request{RemoteAddr: tt.remote, Header: http.Header{}}
		if got := addrKey(r, nil, tt.bits); got != tt.want {
			t.Errorf("addrKey(%q, /%d) = %q, want %q", tt.remote, tt.bits, got, tt.want)
		}
	}
}
