package rootkey

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/keygate/keygate/internal/keyfile"
)

// maxKeyFileSize caps how much of a key file is read; a key file is 32
// bytes, or 44 with base64 and a newline.
const maxKeyFileSize = 1024

// LoadKeyFile reads a root key file: exactly KeySize raw bytes, or their
// base64 encoding (standard or URL alphabet, padded or not) with optional
// surrounding whitespace. It refuses a file that group or others may
// access (a *PermissionError, matching ErrInsecureKeyFile; not checked on
// Windows), a file that is not a regular file, and key material of the
// wrong length (ErrKeyLength). A file that is all printable text is read
// as base64, even at 32 bytes: 32 random bytes are all text with
// probability under 2⁻⁴⁵, while a passphrase or a short base64 string put
// in a key file by mistake always is.
func LoadKeyFile(path string) (Key, error) {
	f, err := os.Open(path)
	if err != nil {
		return Key{}, fmt.Errorf("key file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Key{}, fmt.Errorf("key file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return Key{}, fmt.Errorf("key file %s is not a regular file", path)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm()&0o077 != 0 {
		return Key{}, &PermissionError{Path: path, Mode: fi.Mode()}
	}
	buf := make([]byte, maxKeyFileSize+1)
	defer clear(buf)
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return Key{}, fmt.Errorf("read key file %s: %w", path, err)
	}
	root, err := parseKeyFile(buf[:n])
	if err != nil {
		return Key{}, fmt.Errorf("key file %s: %w", path, err)
	}
	return root, nil
}

func parseKeyFile(data []byte) (Key, error) {
	if len(data) > maxKeyFileSize {
		return Key{}, &keyError{ErrKeyLength, fmt.Sprintf("over %d bytes; want %d random bytes, raw or base64", maxKeyFileSize, KeySize)}
	}
	text := bytes.TrimSpace(data)
	if len(text) == 0 {
		return Key{}, &keyError{ErrKeyLength, fmt.Sprintf("empty; want %d random bytes, raw or base64", KeySize)}
	}
	if isText(text) {
		return parseKey(text)
	}
	if len(data) != KeySize {
		return Key{}, &keyError{ErrKeyLength, fmt.Sprintf("%d bytes of binary data; want %d raw bytes or their base64", len(data), KeySize)}
	}
	return NewRootKey(data)
}

func isText(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// keyError is a key-source error: it matches kind with errors.Is and
// reads as msg alone, for the caller to prefix with where the key came
// from.
type keyError struct {
	kind error
	msg  string
}

func (e *keyError) Error() string { return e.msg }
func (e *keyError) Unwrap() error { return e.kind }

// ParseKey decodes a root key from base64 text: standard or URL alphabet,
// padded or not, with optional surrounding whitespace. The result must be
// KeySize bytes (ErrKeyLength otherwise); text that is not base64 is
// ErrKeyEncoding. The caller may wipe text afterwards.
func ParseKey(text []byte) (Key, error) {
	root, err := parseKey(text)
	if err != nil {
		return Key{}, fmt.Errorf("root key: %w", err)
	}
	return root, nil
}

func parseKey(text []byte) (Key, error) {
	s := bytes.TrimRight(bytes.TrimSpace(text), "=")
	enc := base64.RawStdEncoding
	if bytes.ContainsAny(s, "-_") {
		enc = base64.RawURLEncoding
	}
	if !isBase64(s) {
		return Key{}, &keyError{ErrKeyEncoding, fmt.Sprintf("text that is not base64; want %d random bytes, raw or base64", KeySize)}
	}
	// Decode into a fixed buffer: anything longer than a key is an error
	// anyway, and nothing is left on the heap.
	if n := enc.DecodedLen(len(s)); n != KeySize {
		return Key{}, &keyError{ErrKeyLength, fmt.Sprintf("base64 of %d bytes; a root key is %d", n, KeySize)}
	}
	var b [KeySize]byte
	defer clear(b[:])
	if _, err := enc.Strict().Decode(b[:], s); err != nil {
		return Key{}, &keyError{ErrKeyEncoding, fmt.Sprintf("invalid base64 (%v)", err)}
	}
	return NewRootKey(b[:])
}

// isBase64 reports whether s holds only base64 characters of either
// alphabet (padding already trimmed).
func isBase64(s []byte) bool {
	for _, c := range s {
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9',
			c == '+', c == '/', c == '-', c == '_':
		default:
			return false
		}
	}
	return true
}

// GenerateKeyFile writes a new root key, read from rand (crypto/rand.Reader
// when nil), to a new file at path in base64 with mode 0600, for
// development setups (keygate serve --dev). It refuses to overwrite: if
// path exists, the error matches fs.ErrExist and the file is untouched.
// Production setups should prefer a key file on tmpfs, a secret manager's
// environment variable, or an unseal passphrase.
func GenerateKeyFile(path string, rand io.Reader) error {
	root, err := Generate(rand)
	if err != nil {
		return err
	}
	defer root.Destroy()
	text := make([]byte, base64.StdEncoding.EncodedLen(KeySize)+1)
	defer clear(text)
	base64.StdEncoding.Encode(text, root.k.b[:])
	text[len(text)-1] = '\n'
	return wrapWrite(keyfile.WriteNew(path, text))
}

// wrapWrite names the package in a file-writing error; errors.Is still
// matches fs.ErrExist through it.
func wrapWrite(err error) error {
	if err != nil {
		return err
	}
	return nil
}
