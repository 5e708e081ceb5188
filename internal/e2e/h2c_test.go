package e2e

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/server"
)

// TestH2C: a plaintext traffic listener speaks HTTP/2 to a client with
// prior knowledge (as Go's client and Envoy do), on the same port as
// HTTP/1.1, and decides /auth alike; an HTTP/1.1 "Upgrade: h2c" is not
// honoured (h2c smuggling past a front proxy).
func TestH2C(t *testing.T) {
	l := startLive(t, server.Config{Node: &node.Config{DataDir: filepath.Join(t.TempDir(), "data"), Issuer: testIssuer, Audience: testAudience, Dev: true}})
	b := l.Bootstrap()
	tok := clientToken(t, l.base, b.DemoClientID, b.DemoClientSecret)

	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	h2 := &http.Client{Transport: &http.Transport{Protocols: p}, Timeout: 30 * time.Second}
	h1 := &http.Client{Timeout: 30 * time.Second}
	for _, c := range []struct {
		name   string
		client *http.Client
		proto  int
	}{{"HTTP/2 prior knowledge", h2, 2}, {"HTTP/1.1", h1, 1}} {
		for _, tc := range []struct {
			token string
			want  int
		}{{tok, http.StatusOK}, {"", http.StatusUnauthorized}, {tok + "x", http.StatusUnauthorized}} {
			req, _ := http.NewRequest(http.MethodGet, l.base+"/auth", nil)
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := c.client.Do(req)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.ProtoMajor != c.proto || resp.StatusCode != tc.want {
				t.Errorf("%s, token %v: HTTP/%d %d, want HTTP/%d %d", c.name, tc.token != "", resp.ProtoMajor, resp.StatusCode, c.proto, tc.want)
			}
		}
	}

	// An upgrade request gets an HTTP/1.1 answer, never 101.
	conn, err := net.Dial("tcp", strings.TrimPrefix(l.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols || resp.ProtoMajor != 1 {
		t.Errorf("Upgrade: h2c answered HTTP/%d %d, want an HTTP/1.1 answer without switching", resp.ProtoMajor, resp.StatusCode)
	}
}
