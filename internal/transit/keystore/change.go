package keystore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/keygate/keygate/internal/rootkey/tenantkey"
	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/transit"
)

// Changes. Each reads the key (cached, or from the store), computes the
// change with the engine and stores it conditionally; when another node
// changed the key first the store says store.ErrConflict, and the change is
// computed again on the key read afresh, up to Options.Attempts times.

// stamp is a time as the stores keep it (microseconds), so that a row
// read back equals what was written.
func (s *Service) stamp() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// Create makes a key with its first version, or returns the key the tenant
// has under that name already (created false), as Vault's key write does.
// An asymmetric key is generated in the tenant's turn for the engine's
// workers, as o.Caller's.
func (s *Service) Create(ctx context.Context, tenant, name string, o transit.CreateOptions) (k *transit.Key, created bool, err error) {
	if !ValidName(name) {
		return nil, false, ErrInvalidName
	}
	if k, err := s.Get(ctx, tenant, name); err == nil || !errors.Is(err, ErrNotFound) {
		return k, false, err
	}
	if _, err := s.sealingKey(ctx, tenant); err != nil { // before generating: an unknown tenant or a sealed node
		return nil, false, err
	}
	mark := s.cache.mark(keyID{tenant, name})
	o.Caller.Tenant = tenant
	k, err = s.eng.CreateKey(ctx, name, o)
	if err != nil {
		return nil, false, err
	}
	e, err := s.storeNew(ctx, tenant, k)
	if errors.Is(err, store.ErrConflict) { // made meanwhile, here or at another node
		k, err := s.Get(ctx, tenant, name)
		return k, false, err
	} else if err != nil {
		return nil, false, err
	}
	s.cache.put(keyID{tenant, name}, e, mark)
	s.announce(ctx, keyID{tenant, name}, e)
	return e.key, true, nil
}

// storeNew stores a new key k (its first version) and returns its entry.
// The version is sealed under the tenant's data key as its row holds it
// now, after the key was made: generating a key can take seconds, during
// which the data key may have been rotated and its older version retired.
func (s *Service) storeNew(ctx context.Context, tenant string, k *transit.Key) (*entry, error) {
	dk, err := s.sealingKey(ctx, tenant)
	if err != nil {
		return nil, err
	}
	cfg, err := transit.MarshalConfig(k.Config())
	if err != nil {
		return nil, err
	}
	vs := k.Versions()
	first := vs[len(vs)-1]
	sealed, err := sealVersion(dk, k.Name(), first)
	if err != nil {
		return nil, err
	}
	now := s.stamp()
	err = s.st.CreateTransitKey(ctx, store.TransitKey{Tenant: tenant, Name: k.Name(), Type: k.Type().String(), Config: cfg,
		CreatedAt: now, UpdatedAt: now},
		store.TransitKeyVersion{Tenant: tenant, Name: k.Name(), Version: first.Number(), Sealed: sealed, CreatedAt: first.CreationTime()})
	if errors.Is(err, store.ErrNotFound) { // the tenant is gone
		return nil, ErrNotFound
	} else if err != nil {
		return nil, err
	}
	return &entry{key: k, revision: 1, created: now, loaded: s.now(), sealed: map[int][]byte{first.Number(): sealed}}, nil
}

// Import makes a key from Vault's BYOK import (or a public key), Vault's
// keys/:name/import. A name the tenant has already is ErrExists.
func (s *Service) Import(ctx context.Context, tenant, name string, o transit.ImportOptions) (*transit.Key, error) {
	if !ValidName(name) {
		return nil, ErrInvalidName
	}
	if _, err := s.Get(ctx, tenant, name); err == nil {
		return nil, ErrExists
	} else if !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	if _, err := s.sealingKey(ctx, tenant); err != nil { // before unwrapping: an unknown tenant or a sealed node
		return nil, err
	}
	mark := s.cache.mark(keyID{tenant, name})
	w, err := s.WrappingKey(ctx, tenant)
	if err != nil {
		return nil, err
	}
	k, err := s.eng.ImportKey(ctx, w, name, o)
	if err != nil {
		return nil, err
	}
	e, err := s.storeNew(ctx, tenant, k)
	if errors.Is(err, store.ErrConflict) {
		return nil, ErrExists
	} else if err != nil {
		return nil, err
	}
	s.cache.put(keyID{tenant, name}, e, mark)
	s.announce(ctx, keyID{tenant, name}, e)
	return k, nil
}

