package passwordpolicy

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/keygate/keygate/internal/secrets"
)

// memStore is the part of the secret store Policies uses, in memory.
type memStore struct {
	mu   sync.Mutex
	data map[string]json.RawMessage
}

func (m *memStore) Read(_ context.Context, tenant, path string, _ int) (*secrets.Secret, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.data[tenant+"|"+path]
	if !ok {
		return nil, secrets.ErrNotFound
	}
	return &secrets.Secret{Data: d}, nil
}

func (m *memStore) Write(_ context.Context, tenant, path string, data json.RawMessage, _ *int) (secrets.Written, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.data[tenant+"|"+path] = data
	return secrets.Written{VersionMeta: secrets.VersionMeta{Version: 1}}, nil
}

func (m *memStore) DeleteMetadata(_ context.Context, tenant, path string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.data, tenant+"|"+path)
	return nil
}

func (m *memStore) List(_ context.Context, tenant, prefix string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for k := range m.data {
		if rest, ok := strings.CutPrefix(k, tenant+"|"+prefix); ok {
			out = append(out, rest)
		}
	}
	if len(out) == 0 {
		return nil, secrets.ErrNotFound
	}
	slices.Sort(out)
	return out, nil
}

func TestPolicies(t *testing.T) {
	ctx := context.Background()
	ps := NewPolicies(&memStore{data: map[string]json.RawMessage{}}, "@password-policy/")
	if err := ps.Put(ctx, "acme", "strong", fourRules); err != nil {
		t.Fatal(err)
	}
	if doc, err := ps.Get(ctx, "acme", "strong"); err != nil || doc != fourRules {
		t.Errorf("get %q, %v", doc, err)
	}
	pw, err := ps.Generate(ctx, "acme", "strong")
	if err != nil || utf8.RuneCountInString(pw) != 20 {
		t.Errorf("generate %q, %v", pw, err)
	}
	for _, c := range []struct {
		name   string
		tenant string
		policy string
		err    error
	}{
		{"another tenant", "other", "strong", ErrNotFound},
		{"missing", "acme", "weak", ErrNotFound},
		{"bad name", "acme", "a/b", ErrInvalid},
	} {
		if _, err := ps.Generate(ctx, c.tenant, c.policy); !errors.Is(err, c.err) {
			t.Errorf("%s: %v, want %v", c.name, err, c.err)
		}
	}
	if err := ps.Put(ctx, "acme", "bad", "length = 2"); !errors.Is(err, ErrInvalid) {
		t.Errorf("a bad policy stored: %v", err)
	}
	if names, err := ps.List(ctx, "acme"); err != nil || !slices.Equal(names, []string{"strong"}) {
		t.Errorf("list %v, %v", names, err)
	}
	if err := ps.Delete(ctx, "acme", "strong"); err != nil {
		t.Fatal(err)
	}
	if names, err := ps.List(ctx, "acme"); err != nil || len(names) != 0 {
		t.Errorf("list after delete %v, %v", names, err)
	}
	for _, n := range []string{"", "-a", "a.", "a b", strings.Repeat("a", 129)} {
		if ValidName(n) == nil {
			t.Errorf("name %q accepted", n)
		}
	}
	for _, n := range []string{"a", "db-root.v2", "_", strings.Repeat("a", 128)} {
		if err := ValidName(n); err != nil {
			t.Errorf("name %q: %v", n, err)
		}
	}
}
