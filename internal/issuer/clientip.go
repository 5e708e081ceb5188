package issuer

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// clientIP is the address a request came from, for the per-address
// limits. Behind reverse proxies every request arrives from a proxy, so
// when the peer is one of trusted, X-Forwarded-For is read from its right
// end: the first address not itself a trusted proxy is the client. Entries
// left of that are whatever the client chose to send and are never
// believed. An unparsable entry stops the walk at the last proxy that wrote
// it. The address is invalid only when the peer's (r.RemoteAddr) does not
// parse, which net/http's server never gives.
func clientIP(r *http.Request, trusted []netip.Prefix) netip.Addr {
	peer := remoteIP(r.RemoteAddr)
	if !peer.IsValid() || len(trusted) == 0 || !isTrusted(peer, trusted) {
		return peer
	}
	hops := r.Header.Values("X-Forwarded-For")
	for i := len(hops) - 1; i >= 0; i-- {
		parts := strings.Split(hops[i], ",")
		for j := len(parts) - 1; j >= 0; j-- {
			ip, ok := hopAddr(strings.TrimSpace(parts[j]))
			if !ok {
				return peer
			}
			if !isTrusted(ip, trusted) {
				return ip
			}
			peer = ip
		}
	}
	return peer
}

// ClientIP is the address r came from, read as the per-address limits
// read it: through trusted proxies' X-Forwarded-For, else the peer's.
func ClientIP(r *http.Request, trusted []netip.Prefix) netip.Addr { return clientIP(r, trusted) }

// IPv6 prefix lengths the per-address limits may count by
// (Config.IPv6Prefix).
const (
	DefaultIPv6Prefix = 64 // one host commonly holds a whole /64
	MinIPv6Prefix     = 32 // coarser would put whole providers' customers in one budget
	MaxIPv6Prefix     = 128
)

// addrKey is the client's address as a rate-limit key: an IPv4 address,
// or the prefix of bits (MinIPv6Prefix to MaxIPv6Prefix, as New checks) an
// IPv6 address is in (DefaultIPv6Prefix: a /64), since one host commonly
// holds a whole /64 (some a /56 or /48) and could otherwise claim a fresh
// address per attempt. A peer address that does not parse is the key as it
// is.
func addrKey(r *http.Request, trusted []netip.Prefix, bits int) string {
	ip := clientIP(r, trusted)
	if !ip.IsValid() {
		return r.RemoteAddr
	}
	return AddrKey(ip, bits)
}

// AddrKey is a valid client address as the per-address limits count it:
// an IPv4 address, or the prefix of bits (0: DefaultIPv6Prefix) an IPv6
// address is in.
func AddrKey(ip netip.Addr, bits int) string {
	if ip.Is4() || ip.Is4In6() {
		return ip.Unmap().String()
	}
	if bits == 0 {
		bits = DefaultIPv6Prefix
	}
	p, _ := ip.Prefix(bits) // an IPv6 address has every length New allows
	return p.String()
}

// hopAddr parses one X-Forwarded-For entry: an address, or an address with
// a port ("198.51.100.1:4711", "[2001:db8::1]:4711"), which some proxies
// write.
func hopAddr(s string) (netip.Addr, bool) {
	if ip, err := netip.ParseAddr(s); err == nil {
		return ip.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	return netip.Addr{}, false
}

func remoteIP(addr string) netip.Addr {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return ip.Unmap()
}

func isTrusted(ip netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
