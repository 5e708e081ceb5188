package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/testnet"
)

// TestReadURLFiles: the database and Redis URLs can come from files, so
// that no password needs to be on the command line; a file that does not
// hold a URL of the right kind is refused without echoing its content.
func TestReadURLFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("db.url", "postgres://u:pw@db.example/keygate\n")
	bad := write("bad.url", "mysql://u:SECRET-IN-FILE@db\n")
	n := &Node{ts: config.TokenService{DatabaseURLFile: good}}
	if err := n.readURLFiles(); err != nil || n.ts.DatabaseURL != "postgres://u:pw@db.example/keygate" {
		t.Fatalf("readURLFiles: %v, %q", err, n.ts.DatabaseURL)
	}
	n = &Node{ts: config.TokenService{DatabaseURLFile: bad}}
	err := n.readURLFiles()
	if err == nil || strings.Contains(err.Error(), "SECRET") || !strings.Contains(err.Error(), "bad.url") {
		t.Errorf("a file without a postgres URL: %v", err)
	}
}

// TestDatabaseTLSWarning: a database URL that lets the connection to a
// PostgreSQL off this host be read or changed is warned about; loopback,
// Unix sockets and verified TLS are not.
func TestDatabaseTLSWarning(t *testing.T) {
	dir := t.TempDir()
	ca := testnet.NewCA(t, "db").WriteCA(t, dir, "ca.pem")
	t.Setenv("PGSSLMODE", "")
	tests := []struct{ url, want string }{
		{"postgres://u@db.example:5432/k", "can be plain text"},
		{"postgres://u@db.example:5432/k?sslmode=prefer", "can be plain text"},
		{"postgres://u@db.example:5432/k?sslmode=disable", "can be plain text"},
		{"postgres://u@db.example:5432/k?sslmode=allow", "can be plain text"},
		{"postgres://u@db.example:5432/k?sslmode=require", "does not verify"},
		{"postgres://u@10.0.0.5:5432/k?sslmode=require", "does not verify"},
		{"postgres://u@db.example:5432/k?sslmode=require&sslrootcert=" + ca, ""},
		{"postgres://u@db.example:5432/k?sslmode=verify-ca&sslrootcert=" + ca, ""},
		{"postgres://u@db.example:5432/k?sslmode=verify-full&sslrootcert=" + ca, ""},
		{"postgres://u@127.0.0.1:5432/k?sslmode=disable", ""},
		{"postgres://u@[::1]:5432/k?sslmode=disable", ""},
		{"postgres://u@localhost:5432/k", ""},
		{"postgres://u@localhost,db.example:5432/k?sslmode=disable", "db.example"},
		{"postgres:///k?host=/var/run/postgresql&sslmode=disable", ""},
	}
	for _, tt := range tests {
		got := databaseTLSWarning(tt.url)
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("%s: %q, want %q", tt.url, got, tt.want)
		}
	}
	t.Setenv("PGSSLMODE", "verify-full")
	t.Setenv("PGSSLROOTCERT", ca)
	if got := databaseTLSWarning("postgres://u@db.example:5432/k"); got != "" {
		t.Errorf("PGSSLMODE=verify-full: %q", got)
	}
}
