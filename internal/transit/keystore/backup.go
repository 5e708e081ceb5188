package keystore

import (
	"context"
	"errors"

	"github.com/keygate/keygate/internal/rootkey/tenantkey"
	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/transit"
)

// ErrRestoreExists: a restore names a key the tenant has, without force.
var ErrRestoreExists = errors.New("transit key already exists")

// Backup returns the backup of the tenant's key (transit.Engine.Backup):
// read afresh from the store, with every version it keeps, also those
// below min_decryption_version. The backup holds the key in plaintext.
func (s *Service) Backup(ctx context.Context, tenant, name string) (transit.Secret, error) {
	id := keyID{tenant, name}
	if !ValidName(name) {
		return transit.Secret{}, ErrNotFound
	}
	e, err := s.fetch(ctx, id, s.cache.get(id))
	if err != nil {
		return transit.Secret{}, err
	}
	cfg := e.key.Config()
	if !cfg.Exportable || !cfg.AllowPlaintextBackup {
		return s.eng.Backup(e.key) // Vault's refusal, before any version is opened
	}
	dk, err := s.dataKey(ctx, tenant)
	if err != nil {
		return transit.Secret{}, err
	}
	k, _, err := s.withOlder(ctx, dk, tenant, e, max(1, cfg.MinAvailableVersion))
	if err != nil {
		return transit.Secret{}, err
	}
	return s.eng.Backup(k)
}

// Restore makes k (a backup's key, under the name it is to have) the
// tenant's key of its name, as Vault's restore does. A name the tenant
// has already is ErrRestoreExists unless force is set, in which case that
// key is deleted first (whatever its deletion_allowed: Vault's force
// overwrites).
//
// The key and all its versions are written in one store transaction, so
// no node ever sees the key with some of its versions, and a failure
// writes nothing. Every version is sealed before the write.
func (s *Service) Restore(ctx context.Context, tenant string, k *transit.Key, force bool) (*transit.Key, error) {
	name := k.Name()
	id := keyID{tenant, name}
	if !ValidName(name) {
		return nil, ErrInvalidName
	}
	dk, err := s.sealingKey(ctx, tenant)
	if err != nil {
		return nil, err
	}
	rows, sealed, err := sealAll(dk, tenant, k)
	if err != nil {
		return nil, err
	}
	if err := s.clearForRestore(ctx, id, force); err != nil {
		return nil, err
	}
	mark := s.cache.mark(id)
	e, err := s.storeRestored(ctx, tenant, k, rows, sealed)
	if err != nil {
		return nil, err
	}
	s.cache.put(id, e, mark)
	s.announce(ctx, id, e)
	return k, nil
}

// sealAll seals every version of k for its row.
func sealAll(dk *tenantkey.Key, tenant string, k *transit.Key) ([]store.TransitKeyVersion, map[int][]byte, error) {
	vs := k.Versions()
	rows := make([]store.TransitKeyVersion, 0, len(vs))
	sealed := make(map[int][]byte, len(vs))
	for _, v := range vs {
		b, err := sealVersion(dk, k.Name(), v)
		if err != nil {
			return nil, nil, err
		}
		rows = append(rows, store.TransitKeyVersion{Tenant: tenant, Name: k.Name(), Version: v.Number(), Sealed: b, CreatedAt: v.CreationTime()})
		sealed[v.Number()] = b
	}
	return rows, sealed, nil
}

// clearForRestore makes room for a restored key: nothing to do for a name
// the tenant does not have; ErrRestoreExists without force; with force,
// the key is deleted.
func (s *Service) clearForRestore(ctx context.Context, id keyID, force bool) error {
	e := s.cache.get(id)
	for attempt := 1; ; attempt++ {
		var err error
		e, err = s.fetch(ctx, id, e)
		switch {
		case errors.Is(err, ErrNotFound):
			return nil
		case err != nil:
			return err
		case !force:
			return ErrRestoreExists
		}
		err = s.st.DeleteTransitKey(ctx, id.tenant, id.name, e.revision)
		switch {
		case err == nil || errors.Is(err, store.ErrNotFound):
			s.forgetKey(id)
			s.eng.ForgetKey(e.key)
			s.announce(ctx, id, nil)
			return nil
		case errors.Is(err, store.ErrConflict) && attempt < s.opts.Attempts:
		default:
			return err
		}
	}
}

// storeRestored writes the restored key, with all its versions and its
// configuration, in one store transaction, and returns its entry.
func (s *Service) storeRestored(ctx context.Context, tenant string, k *transit.Key, rows []store.TransitKeyVersion, sealed map[int][]byte) (*entry, error) {
	cfg, err := transit.MarshalConfig(k.Config())
	if err != nil {
		return nil, err
	}
	now := s.stamp()
	tk := store.TransitKey{Tenant: tenant, Name: k.Name(), Type: k.Type().String(), Config: cfg, CreatedAt: now, UpdatedAt: now}
	switch err := s.st.RestoreTransitKey(ctx, tk, rows); {
	case errors.Is(err, store.ErrConflict): // made meanwhile
		return nil, ErrRestoreExists
	case errors.Is(err, store.ErrNotFound): // the tenant is gone
		return nil, ErrNotFound
	case err != nil:
		return nil, err
	}
	return &entry{key: k, revision: 1, created: now, loaded: s.now(), sealed: sealed}, nil
}
