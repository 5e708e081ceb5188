package rootkey

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func writeFile(t *testing.T, data []byte, mode fs.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "root.key")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // past the umask
		t.Fatal(err)
	}
	return path
}

func TestGenerateKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "root.key")
	if err := GenerateKeyFile(path, nil); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %04o, want 0600", fi.Mode().Perm())
	}
	data, _ := os.ReadFile(path)
	if len(data) != 45 || data[44] != '\n' {
		t.Errorf("file holds %q, want 44 base64 characters and a newline", data)
	}
	root, err := LoadKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// It refuses to overwrite, and leaves the file alone.
	if err := GenerateKeyFile(path, nil); !errors.Is(err, fs.ErrExist) {
		t.Errorf("second GenerateKeyFile: %v, want fs.ErrExist", err)
	}
	if again, err := LoadKeyFile(path); err != nil || !again.Equal(root) {
		t.Errorf("the existing key file changed: %v", err)
	}
	// A keyring from the file decrypts what a keyring from the key made.
	k, err := New(Options{KeyFile: path})
	if err != nil {
		t.Fatal(err)
	}
	ct := mustEncrypt(t, newRing(t, root), []byte("x"), nil)
	if _, err := k.Decrypt(ct, nil); err != nil {
		t.Fatal(err)
	}
	// A failing random source leaves no file behind.
	bad := filepath.Join(t.TempDir(), "bad.key")
	if err := GenerateKeyFile(bad, failReader{errors.New("no entropy")}); err == nil {
		t.Error("GenerateKeyFile with a failing random source succeeded")
	}
	if _, err := os.Stat(bad); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a failed GenerateKeyFile left a file: %v", err)
	}
}

func TestLoadKeyFileFormats(t *testing.T) {
	raw := make([]byte, KeySize)
	rand.Read(raw)
	raw[0] = 0 // binary for sure
	want, _ := NewRootKey(raw)
	for name, data := range map[string]string{
		"raw":                 string(raw),
		"base64":              base64.StdEncoding.EncodeToString(raw),
		"base64 newline":      base64.StdEncoding.EncodeToString(raw) + "\n",
		"base64 crlf":         base64.StdEncoding.EncodeToString(raw) + "\r\n",
		"base64 unpadded":     base64.RawStdEncoding.EncodeToString(raw),
		"base64url":           base64.URLEncoding.EncodeToString(raw) + "\n",
		"base64url unpadded":  base64.RawURLEncoding.EncodeToString(raw),
		"base64 indented":     "  " + base64.StdEncoding.EncodeToString(raw) + "  \n\n",
		"openssl rand output": base64.StdEncoding.EncodeToString(raw) + "\n",
	} {
		got, err := LoadKeyFile(writeFile(t, []byte(data), 0o600))
		if err != nil {
			t.Errorf("%s: %v", name, err)
		} else if !got.Equal(want) {
			t.Errorf("%s: a different key", name)
		}
	}
	// 0400 and 0700 (owner only) are fine.
	for _, mode := range []fs.FileMode{0o400, 0o700} {
		if _, err := LoadKeyFile(writeFile(t, raw, mode)); err != nil {
			t.Errorf("mode %04o: %v", mode, err)
		}
	}
}

func TestLoadKeyFileRefuses(t *testing.T) {
	raw := make([]byte, 64)
	rand.Read(raw)
	raw[0], raw[40] = 0, 0
	b64 := base64.StdEncoding.EncodeToString
	for name, data := range map[string][]byte{
		"empty":                {},
		"whitespace":           []byte(" \n"),
		"raw 31 bytes":         raw[:31],
		"raw 33 bytes":         raw[:33],
		"raw 32 and newline":   append(bytes.Clone(raw[:32]), '\n'),
		"raw 64 bytes":         raw,
		"base64 of 31 bytes":   []byte(b64(raw[:31])),
		"base64 of 33 bytes":   []byte(b64(raw[:33])),
		"base64 of 16 bytes":   []byte(b64(raw[:16]) + "\n"),
		"hex":                  []byte(hex.EncodeToString(raw[:32])),
		"32-character text":    []byte("correct horse battery staple 123"),
		"passphrase":           []byte("hunter2\n"),
		"over the size limit":  bytes.Repeat([]byte("A"), 2000),
		"base64 garbage":       []byte("!!!!" + b64(raw[:32])[4:]),
		"base64 trailing bits": []byte(b64(raw[:32])[:42] + "B="),
	} {
		_, err := LoadKeyFile(writeFile(t, data, 0o600))
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if strings.Contains(err.Error(), hex.EncodeToString(raw[1:5])) {
			t.Errorf("%s: the error shows key material: %v", name, err)
		}
		t.Logf("%s: %v", name, err)
	}
	if _, err := LoadKeyFile(writeFile(t, raw[:31], 0o600)); !errors.Is(err, ErrKeyLength) {
		t.Errorf("31 raw bytes: %v, want ErrKeyLength", err)
	}
	if _, err := LoadKeyFile(writeFile(t, []byte(b64(raw[:33])), 0o600)); !errors.Is(err, ErrKeyLength) {
		t.Errorf("base64 of 33 bytes: %v, want ErrKeyLength", err)
	}
	if _, err := LoadKeyFile(writeFile(t, []byte("correct horse battery staple 123"), 0o600)); !errors.Is(err, ErrKeyEncoding) {
		t.Errorf("32 characters of text: %v, want ErrKeyEncoding", err)
	}
	if _, err := LoadKeyFile(writeFile(t, []byte(hex.EncodeToString(raw[:32])), 0o600)); !errors.Is(err, ErrKeyLength) {
		t.Errorf("hex: %v, want ErrKeyLength", err)
	}

	if _, err := LoadKeyFile(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want fs.ErrNotExist", err)
	}
	if _, err := LoadKeyFile(t.TempDir()); err == nil {
		t.Error("a directory was accepted")
	}
}

