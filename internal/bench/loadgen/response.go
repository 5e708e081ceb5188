package loadgen

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// ErrMalformed is wrapped by the error readResponse returns for an answer
// that is not HTTP/1.x as the generator reads it.
var ErrMalformed = errors.New("malformed response")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
}

// response is what the generator keeps of an answer.
type response struct {
	status int
	close  bool // the connection cannot carry another request
}

// maxChunkSize bounds a chunk's declared size, so its hex cannot overflow.
const maxChunkSize = 1 << 40

// readResponse reads one answer from br, body included (discarded), and
// reports its status and whether the server closes the connection after
// it: "Connection: close", HTTP/1.0 without keep-alive, or a body that
// ends with the connection. head is true when the request was HEAD (no
// body follows). Interim 1xx answers are skipped. An I/O error is
// returned as the reader returned it (io.ErrUnexpectedEOF for a
// connection closed inside an answer); anything else wrong is
// ErrMalformed. It allocates nothing for a well-formed answer whose lines
// fit br's buffer.
func readResponse(br *bufio.Reader, head bool) (response, error) {
	for {
		r, err := readOne(br, head)
		if err != nil || r.status >= 200 {
			return r, err
		}
	}
}

func readOne(br *bufio.Reader, head bool) (response, error) {
	line, err := readLine(br, true)
	if err != nil {
		return response{}, err
	}
	// "HTTP/1.x SSS[ reason]"
	if len(line) < 12 || string(line[:7]) != "HTTP/1." || line[7] < '0' || line[7] > '9' || line[8] != ' ' ||
		len(line) > 12 && line[12] != ' ' {
		return response{}, malformed("status line %.40q", line)
	}
	status := 0
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return response{}, malformed("status line %.40q", line)
		}
		status = status*10 + int(c-'0')
	}
	if status < 100 {
		return response{}, malformed("status %d", status)
	}
	http10 := line[7] == '0'
	r := response{status: status, close: http10}
	length := int64(-1)
	chunked, otherCoding := false, false
	for {
		line, err := readLine(br, false)
		if err != nil {
			return response{}, err
		}
		if len(line) == 0 {
			break
		}
		colon := -1
		for i, c := range line {
			if c == ':' {
				colon = i
				break
			}
		}
		if colon <= 0 || !validName(line[:colon]) {
			return response{}, malformed("header line %.40q", line)
		}
		name, value := line[:colon], trimSpace(line[colon+1:])
		switch {
		case equalFold(name, "content-length"):
			n, ok := parseDecimal(value)
			if !ok || length >= 0 && n != length {
				return response{}, malformed("Content-Length %.40q", value)
			}
			length = n
		case equalFold(name, "transfer-encoding"):
			if lastToken(value, "chunked") {
				chunked = true
			} else {
				otherCoding = true
			}
		case equalFold(name, "connection"):
			if hasToken(value, "close") {
				r.close = true
			} else if http10 && hasToken(value, "keep-alive") {
				r.close = false
			}
		}
	}
	switch {
	case status < 200:
		if status == 101 {
			return response{}, malformed("101 Switching Protocols")
		}
		return r, nil
	case head || status == 204 || status == 304:
		return r, nil
	case chunked && !otherCoding:
		return r, discardChunked(br)
	case otherCoding || chunked:
		// A body the generator cannot delimit ends with the connection.
	case length >= 0:
		_, err := br.Discard(int(min(length, maxChunkSize)))
		return r, unexpectedEOF(err)
	}
	r.close = true
	_, err = io.Copy(io.Discard, br)
	return r, err
}

func discardChunked(br *bufio.Reader) error {
	for {
		line, err := readLine(br, false)
		if err != nil {
			return err
		}
		var size int64
		digits := 0
		for _, c := range line {
			var d byte
			switch {
			case c >= '0' && c <= '9':
				d = c - '0'
			case c >= 'a' && c <= 'f':
				d = c - 'a' + 10
			case c >= 'A' && c <= 'F':
				d = c - 'A' + 10
			default:
				d = 0xff
			}
			if d == 0xff {
				if c != ';' && c != ' ' && c != '\t' {
					return malformed("chunk size %.40q", line)
				}
				break
			}
			size = size<<4 | int64(d)
			if digits++; size > maxChunkSize {
				return malformed("chunk size %.40q", line)
			}
		}
		if digits == 0 {
			return malformed("chunk size %.40q", line)
		}
		if size == 0 {
			for { // trailers, up to the empty line
				line, err := readLine(br, false)
				if err != nil || len(line) == 0 {
					return err
				}
			}
		}
		if _, err := br.Discard(int(size)); err != nil {
			return unexpectedEOF(err)
		}
		line, err = readLine(br, false)
		if err != nil {
			return err
		}
		if len(line) != 0 {
			return malformed("chunk of %d bytes not followed by CRLF", size)
		}
	}
}

// readLine returns the next line without its CRLF (or LF). first says it
// would begin an answer: io.EOF there means the server closed between
// answers; anywhere else an answer was cut short (io.ErrUnexpectedEOF).
func readLine(br *bufio.Reader, first bool) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	switch {
	case err == bufio.ErrBufferFull:
		return nil, malformed("line longer than %d bytes", br.Size())
	case err == io.EOF && (len(line) > 0 || !first):
		return nil, io.ErrUnexpectedEOF
	case err != nil:
		return nil, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// equalFold reports whether b equals the lower-case ASCII s, ignoring case.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

func parseDecimal(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 15 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// hasToken reports whether the comma-separated list v holds token
// (lower-case), ignoring case.
func hasToken(v []byte, token string) bool {
	for len(v) > 0 {
		i := 0
		for i < len(v) && v[i] != ',' {
			i++
		}
		if equalFold(trimSpace(v[:i]), token) {
			return true
		}
		if i == len(v) {
			break
		}
		v = v[i+1:]
	}
	return false
}

// lastToken reports whether the last element of the comma-separated list
// v is token (lower-case), ignoring case.
func lastToken(v []byte, token string) bool {
	i := len(v) - 1
	for i >= 0 && v[i] != ',' {
		i--
	}
	return equalFold(trimSpace(v[i+1:]), token)
}
