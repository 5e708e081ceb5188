package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/keygate/keygate/internal/store"
)

// TestWrap: driver errors map to the store's sentinels, and only failures
// to reach PostgreSQL count as store.ErrUnavailable.
func TestWrap(t *testing.T) {
	live := context.Background()
	canceled, cancel := context.WithCancel(live)
	cancel()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	tests := []struct {
		name        string
		ctx         context.Context
		err         error
		want        error
		unavailable bool
	}{
		{"no rows", live, pgx.ErrNoRows, store.ErrNotFound, false},
		{"unique violation", live, &pgconn.PgError{Code: "23505"}, store.ErrConflict, false},
		{"other SQL error", live, &pgconn.PgError{Code: "42P01"}, nil, false},
		{"connection refused", live, refused, nil, true},
		{"connection broken", live, io.ErrUnexpectedEOF, nil, true},
		{"deadline", live, context.DeadlineExceeded, context.DeadlineExceeded, true},
		{"caller gone", canceled, refused, context.Canceled, false},
		{"plain error", live, errors.New("something else"), nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := wrap(tt.ctx, "op", tt.err)
			if tt.want != nil && !errors.Is(got, tt.want) {
				t.Errorf("wrap(%v) = %v, want it to match %v", tt.err, got, tt.want)
			}
			if errors.Is(got, store.ErrUnavailable) != tt.unavailable {
				t.Errorf("wrap(%v) = %v: unavailable %v, want %v", tt.err, got, !tt.unavailable, tt.unavailable)
			}
		})
	}
}
