// Package keyfile reads and writes the key files keygate's commands take:
// PEM private and public keys, JWKs, JWKS documents and raw HMAC secrets.
// New files are created with mode 0600 and never replace an existing file,
// and reads are capped in size. The cryptography itself is package jose's
// and the standard library's.
package keyfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// MaxFileSize caps how much of a key file is read.
const MaxFileSize = 1 << 20

// ErrTooLarge is returned for a key file over MaxFileSize.
var ErrTooLarge = errors.New("key file is too large")

// Read returns the contents of the key file at path.
func Read(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%s: %w", path, ErrTooLarge)
	}
	return data, nil
}

// WriteNew writes data to a new file at path with mode 0600. It fails with
// an error matching fs.ErrExist if path exists, and never leaves a partly
// written file there: data goes to a temporary file that is then linked
// into place.
func WriteNew(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".keygate-*.tmp")
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
		return &fs.PathError{Op: "create", Path: path, Err: pe.Err}
	} else if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := writeSync(tmp, data); err != nil {
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	err = os.Link(tmp.Name(), path)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s: %w", path, fs.ErrExist)
	}
	return err
}

func writeSync(f *os.File, data []byte) error {
	err := f.Chmod(0o600)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// format is what a key file holds.
type format int

const (
	formatPEM format = iota
	formatJWK
	formatJWKS
)

func sniff(data []byte) format {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return formatPEM
	}
	var probe struct {
		Keys json.RawMessage `json:"keys"`
	}
	if json.Unmarshal(trimmed, &probe) == nil && probe.Keys != nil {
		return formatJWKS
	}
	return formatJWK
}

func isPrivatePEM(data []byte) bool {
	return bytes.Contains(data, []byte("PRIVATE KEY-----"))
}