func TestLoadKeyFilePermissions(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix permissions")
	}
	raw := make([]byte, KeySize)
	rand.Read(raw)
	text := []byte(base64.StdEncoding.EncodeToString(raw))
	for _, mode := range []fs.FileMode{0o640, 0o604, 0o644, 0o660, 0o666, 0o602, 0o620, 0o610, 0o601, 0o444} {
		path := writeFile(t, text, mode)
		_, err := LoadKeyFile(path)
		var pe *PermissionError
		if !errors.As(err, &pe) || !errors.Is(err, ErrInsecureKeyFile) || pe.Mode.Perm() != mode || pe.Path != path {
			t.Errorf("mode %04o: %v, want a *PermissionError", mode, err)
			continue
		}
		if !strings.Contains(err.Error(), "chmod 600") {
			t.Errorf("mode %04o: the error does not say how to fix it: %v", mode, err)
		}
		if _, err := New(Options{KeyFile: path}); !errors.Is(err, ErrInsecureKeyFile) {
			t.Errorf("New with a mode %04o key file: %v", mode, err)
		}
	}
}

func TestKeyEnv(t *testing.T) {
	root := newKey(t)
	raw := make([]byte, KeySize)
	rand.Read(raw)
	env := map[string]string{
		"SHORT":      base64.StdEncoding.EncodeToString(raw[:16]),
		"NOT_BASE64": "not base64 at all!",
		"EMPTY":      "",
	}
	lookup := func(name string) (string, bool) { v, ok := env[name]; return v, ok }

	// The text of a generated key file works as the variable's value.
	path := filepath.Join(t.TempDir(), "k")
	if err := GenerateKeyFile(path, nil); err != nil {
		t.Fatal(err)
	}
	text, _ := os.ReadFile(path)
	fileKey, _ := LoadKeyFile(path)
	env["KEYGATE_ROOT_KEY"] = string(text)
	k, err := New(Options{KeyEnv: "KEYGATE_ROOT_KEY", LookupEnv: lookup})
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := k.Current(); id != fileKey.ID() {
		t.Errorf("environment key %v, want %v", id, fileKey.ID())
	}
	for name, want := range map[string]error{
		"MISSING":    ErrNoKey,
		"EMPTY":      ErrNoKey,
		"SHORT":      ErrKeyLength,
		"NOT_BASE64": ErrKeyEncoding,
	} {
		_, err := New(Options{KeyEnv: name, LookupEnv: lookup})
		if err == nil || (want != nil && !errors.Is(err, want)) {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
		if err != nil && !strings.Contains(err.Error(), name) {
			t.Errorf("%s: the error does not name the variable: %v", name, err)
		}
	}
	// The real environment is the default.
	t.Setenv("KEYGATE_TEST_ROOT_KEY", string(text))
	if _, err := New(Options{KeyEnv: "KEYGATE_TEST_ROOT_KEY"}); err != nil {
		t.Errorf("os environment: %v", err)
	}
	// One source at a time.
	if _, err := New(Options{KeyEnv: "KEYGATE_ROOT_KEY", KeyFile: path, LookupEnv: lookup}); err == nil {
		t.Error("two key sources accepted")
	}
	if _, err := New(Options{Root: root, KeyFile: path}); err == nil {
		t.Error("two key sources accepted")
	}
}
