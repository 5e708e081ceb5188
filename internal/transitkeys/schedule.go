package transitkeys

import (
	"context"
	"errors"
	"fmt"

	"github.com/keygate/keygate/internal/transit"
)

// tick is the service's share of the node's schedule: every
// RotateCheckEvery, the keys whose auto_rotate_period has passed are
// rotated.
func (s *Service) tick(ctx context.Context) {
	now := s.now()
	s.rmu.Lock()
	due := !now.Before(s.nextCheck)
	if due {
		s.nextCheck = now.Add(s.opts.RotateCheckEvery)
	}
	s.rmu.Unlock()
	if !due || s.n.Sealed() {
		return
	}
	if _, err := s.RotateDue(ctx); err != nil && ctx.Err() == nil {
		s.log.Warn("automatic transit key rotation", "err", err)
	}
}

// RotateDue rotates every key of every tenant whose auto_rotate_period has
// passed since its latest version was made, and returns how many it
// rotated. Every node of a fleet runs it; the store lets one rotation of
// each key through, and the others find the key no longer due. It reads
// the configuration rows, and opens a key only when it is due.
func (s *Service) RotateDue(ctx context.Context) (int, error) {
	tenants, err := s.st.ListTenants(ctx)
	if err != nil {
		return 0, fmt.Errorf("transitkeys: %w", err)
	}
	rotated := 0
	var errs []error
	for _, t := range tenants {
		names, err := s.List(ctx, t.Name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, name := range names {
			tk, rows, err := s.st.GetTransitKey(ctx, t.Name, name)
			if err != nil || len(rows) == 0 {
				continue // deleted meanwhile, or the store failed: the next check sees it
			}
			cfg, err := transit.UnmarshalConfig(tk.Config)
			if err != nil || cfg.AutoRotatePeriod <= 0 || cfg.Imported && !cfg.AllowImportedKeyRotation ||
				!s.now().After(rows[len(rows)-1].CreatedAt.Add(cfg.AutoRotatePeriod)) {
				continue
			}
			ok, err := s.rotateIfDue(ctx, t.Name, name)
			switch {
			case err != nil && !errors.Is(err, ErrNotFound):
				errs = append(errs, fmt.Errorf("%s/%s: %w", t.Name, name, err))
			case ok:
				rotated++
				s.log.Info("transit key rotated automatically", "tenant", t.Name, "key", name)
			}
		}
	}
	return rotated, errors.Join(errs...)
}
