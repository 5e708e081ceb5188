package keystore

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/transit"
)

// Each tenant has its own wrapping key for Vault's BYOK import (Vault has
// one per mount): an import ciphertext made for one tenant does not import
// into another. It is an RSA-4096 key made on the tenant's first import or
// wrapping_key read, stored like a transit key's version (sealed under the
// tenant's data key) under a name outside the key name grammar, which no
// request can name and List leaves out.

// wrappingName is the row name of a tenant's wrapping key.
const wrappingName = store.InternalKeyPrefix + "wrapping_key"

// wrappingConfig is its configuration row: the marker that it is not a
// transit key.
var wrappingConfig = []byte(`{"wrapping_key":1}`)

// WrappingKey returns the tenant's wrapping key, making it on first use.
func (s *Service) WrappingKey(ctx context.Context, tenant string) (*transit.WrappingKey, error) {
	s.wmu.Lock()
	w, epoch := s.wrap[tenant], s.wepch
	s.wmu.Unlock()
	if w != nil {
		return w, nil
	}
	s.wgen.Lock() // making one takes a while: once, not once per caller
	defer s.wgen.Unlock()
	s.wmu.Lock()
	w = s.wrap[tenant]
	s.wmu.Unlock()
	if w != nil {
		return w, nil
	}
	w, err := s.loadWrappingKey(ctx, tenant)
	if err != nil {
		return nil, err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.wepch == epoch {
		s.wrap[tenant] = w
	}
	return w, nil
}

func (s *Service) loadWrappingKey(ctx context.Context, tenant string) (*transit.WrappingKey, error) {
	dk, err := s.sealingKey(ctx, tenant) // a wrapping key is read or made rarely: the row's data key, as it is now
	if err != nil {
		return nil, err
	}
	for range 2 {
		_, rows, err := s.st.GetTransitKey(ctx, tenant, wrappingName)
		switch {
		case err == nil && len(rows) == 1:
			der, err := dk.Open(rows[0].Sealed, versionAD(wrappingName, 1))
			if err != nil {
				return nil, fmt.Errorf("%w: %s: wrapping key: %v", ErrCorrupt, tenant, err)
			}
			defer clear(der)
			priv, err := x509.ParsePKCS8PrivateKey(der)
			rk, ok := priv.(*rsa.PrivateKey)
			if err != nil || !ok {
				return nil, fmt.Errorf("%w: %s: wrapping key does not parse", ErrCorrupt, tenant)
			}
			return transit.NewWrappingKey(rk)
		case err == nil:
			return nil, fmt.Errorf("%w: %s: wrapping key has %d versions", ErrCorrupt, tenant, len(rows))
		case !errors.Is(err, store.ErrNotFound):
			return nil, err
		}
		priv, err := rsa.GenerateKey(rand.Reader, transit.WrappingKeyBits)
		if err != nil {
			return nil, fmt.Errorf("wrapping key: %w", err)
		}
		der, err := x509.MarshalPKCS8PrivateKey(priv)
		if err != nil {
			return nil, err
		}
		// Sealed under the data key as it is after the seconds a 4096-bit
		// key takes: a rotation may have retired the one read before.
		if dk, err = s.sealingKey(ctx, tenant); err != nil {
			clear(der)
			return nil, err
		}
		sealed, err := dk.Seal(der, versionAD(wrappingName, 1))
		clear(der)
		if err != nil {
			return nil, err
		}
		now := s.stamp()
		err = s.st.CreateTransitKey(ctx, store.TransitKey{Tenant: tenant, Name: wrappingName, Type: "rsa-4096", Config: wrappingConfig,
			CreatedAt: now, UpdatedAt: now}, store.TransitKeyVersion{Tenant: tenant, Name: wrappingName, Version: 1, Sealed: sealed, CreatedAt: now})
		switch {
		case err == nil:
			s.log.Info("transit wrapping key created", "tenant", tenant)
			return transit.NewWrappingKey(priv)
		case errors.Is(err, store.ErrNotFound):
			return nil, ErrNotFound
		case !errors.Is(err, store.ErrConflict): // another node made one first: read it
			return nil, err
		}
	}
	return nil, fmt.Errorf("%s: wrapping key: %w", tenant, store.ErrConflict)
}
