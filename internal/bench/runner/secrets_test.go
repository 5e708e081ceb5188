package runner

import (
	"context"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestReferences: the secret scenarios have a reference series, named
// "reference", and no other scenario has one; a reference goes with a
// keygate the command starts.
func TestReferences(t *testing.T) {
	for _, s := range Scenarios {
		want := s.Name == "secret-read" || s.Name == "secret-write"
		if s.HasReference() != want {
			t.Errorf("%s: HasReference %v, want %v", s.Name, s.HasReference(), want)
		}
		ser, _, err := s.Reference(&Env{}, ScenarioOptions{})
		if want && (err != nil || ser.Name != "reference" || ser.Start == nil || ser.Pool == nil) {
			t.Errorf("%s: reference %q, %v", s.Name, ser.Name, err)
		}
		if !want && err == nil {
			t.Errorf("%s: a reference where there is none", s.Name)
		}
	}
	read, _ := FindScenario("secret-read")
	if _, _, err := read.Reference(&Env{}, ScenarioOptions{Target: "http://127.0.0.1:1"}); err == nil {
		t.Error("a reference with --target was accepted")
	}
}

// TestSecretRequests: the pools send the same paths, the token in
// X-Vault-Token, and the write pool a 1 KiB secret's JSON per path.
func TestSecretRequests(t *testing.T) {
	var stored []string
	reqs, err := secretRequests("http://h", "tok", true, func(path string, _ any) error {
		stored = append(stored, path)
		return nil
	})
	if err != nil || len(reqs) != secretPaths || len(stored) != secretPaths {
		t.Fatalf("%d requests, %d stored, %v", len(reqs), len(stored), err)
	}
	for i, r := range reqs {
		if r.Method != "POST" || r.URL != "http://h"+stored[i] || len(r.Body) < 1000 || len(r.Body) > 1100 {
			t.Errorf("request %d: %s %s, %d bytes", i, r.Method, r.URL, len(r.Body))
		}
	}
	reads, _ := secretRequests("http://h", "tok", false, nil)
	if reads[3].Method != "" || reads[3].URL != "http://h/v1/secret/data/bench/3" || reads[3].Header[0].Value != "tok" {
		t.Errorf("read request %+v", reads[3])
	}
}

// TestFreshSchema: a schema of its own on the server, dropped by the
// function returned; a URL that is not PostgreSQL's is refused.
func TestFreshSchema(t *testing.T) {
	if _, _, err := freshSchema(context.Background(), "mysql://x"); err == nil || !strings.Contains(err.Error(), "postgres://") {
		t.Errorf("a mysql URL: %v", err)
	}
	base := os.Getenv("DATABASE_URL")
	if base == "" {
		t.Skip("needs PostgreSQL: DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	}
	u, drop, err := freshSchema(t.Context(), base)
	if err != nil {
		t.Fatal(err)
	}
	parsed, _ := url.Parse(u)
	schema := parsed.Query().Get("search_path")
	exists := func() bool {
		conn, err := pgx.Connect(t.Context(), base)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(t.Context())
		var n int
		if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_namespace WHERE nspname = $1`, schema).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	if !strings.HasPrefix(schema, "kgbench_") || !exists() {
		t.Fatalf("schema %q not made", schema)
	}
	drop()
	if exists() {
		t.Errorf("schema %s left after drop", schema)
	}
}
