package testvectors

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
)

// TestCopiesMatchSums reads every file SHA256SUMS lists and checks that no
// file is carried without a sum, so a corrupted, missing or stray copy fails.
func TestCopiesMatchSums(t *testing.T) {
	sums, err := readSums(vectors)
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) == 0 {
		t.Fatal("SHA256SUMS lists no files")
	}
	for name := range sums {
		if _, err := read(vectors, name); err != nil {
			t.Error(err)
		}
	}
	err = fs.WalkDir(vectors, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || p == sumsFile || p == "README.md" {
			return err
		}
		if _, ok := sums[p]; !ok {
			t.Errorf("%s has no line in SHA256SUMS", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestReadRefuses checks that read notices each way a copy can go wrong.
func TestReadRefuses(t *testing.T) {
	good := []byte(`{"numberOfTests":1}`)
	sum := sha256.Sum256(good)
	line := hex.EncodeToString(sum[:]) + "  v/a.json\n"
	for _, tc := range []struct {
		name, sums, want string
		files            map[string]string
	}{
		{"intact", line, "", map[string]string{"v/a.json": string(good)}},
		{"corrupted", line, "SHA-256", map[string]string{"v/a.json": `{"numberOfTests":2}`}},
		{"missing", line, "not exist", nil},
		{"unlisted", "", "not listed", map[string]string{"v/a.json": string(good)}},
		{"malformed sums", "abc v/a.json\n", "line 1", map[string]string{"v/a.json": string(good)}},
		{"upper-case sum", strings.ToUpper(line[:64]) + line[64:], "line 1", map[string]string{"v/a.json": string(good)}},
		{"listed twice", line + line, "twice", map[string]string{"v/a.json": string(good)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fstest.MapFS{sumsFile: {Data: []byte(tc.sums)}}
			for n, b := range tc.files {
				fsys[n] = &fstest.MapFile{Data: []byte(b)}
			}
			b, err := read(fsys, "v/a.json")
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("read: %v", err)
			case tc.want == "" && string(b) != string(good):
				t.Fatalf("read = %q, want %q", b, good)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("read error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
