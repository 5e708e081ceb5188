// Package testvectors provides the third-party conformance vectors that
// keygate's tests run (Project Wycheproof, the RFC 7520 JOSE cookbook and
// RFC examples), built into the test binaries that import it so that a fresh
// clone tests everything. Each file is checked against the SHA-256 recorded
// in testdata/SHA256SUMS when it is read, and a missing or altered file fails
// the test instead of skipping it. testdata/README.md says where each file
// comes from.
package testvectors

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"strings"
	"testing"
)

// embedded holds the vectors with their licences, README and sums.
//
//go:embed testdata
var embedded embed.FS

// vectors is testdata itself, so that names read as the README writes them.
var vectors = func() fs.FS {
	sub, err := fs.Sub(embedded, "testdata")
	if err != nil {
		panic(err) // "testdata" is a valid path: cannot happen
	}
	return sub
}()

// sumsFile lists "<sha256>  <path>" for every vector file, in sha256sum's
// format so that `sha256sum -c SHA256SUMS` in testdata checks them too.
const sumsFile = "SHA256SUMS"

// Read returns the vector file at name (a slash path under testdata, such as
// "wycheproof/aes_gcm_test.json"). It fails t if the file is missing, is not
// listed in SHA256SUMS, or does not match its recorded sum.
func Read(t testing.TB, name string) []byte {
	t.Helper()
	b, err := read(vectors, name)
	if err != nil {
		t.Fatalf("test vectors: %v", err)
	}
	return b
}

// Glob returns the names of the vector files matching pattern (path.Match
// syntax, relative to testdata), sorted. It fails t if none match: a test
// whose vectors are gone must not pass by running no cases.
func Glob(t testing.TB, pattern string) []string {
	t.Helper()
	names, err := fs.Glob(vectors, pattern)
	if err != nil {
		t.Fatalf("test vectors: %s: %v", pattern, err)
	}
	if len(names) == 0 {
		t.Fatalf("test vectors: no file matches %s", pattern)
	}
	return names
}

// read reads name from fsys and checks it against fsys's SHA256SUMS.
func read(fsys fs.FS, name string) ([]byte, error) {
	sums, err := readSums(fsys)
	if err != nil {
		return nil, err
	}
	want, ok := sums[name]
	if !ok {
		return nil, fmt.Errorf("%s is not listed in testdata/%s", name, sumsFile)
	}
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, err
	}
	if got := sha256.Sum256(b); hex.EncodeToString(got[:]) != want {
		return nil, fmt.Errorf("%s: SHA-256 %x, testdata/%s records %s (a changed or corrupted copy)", name, got, sumsFile, want)
	}
	return b, nil
}

// readSums returns the SHA-256 (lowercase hex) that fsys's SHA256SUMS
// records for each file, by slash path.
func readSums(fsys fs.FS) (map[string]string, error) {
	raw, err := fs.ReadFile(fsys, sumsFile)
	if err != nil {
		return nil, err
	}
	return parseSums(raw)
}

func parseSums(raw []byte) (map[string]string, error) {
	sums := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for n := 1; sc.Scan(); n++ {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if d, err := hex.DecodeString(sum); !ok || err != nil || len(d) != sha256.Size || sum != strings.ToLower(sum) || name == "" {
			return nil, fmt.Errorf("%s line %d: want \"<sha256 hex>  <path>\"", sumsFile, n)
		}
		if _, dup := sums[name]; dup {
			return nil, fmt.Errorf("%s line %d: %s listed twice", sumsFile, n, name)
		}
		sums[name] = sum
	}
	return sums, sc.Err()
}
