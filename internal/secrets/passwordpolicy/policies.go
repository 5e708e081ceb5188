package passwordpolicy

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/keygate/keygate/internal/secrets"
)

// Store is where Policies keeps a tenant's policies: the secret store, each
// policy a record at a prefix plus its name.
type Store interface {
	Read(ctx context.Context, tenant, path string, version int) (*secrets.Secret, error)
	Write(ctx context.Context, tenant, path string, data json.RawMessage, cas *int) (secrets.Written, error)
	DeleteMetadata(ctx context.Context, tenant, path string) error
	List(ctx context.Context, tenant, prefix string) ([]string, error)
}

// ErrNotFound: no policy of that name.
var ErrNotFound = errors.New("no password policy found")

// Policies are a tenant's named password policies (Vault's
// sys/policies/password/:name).
type Policies struct {
	store  Store
	prefix string
}

// NewPolicies returns the policies kept in store under prefix (a folder).
func NewPolicies(store Store, prefix string) *Policies {
	return &Policies{store: store, prefix: prefix}
}

type record struct {
	Policy string `json:"policy"`
}

// Put stores doc as the policy name, once it parses; it replaces one of
// that name.
func (ps *Policies) Put(ctx context.Context, tenant, name, doc string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	if _, err := Parse(doc); err != nil {
		return err
	}
	b, _ := json.Marshal(record{Policy: doc})
	_, err := ps.store.Write(ctx, tenant, ps.prefix+name, b, nil)
	return err
}

// Get returns the policy name's document, as it was put.
func (ps *Policies) Get(ctx context.Context, tenant, name string) (string, error) {
	if err := ValidName(name); err != nil {
		return "", err
	}
	s, err := ps.store.Read(ctx, tenant, ps.prefix+name, 0)
	if errors.Is(err, secrets.ErrNotFound) {
		return "", ErrNotFound
	} else if err != nil {
		return "", err
	}
	var r record
	if err := json.Unmarshal(s.Data, &r); err != nil {
		return "", fmt.Errorf("stored password policy %s: %w", name, err)
	}
	return r.Policy, nil
}

// Delete deletes the policy name; a missing one is no error.
func (ps *Policies) Delete(ctx context.Context, tenant, name string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	return ps.store.DeleteMetadata(ctx, tenant, ps.prefix+name)
}

// List returns the tenant's policy names, sorted; none is not an error.
func (ps *Policies) List(ctx context.Context, tenant string) ([]string, error) {
	names, err := ps.store.List(ctx, tenant, ps.prefix)
	if errors.Is(err, secrets.ErrNotFound) {
		return nil, nil
	}
	return names, err
}

// Generate makes a password from the policy name.
func (ps *Policies) Generate(ctx context.Context, tenant, name string) (string, error) {
	doc, err := ps.Get(ctx, tenant, name)
	if err != nil {
		return "", err
	}
	p, err := Parse(doc)
	if err != nil {
		return "", fmt.Errorf("stored password policy %s: %w", name, err)
	}
	return p.Generate(rand.Reader)
}

var namePattern = regexp.MustCompile(`^[A-Za-z0-9_]([A-Za-z0-9_.-]{0,126}[A-Za-z0-9_])?$`)

// ValidName checks a policy's name: 1 to 128 letters, digits, '_', '-'
// and '.', beginning and ending with a letter, a digit or '_'.
func ValidName(name string) error {
	if !namePattern.MatchString(name) {
		return fmt.Errorf("%w: policy name %q: 1 to 128 letters, digits, '_', '-' and '.', not beginning or ending with '-' or '.'", ErrInvalid, name)
	}
	return nil
}