// change applies f to the key and stores what it returns. f gets the key as
// last read and returns the new entry, or nil for no change; a
// store.ErrConflict from f makes change read the key again and call f
// again.
func (s *Service) change(ctx context.Context, tenant, name string, f func(dk *tenantkey.Key, e *entry) (*entry, error)) (*entry, error) {
	id := keyID{tenant, name}
	if !ValidName(name) {
		return nil, ErrNotFound
	}
	dk, err := s.sealingKey(ctx, tenant)
	if err != nil {
		return nil, err
	}
	mark := s.cache.mark(id)
	e := s.cache.get(id)
	if e == nil {
		if e, err = s.fetch(ctx, id, nil); err != nil {
			return nil, err
		}
	}
	for attempt := 1; ; attempt++ {
		ne, err := f(dk, e)
		switch {
		case errors.Is(err, store.ErrConflict) && attempt < s.opts.Attempts:
			if e, err = s.fetch(ctx, id, e); err != nil {
				return nil, err
			}
			continue
		case errors.Is(err, store.ErrNotFound):
			s.cache.drop(id)
			return nil, ErrNotFound
		case err != nil:
			return nil, err
		case ne == nil:
			return e, nil
		}
		s.cache.put(id, ne, mark)
		s.announce(ctx, id, ne)
		return ne, nil
	}
}

// with is e changed to k at revision rev, with the rows of added versions.
func (e *entry) with(k *transit.Key, rev int64, now time.Time, added map[int][]byte) *entry {
	sealed := maps.Clone(e.sealed)
	maps.Copy(sealed, added)
	return &entry{key: k, revision: rev, created: e.created, loaded: now, sealed: sealed}
}

// Rotate adds a new latest version, generated in the tenant's turn for the
// engine's workers as principal's (the token's client or user).
func (s *Service) Rotate(ctx context.Context, tenant, name, principal string) (*transit.Key, error) {
	return s.newVersion(ctx, tenant, name, func(k *transit.Key) (*transit.Key, error) {
		return s.eng.Rotate(ctx, k, transit.Caller{Tenant: tenant, Principal: principal})
	})
}

// newVersion stores the version make adds to the key as its new latest.
func (s *Service) newVersion(ctx context.Context, tenant, name string, make func(*transit.Key) (*transit.Key, error)) (*transit.Key, error) {
	e, err := s.change(ctx, tenant, name, func(dk *tenantkey.Key, e *entry) (*entry, error) {
		nk, err := make(e.key)
		if err != nil {
			return nil, err
		}
		return s.addVersion(ctx, tenant, e, nk)
	})
	if err != nil {
		return nil, err
	}
	return e.key, nil
}

// rotateIfDue rotates the key, whose latest version the store says is
// latest, if its auto_rotate_period has passed; a snapshot older than the
// store's is read again first, so that no version is generated for a key
// rotated meanwhile.
func (s *Service) rotateIfDue(ctx context.Context, tenant, name string, latest int) (bool, error) {
	rotated := false
	_, err := s.change(ctx, tenant, name, func(dk *tenantkey.Key, e *entry) (*entry, error) {
		switch {
		case e.key.LatestVersion() < latest:
			return nil, store.ErrConflict // read it again
		case e.key.LatestVersion() > latest || !e.key.RotationDue(s.now()):
			return nil, nil
		}
		nk, err := s.eng.Rotate(ctx, e.key, transit.Caller{Tenant: tenant, Principal: RotationPrincipal})
		if err != nil {
			return nil, err
		}
		ne, err := s.addVersion(ctx, tenant, e, nk)
		rotated = err == nil
		return ne, err
	})
	return rotated, err
}

