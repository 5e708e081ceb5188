package store

import (
	"errors"
	"strings"
	"testing"
)

func TestValidTenantName(t *testing.T) {
	for _, name := range []string{"a", "0", DefaultTenant, "acme-corp_2", "9-_", strings.Repeat("z", MaxTenantName)} {
		if err := ValidTenantName(name); err != nil {
			t.Errorf("ValidTenantName(%q) = %v, want nil", name, err)
		}
	}
	for _, name := range []string{"", "-a", "_a", "Acme", "ac me", "a.b", "a/b", "a:b", "acmé", "a\x00", "a\n",
		strings.Repeat("z", MaxTenantName+1)} {
		if err := ValidTenantName(name); !errors.Is(err, ErrInvalid) {
			t.Errorf("ValidTenantName(%q) = %v, want ErrInvalid", name, err)
		}
	}
}

func TestTenantOrDefault(t *testing.T) {
	for in, want := range map[string]string{"": DefaultTenant, "acme": "acme", DefaultTenant: DefaultTenant} {
		if got, err := TenantOrDefault(in); got != want || err != nil {
			t.Errorf("TenantOrDefault(%q) = %q, %v; want %q, nil", in, got, err, want)
		}
	}
	if _, err := TenantOrDefault("Acme"); !errors.Is(err, ErrInvalid) {
		t.Errorf("TenantOrDefault(Acme): %v, want ErrInvalid", err)
	}
}

func TestDeletableTenant(t *testing.T) {
	if err := DeletableTenant("acme"); err != nil {
		t.Errorf("DeletableTenant(acme) = %v", err)
	}
	for _, name := range []string{DefaultTenant, "", "Acme"} {
		if err := DeletableTenant(name); !errors.Is(err, ErrInvalid) {
			t.Errorf("DeletableTenant(%q) = %v, want ErrInvalid", name, err)
		}
	}
}
