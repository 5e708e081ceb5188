package keystore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/transit"
)

// rotationClaim is how long a node's claim on a key's automatic rotation
// stands: other nodes leave the key alone for that long, and the claiming
// node gives up generating the version when it has not finished by then.
// Generating the most expensive key, rsa-4096, takes about a second of a
// core; a claim left by a node that stopped lapses before the next check
// (RotateCheckEvery, 10 minutes by default).
const rotationClaim = 5 * time.Minute

// tick is the service's share of the node's schedule: every
// RotateCheckEvery, a scan for the keys whose auto_rotate_period has passed
// starts on a goroutine of its own, unless the last one still runs, so that
// generating keys never holds up the node's schedule.
func (s *Service) tick(context.Context) {
	now := s.now()
	s.rmu.Lock()
	defer s.rmu.Unlock()
	if now.Before(s.nextCheck) || s.scanning || s.keys.Sealed() {
		return
	}
	s.fmu.Lock()
	closed := s.closed
	if !closed {
		s.bg.Add(1) // under fmu: never after Close has begun to wait
	}
	s.fmu.Unlock()
	if closed {
		return
	}
	s.nextCheck, s.scanning = now.Add(s.opts.RotateCheckEvery), true
	go s.scan()
}

// scan is tick's goroutine: RotateDue, until Close.
func (s *Service) scan() {
	defer s.bg.Done()
	if _, err := s.RotateDue(s.ctx); err != nil && s.ctx.Err() == nil {
		s.log.Warn("automatic transit key rotation", "err", err)
	}
	s.rmu.Lock()
	s.scanning = false
	s.rmu.Unlock()
}

// RotateDue rotates every key of every tenant whose auto_rotate_period has
// passed since its latest version was made, and returns how many it
// rotated. Every node of a fleet runs it. Before generating a version, a
// node claims the key's rotation in the store (a conditional write of the
// key's row, which one node of those trying at once wins); the others, and
// any node that reads the claim within rotationClaim, leave the key alone.
// A key whose configuration changed within rotationClaim looks claimed
// too, and waits that long. The version is generated in the key's
// tenant's turn for the engine's workers (as RotationPrincipal). It reads
// the configuration rows, and opens a key only when it rotates it.
func (s *Service) RotateDue(ctx context.Context) (int, error) {
	tenants, err := s.st.ListTenants(ctx)
	if err != nil {
		return 0, err
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
			ok, err := s.rotateDue(ctx, t.Name, name)
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

// rotateDue claims and rotates one key if it is due and nobody has claimed
// it within rotationClaim.
func (s *Service) rotateDue(ctx context.Context, tenant, name string) (bool, error) {
	tk, rows, err := s.st.GetTransitKey(ctx, tenant, name)
	if err != nil || len(rows) == 0 {
		return false, nil // deleted meanwhile, or the store failed: the next check sees it
	}
	cfg, err := transit.UnmarshalConfig(tk.Config)
	latest := rows[len(rows)-1].CreatedAt
	now := s.now()
	switch {
	case err != nil || cfg.AutoRotatePeriod <= 0 || cfg.Imported && !cfg.AllowImportedKeyRotation ||
		!now.After(latest.Add(cfg.AutoRotatePeriod)):
		return false, nil
	case tk.UpdatedAt.After(latest) && now.Sub(tk.UpdatedAt) < rotationClaim:
		return false, nil // claimed, or just configured
	}
	// The claim: the row as read, stamped now, if nobody changed it since.
	tk.UpdatedAt = s.stamp()
	switch err := s.st.UpdateTransitKey(ctx, tk); {
	case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrNotFound):
		return false, nil // another node claimed or changed it first
	case err != nil:
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, rotationClaim)
	defer cancel()
	return s.rotateIfDue(ctx, tenant, name, tk.Latest)
}