// ImportVersion adds an imported version as the new latest version of an
// imported key.
func (s *Service) ImportVersion(ctx context.Context, tenant, name string, o transit.ImportVersionOptions) (*transit.Key, error) {
	w, err := s.WrappingKey(ctx, tenant)
	if err != nil {
		return nil, err
	}
	return s.newVersion(ctx, tenant, name, func(k *transit.Key) (*transit.Key, error) {
		return s.eng.ImportVersion(ctx, k, w, o)
	})
}

// addVersion stores nk's latest version, which e does not have, after e's
// latest; a rotation that cleared the key's imported mark stores the
// configuration too.
//
// Like storeNew, it seals under the data key read after the version was
// made.
func (s *Service) addVersion(ctx context.Context, tenant string, e *entry, nk *transit.Key) (*entry, error) {
	dk, err := s.sealingKey(ctx, tenant)
	if err != nil {
		return nil, err
	}
	v, _ := nk.Version(nk.LatestVersion())
	sealed, err := sealVersion(dk, nk.Name(), v)
	if err != nil {
		return nil, err
	}
	if err := s.st.AddTransitKeyVersion(ctx, store.TransitKeyVersion{Tenant: tenant, Name: nk.Name(), Version: v.Number(),
		Sealed: sealed, CreatedAt: v.CreationTime()}); err != nil {
		return nil, err
	}
	ne := e.with(nk, e.revision+1, s.now(), map[int][]byte{v.Number(): sealed})
	if e.key.Config().Imported && !nk.Config().Imported {
		if err := s.clearImported(ctx, tenant, nk.Name()); err != nil {
			return nil, err
		}
		// The configuration row changed once more, maybe after other
		// changes: read it back rather than guess its revision.
		return s.read(ctx, keyID{tenant, nk.Name()}, ne)
	}
	return ne, nil
}

// clearImported clears the stored configuration's imported mark once a
// version made by a rotation follows the imported ones. It reads the row
// afresh and writes it back conditionally until it wins.
func (s *Service) clearImported(ctx context.Context, tenant, name string) error {
	for attempt := 1; ; attempt++ {
		tk, _, err := s.st.GetTransitKey(ctx, tenant, name)
		if err != nil {
			return err
		}
		cfg, err := transit.UnmarshalConfig(tk.Config)
		if err != nil {
			return fmt.Errorf("%w: %s/%s: configuration: %v", ErrCorrupt, tenant, name, err)
		}
		if !cfg.Imported {
			return nil
		}
		cfg.Imported, cfg.LatestVersion = false, tk.Latest
		b, err := transit.MarshalConfig(cfg)
		if err != nil {
			return err
		}
		tk.Config, tk.UpdatedAt = b, s.stamp()
		err = s.st.UpdateTransitKey(ctx, tk)
		if err == nil || !errors.Is(err, store.ErrConflict) || attempt >= s.opts.Attempts {
			if err != nil {
				return err
			}
			return nil
		}
	}
}

// Configure applies a change of Vault's keys/:name/config and returns the
// key and Vault's warnings. A change that changes nothing writes nothing.
func (s *Service) Configure(ctx context.Context, tenant, name string, u transit.ConfigUpdate) (*transit.Key, []string, error) {
	var warnings []string
	e, err := s.change(ctx, tenant, name, func(dk *tenantkey.Key, e *entry) (*entry, error) {
		base, added := e.key, map[int][]byte(nil)
		nk, w, err := s.eng.Configure(base, u)
		var te *transit.Error
		if errors.As(err, &te) && te.Reason == transit.ReasonVersionNotLoaded {
			// Lowering min_decryption_version: open the older versions.
			if base, added, err = s.withOlder(ctx, dk, tenant, e, te.Version); err != nil {
				return nil, err
			}
			nk, w, err = s.eng.Configure(base, u)
		}
		if err != nil {
			return nil, err
		}
		warnings = w
		if nk.Config() == e.key.Config() {
			return nil, nil
		}
		if err := s.writeConfig(ctx, tenant, e, nk.Config()); err != nil {
			return nil, err
		}
		return e.with(nk, e.revision+1, s.now(), added), nil
	})
	if err != nil {
		return nil, nil, err
	}
	return e.key, warnings, nil
}

