package issuer

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// clientIP is the address a request came from, for the per-address login
// limit. Behind reverse proxies every request arrives from a proxy, so when
// the peer is one of trusted, X-Forwarded-For is read from its right end:
// the first address not itself a trusted proxy is the client. Entries left
// of that are whatever the client chose to send and are never believed.
// An unparsable entry stops the walk at the last proxy that wrote it.
func clientIP(r *http.Request, trusted []netip.Prefix) string {
	peer := remoteIP(r.RemoteAddr)
	if !peer.IsValid() {
		return r.RemoteAddr
	}
	if len(trusted) == 0 || !isTrusted(peer, trusted) {
		return peer.String()
	}
	hops := r.Header.Values("X-Forwarded-For")
	for i := len(hops) - 1; i >= 0; i-- {
		parts := strings.Split(hops[i], ",")
		for j := len(parts) - 1; j >= 0; j-- {
			ip, err := netip.ParseAddr(strings.TrimSpace(parts[j]))
			if err != nil {
				return peer.String()
			}
			ip = ip.Unmap()
			if !isTrusted(ip, trusted) {
				return ip.String()
			}
			peer = ip
		}
	}
	return peer.String()
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
