package testnet

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Exchange writes an HTTP/1.1 request by hand to addr and reads the
// response, so that a test can send what no client library would: a lower
// case or invalid method, repeated, lower-case and underscored header
// names, a path as given. head is the request line and headers without the
// final blank line ("GET /x HTTP/1.1\r\nHost: h\r\n..."); Connection: close
// is added. A response to HEAD is read without a body.
func Exchange(t testing.TB, addr, head string) (status int, h http.Header, body string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if !strings.HasSuffix(head, "\r\n") {
		head += "\r\n"
	}
	if _, err := io.WriteString(conn, head+"Connection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	method, _, _ := strings.Cut(head, " ")
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: strings.ToUpper(method)})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}
