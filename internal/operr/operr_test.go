package operr

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
)

func TestMessages(t *testing.T) {
	secret := errors.New("dial postgres://keygate:hunter2@db: refused")
	for _, tt := range []struct {
		name          string
		err           error
		message, full string
		cause         error // want errors.Is(err, cause)
	}{
		{"new", New("keygate is sealed"), "keygate is sealed", "keygate is sealed", nil},
		{"errorf without %w", Errorf("listen %q: %v", ":80", fs.ErrPermission),
			`listen ":80": permission denied`, `listen ":80": permission denied`, nil},
		{"errorf shows its %w", Errorf("config %s: %w", "a.yaml", fs.ErrNotExist),
			"config a.yaml: file does not exist", "config a.yaml: file does not exist", fs.ErrNotExist},
		{"wrap hides its cause", Wrap(secret, "cannot reach the store"),
			"cannot reach the store", "cannot reach the store: " + secret.Error(), secret},
		{"wrapf", Wrapf(secret, "cannot reach the store (%s)", "db:5432"),
			"cannot reach the store (db:5432)", "cannot reach the store (db:5432): " + secret.Error(), secret},
		{"deeper in a chain", fmt.Errorf("start: %w", Wrap(secret, "cannot reach the store")),
			"cannot reach the store", "start: cannot reach the store: " + secret.Error(), secret},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, ok := As(tt.err)
			if !ok {
				t.Fatalf("As(%v): no *Error", tt.err)
			}
			if e.Message() != tt.message {
				t.Errorf("Message() = %q, want %q", e.Message(), tt.message)
			}
			if tt.err.Error() != tt.full {
				t.Errorf("Error() = %q, want %q", tt.err.Error(), tt.full)
			}
			if strings.Contains(e.Message(), "hunter2") {
				t.Errorf("Message() %q shows the cause's secret", e.Message())
			}
			if tt.cause != nil && !errors.Is(tt.err, tt.cause) {
				t.Errorf("errors.Is(%v, %v) = false", tt.err, tt.cause)
			}
		})
	}
}

func TestErrorfKeepsEveryCause(t *testing.T) {
	a, b := errors.New("a"), errors.New("b")
	err := Errorf("both: %w, %w", a, b)
	if !errors.Is(err, a) || !errors.Is(err, b) {
		t.Errorf("errors.Is lost a cause of %v", err)
	}
}

func TestNil(t *testing.T) {
	if err := Wrap(nil, "x"); err != nil {
		t.Errorf("Wrap(nil) = %v", err)
	}
	if err := Wrapf(nil, "x %d", 1); err != nil {
		t.Errorf("Wrapf(nil) = %v", err)
	}
	if _, ok := As(errors.New("plain")); ok {
		t.Error("As found an *Error in a plain error")
	}
	if _, ok := As(nil); ok {
		t.Error("As found an *Error in nil")
	}
}
