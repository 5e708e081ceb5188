package loadgen

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestReadResponse(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		head   bool
		status []int // the answers read, in order
		close  []bool
		err    error // after them
		rest   string
	}{
		{name: "content-length",
			in:     "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1 204 No Content\r\n\r\n",
			status: []int{200, 204}, close: []bool{false, false}, err: io.EOF},
		{name: "empty 200 with no reason, LF only",
			in:     "HTTP/1.1 200\nContent-Length: 0\n\n",
			status: []int{200}, close: []bool{false}, err: io.EOF},
		{name: "chunked with extension and trailer",
			in:     "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n5;x=y\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\nnext",
			status: []int{200}, close: []bool{false}, err: io.ErrUnexpectedEOF, rest: "next"},
		{name: "connection close",
			in:     "HTTP/1.1 503 Busy\r\nconnection: Keep-Alive, CLOSE\r\nContent-Length: 2\r\n\r\nno",
			status: []int{503}, close: []bool{true}, err: io.EOF},
		{name: "HTTP/1.0 closes unless keep-alive",
			in:     "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\nHTTP/1.0 404 Not Found\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n",
			status: []int{200, 404}, close: []bool{true, false}, err: io.EOF},
		{name: "body to the end of the connection",
			in:     "HTTP/1.1 200 OK\r\n\r\nall of this",
			status: []int{200}, close: []bool{true}, err: io.EOF},
		{name: "interim 100 skipped",
			in:     "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n",
			status: []int{201}, close: []bool{false}, err: io.EOF},
		{name: "HEAD has no body",
			in:   "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n",
			head: true, status: []int{200, 200}, close: []bool{false, false}, err: io.EOF},
		{name: "same content-length twice", in: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
			status: []int{200}, close: []bool{false}, err: io.EOF},
		{name: "cut in the body", in: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", err: io.ErrUnexpectedEOF},
		{name: "cut in the headers", in: "HTTP/1.1 200 OK\r\nContent-Len", err: io.ErrUnexpectedEOF},
		{name: "cut in a chunk", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel", err: io.ErrUnexpectedEOF},
		{name: "not HTTP", in: "SSH-2.0-OpenSSH_9.6\r\n", err: ErrMalformed},
		{name: "HTTP/2 status line", in: "HTTP/2 200\r\n\r\n", err: ErrMalformed},
		{name: "bad status", in: "HTTP/1.1 2x0 OK\r\n\r\n", err: ErrMalformed},
		{name: "status below 100", in: "HTTP/1.1 099 Odd\r\n\r\n", err: ErrMalformed},
		{name: "no space after status", in: "HTTP/1.1 2000\r\n\r\n", err: ErrMalformed},
		{name: "switching protocols", in: "HTTP/1.1 101 Switching Protocols\r\n\r\n", err: ErrMalformed},
		{name: "header without colon", in: "HTTP/1.1 200 OK\r\nBroken\r\n\r\n", err: ErrMalformed},
		{name: "header name with space", in: "HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n", err: ErrMalformed},
		{name: "negative content-length", in: "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", err: ErrMalformed},
		{name: "conflicting content-length", in: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nx", err: ErrMalformed},
		{name: "bad chunk size", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", err: ErrMalformed},
		{name: "empty chunk size", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\n", err: ErrMalformed},
		{name: "huge chunk size", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n", err: ErrMalformed},
		{name: "chunk without CRLF", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n", err: ErrMalformed},
		{name: "line too long", in: "HTTP/1.1 200 OK\r\nX: " + strings.Repeat("a", 5000) + "\r\n\r\n", err: ErrMalformed},
		{name: "nothing", in: "", err: io.EOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			br := bufio.NewReaderSize(strings.NewReader(tt.in), 4096)
			for i := 0; ; i++ {
				r, err := readResponse(br, tt.head)
				if err != nil {
					if i != len(tt.status) || !errors.Is(err, tt.err) {
						t.Fatalf("after %d answers: %v, want %d answers then %v", i, err, len(tt.status), tt.err)
					}
					break
				}
				if i >= len(tt.status) || r.status != tt.status[i] || r.close != tt.close[i] {
					t.Fatalf("answer %d: %+v; want statuses %v, close %v", i, r, tt.status, tt.close)
				}
			}
			if tt.rest != "" {
				// The chunked case: what follows the answer is left unread ("next" is
				// then not a status line).
				br := bufio.NewReaderSize(strings.NewReader(tt.in), 4096)
				if _, err := readResponse(br, false); err != nil {
					t.Fatal(err)
				}
				if rest, _ := io.ReadAll(br); string(rest) != tt.rest {
					t.Errorf("left %q, want %q", rest, tt.rest)
				}
			}
		})
	}
}

func TestReadResponseAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	const answer = "HTTP/1.1 200 OK\r\nDate: Thu, 26 Nov 2026 12:00:00 GMT\r\nContent-Type: application/json\r\n" +
		"Transfer-Encoding: chunked\r\n\r\n4\r\n{}\r\n\r\n0\r\n\r\n" +
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-A-Header-Name-Longer-Than-32-Bytes: 1\r\n\r\n{}"
	sr := strings.NewReader(answer)
	br := bufio.NewReaderSize(sr, 4096)
	n := testing.AllocsPerRun(1000, func() {
		sr.Reset(answer)
		br.Reset(sr)
		for range 2 {
			if _, err := readResponse(br, false); err != nil {
				t.Fatal(err)
			}
		}
	})
	if n != 0 {
		t.Errorf("readResponse allocates %v times per answer pair", n)
	}
}

// FuzzReadResponse: the parser never panics, consumes no more than it is
// given, and agrees with net/http on the status of an answer both accept.
func FuzzReadResponse(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"HTTP/1.1 500 Internal Server Error\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.0 200 OK\r\n\r\nbody until close",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffff;ext\r\n",
		"HTTP/1.1 200\nContent-Length: 1\n\nx",
	} {
		f.Add([]byte(s), false)
	}
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"), true)
	f.Fuzz(func(t *testing.T, data []byte, head bool) {
		br := bufio.NewReaderSize(bytes.NewReader(data), 4096)
		r, err := readResponse(br, head)
		if err != nil {
			return
		}
		if r.status < 200 || r.status > 999 {
			t.Fatalf("status %d accepted", r.status)
		}
		req := &http.Request{Method: "GET"}
		if head {
			req.Method = "HEAD"
		}
		std, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(data)), req)
		if err != nil {
			return
		}
		defer std.Body.Close()
		if std.StatusCode >= 200 && std.StatusCode != r.status {
			t.Fatalf("status %d, net/http reads %d", r.status, std.StatusCode)
		}
	})
}

func BenchmarkReadResponse(b *testing.B) {
	const answer = "HTTP/1.1 200 OK\r\nDate: Thu, 26 Nov 2026 12:00:00 GMT\r\nContent-Length: 0\r\n\r\n"
	sr := strings.NewReader(answer)
	br := bufio.NewReaderSize(sr, 4096)
	b.ReportAllocs()
	for b.Loop() {
		sr.Reset(answer)
		br.Reset(sr)
		if _, err := readResponse(br, false); err != nil {
			b.Fatal(err)
		}
	}
}