// writeConfig stores cfg as the configuration of the key e was read as.
func (s *Service) writeConfig(ctx context.Context, tenant string, e *entry, cfg transit.Config) error {
	b, err := transit.MarshalConfig(cfg)
	if err != nil {
		return err
	}
	err = s.st.UpdateTransitKey(ctx, store.TransitKey{Tenant: tenant, Name: cfg.Name, Type: cfg.Type.String(), Config: b,
		Revision: e.revision, UpdatedAt: s.stamp()})
	if err != nil {
		return err
	}
	return nil
}

// withOlder returns e's key with its versions from "from" up to the oldest
// it holds added, read and opened from the store. A version already
// trimmed is the engine's ErrVersionNotLoaded.
func (s *Service) withOlder(ctx context.Context, dk *tenantkey.Key, tenant string, e *entry, from int) (*transit.Key, map[int][]byte, error) {
	_, rows, err := s.st.GetTransitKey(ctx, tenant, e.key.Name())
	if err != nil {
		return nil, nil, err
	}
	oldest := e.key.Versions()[0].Number()
	var vs []*transit.Version
	added := map[int][]byte{}
	for _, r := range rows {
		if r.Version < from || r.Version >= oldest {
			continue
		}
		v, err := s.openVersion(dk, r, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %s/%s: version %d: %v", ErrCorrupt, tenant, e.key.Name(), r.Version, err)
		}
		vs = append(vs, v)
		added[r.Version] = r.Sealed
	}
	k, err := e.key.WithVersions(vs...)
	if err != nil {
		return nil, nil, err
	}
	return k, added, nil
}

// Trim raises min_available_version and deletes the versions below it.
// The configuration is stored first (conditionally), then the rows are
// deleted: a node stopping between the two leaves rows that no snapshot
// uses, deleted by the next trim.
func (s *Service) Trim(ctx context.Context, tenant, name string, minAvailable int) (*transit.Key, error) {
	e, err := s.change(ctx, tenant, name, func(dk *tenantkey.Key, e *entry) (*entry, error) {
		nk, err := s.eng.Trim(e.key, minAvailable)
		if err != nil {
			return nil, err
		}
		if err := s.writeConfig(ctx, tenant, e, nk.Config()); err != nil {
			return nil, err
		}
		if err := s.st.TrimTransitKey(ctx, tenant, name, minAvailable); err != nil {
			return nil, err
		}
		ne := e.with(nk, e.revision+1, s.now(), nil) // +1, not +2: a revision too low only costs a re-read
		for v := range ne.sealed {
			if v < minAvailable {
				delete(ne.sealed, v)
			}
		}
		return ne, nil
	})
	if err != nil {
		return nil, err
	}
	return e.key, nil
}

// Delete deletes the key and all its versions if its deletion_allowed is
// set, as read from the store now. The deletion is conditional on the
// revision read: when another node changed the key meanwhile (turning
// deletion_allowed off, say), the key is read again and Delete decides
// again.
func (s *Service) Delete(ctx context.Context, tenant, name string) error {
	id := keyID{tenant, name}
	if !ValidName(name) {
		return ErrNotFound
	}
	e := s.cache.get(id)
	for attempt := 1; ; attempt++ {
		var err error
		if e, err = s.fetch(ctx, id, e); err != nil {
			return err
		}
		if !e.key.Config().DeletionAllowed {
			return ErrDeletionNotAllowed
		}
		err = s.st.DeleteTransitKey(ctx, tenant, name, e.revision)
		switch {
		case err == nil:
			s.forgetKey(id)
			s.eng.ForgetKey(e.key)
			s.announce(ctx, id, nil)
			return nil
		case errors.Is(err, store.ErrConflict) && attempt < s.opts.Attempts:
		case errors.Is(err, store.ErrNotFound):
			s.cache.drop(id)
			return ErrNotFound
		default:
			return err
		}
	}
}
