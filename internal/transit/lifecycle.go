package transit

import (
	"context"
	"time"
)

// CreateOptions are the parameters of a new key (Vault's keys/:name write).
type CreateOptions struct {
	Type                 KeyType // default aes256-gcm96, as in Vault
	Derived              bool
	ConvergentEncryption bool // needs Derived
	Exportable           bool
	AllowPlaintextBackup bool
	AutoRotatePeriod     time.Duration // 0, or at least an hour
	KeySize              int           // hmac only: 32 to 512 bytes, default HMACDefaultKeySize
	// Caller is whom the key is made for: an asymmetric key is generated
	// on a worker, in the caller's turn (see Caller).
	Caller Caller
}

// CreateKey makes a key with its first version. The caller stores
// MarshalConfig(k.Config()) and MarshalVersion of k's version 1. An
// asymmetric key is generated on a worker, in o.Caller's turn; ctx bounds
// the wait for one.
func (e *Engine) CreateKey(ctx context.Context, name string, o CreateOptions) (*Key, error) {
	if o.Type == 0 {
		o.Type = AES256GCM96
	}
	if !o.Type.valid() {
		return nil, newError(ReasonInvalidRequest, "unknown key type")
	}
	if o.KeySize != 0 && o.Type != HMAC {
		return nil, newError(ReasonInvalidRequest, "key_size is not valid for the key type")
	}
	if o.Type == HMAC && o.KeySize == 0 {
		o.KeySize = HMACDefaultKeySize
	}
	cfg := Config{
		Name: name, Type: o.Type, LatestVersion: 1, MinDecryptionVersion: 1,
		Exportable: o.Exportable, AllowPlaintextBackup: o.AllowPlaintextBackup,
		Derived: o.Derived, ConvergentEncryption: o.ConvergentEncryption,
		AutoRotatePeriod: o.AutoRotatePeriod, KeySize: o.KeySize,
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	v, err := e.generate(ctx, cfg, 1, o.Caller)
	if err != nil {
		return nil, err
	}
	return LoadKey(cfg, v)
}

// generate makes version num of a key of cfg, on a worker in who's turn
// if its type's generation costs that much (every asymmetric type's does:
// an rsa-4096 key takes about a second of a core).
func (e *Engine) generate(ctx context.Context, cfg Config, num int, who Caller) (*Version, error) {
	g, err := e.turn(ctx, &Key{cfg: cfg}, opGenerate, nil, who)
	if err != nil {
		return nil, err
	}
	defer g.done()
	return generateVersion(cfg.Type, num, e.now().UTC(), e.rand, cfg.KeySize)
}

// Rotate adds a new latest version. An imported key rotates only if it was
// imported with allow_rotation; after a rotation the key no longer counts as
// imported (Vault does the same). The new version is generated as in
// CreateKey, in who's turn.
func (e *Engine) Rotate(ctx context.Context, k *Key, who Caller) (*Key, error) {
	if k.cfg.Imported && !k.cfg.AllowImportedKeyRotation {
		return nil, newError(ReasonRotationNotAllowed, "imported key does not allow rotation")
	}
	if k.cfg.LatestVersion >= MaxVersion {
		return nil, newError(ReasonInvalidRequest, "the key has reached MaxVersion")
	}
	v, err := e.generate(ctx, k.cfg, k.cfg.LatestVersion+1, who)
	if err != nil {
		return nil, err
	}
	cfg := k.cfg
	cfg.LatestVersion++
	cfg.Imported = false
	return k.withVersion(cfg, v), nil
}

// withVersion returns a snapshot with cfg and v added as the latest version.
func (k *Key) withVersion(cfg Config, v *Version) *Key {
	vs := make([]*Version, len(k.versions)+1)
	copy(vs, k.versions)
	vs[len(vs)-1] = v
	return &Key{cfg: cfg, base: k.base, versions: vs}
}

// RotationDue reports whether the key's auto_rotate_period has passed since
// its latest version was made, at time now (an imported key without
// allow_rotation never is).
func (k *Key) RotationDue(now time.Time) bool {
	if k.cfg.AutoRotatePeriod <= 0 || k.cfg.Imported && !k.cfg.AllowImportedKeyRotation {
		return false
	}
	return now.After(k.latest().created.Add(k.cfg.AutoRotatePeriod))
}

// RotateIfDue rotates k if RotationDue at the engine's clock; it returns k
// itself and false otherwise.
func (e *Engine) RotateIfDue(ctx context.Context, k *Key, who Caller) (*Key, bool, error) {
	if !k.RotationDue(e.now()) {
		return k, false, nil
	}
	nk, err := e.Rotate(ctx, k, who)
	if err != nil {
		return k, false, err
	}
	return nk, true, nil
}

// ConfigUpdate is a change of Vault's keys/:name/config; nil fields stay.
type ConfigUpdate struct {
	MinDecryptionVersion *int
	MinEncryptionVersion *int
	DeletionAllowed      *bool
	Exportable           *bool // once true, it stays true
	AllowPlaintextBackup *bool // once true, it stays true
	AutoRotatePeriod     *time.Duration
}

// Configure applies u with Vault's rules and returns the new snapshot and
// Vault's warnings. min_decryption_version 0 means 1 (with a warning, as in
// Vault). Unlike Vault, which ignores them silently, turning exportable or
// allow_plaintext_backup off once on is an error. Lowering
// min_decryption_version below the versions the snapshot holds needs them:
// the error is ErrVersionNotLoaded naming the first one missing (load it and
// use WithVersions).
func (e *Engine) Configure(k *Key, u ConfigUpdate) (*Key, []string, error) {
	cfg := k.cfg
	var warnings []string
	bad := func(d string) error { return newError(ReasonInvalidConfig, d) }
	if u.MinDecryptionVersion != nil {
		n := *u.MinDecryptionVersion
		switch {
		case n < 0:
			return nil, nil, bad("min_decryption_version cannot be negative")
		case n == 0:
			n = 1
			warnings = append(warnings, "transit key numbering starts at 1; forcing min_decryption_version to 1")
		}
		if n != cfg.MinDecryptionVersion && n > cfg.LatestVersion {
			return nil, nil, bad("min_decryption_version cannot exceed the latest version")
		}
		cfg.MinDecryptionVersion = n
	}
	if u.MinEncryptionVersion != nil {
		n := *u.MinEncryptionVersion
		switch {
		case n < 0:
			return nil, nil, bad("min_encryption_version cannot be negative")
		case n != cfg.MinEncryptionVersion && n > cfg.LatestVersion:
			return nil, nil, bad("min_encryption_version cannot exceed the latest version")
		}
		cfg.MinEncryptionVersion = n
	}
	if cfg.MinEncryptionVersion > 0 && cfg.MinEncryptionVersion < cfg.MinDecryptionVersion {
		return nil, nil, bad("min_encryption_version must be greater than or equal to min_decryption_version")
	}
	if u.DeletionAllowed != nil {
		cfg.DeletionAllowed = *u.DeletionAllowed
	}
	if u.Exportable != nil {
		if !*u.Exportable && cfg.Exportable {
			return nil, nil, bad("exportable cannot be disabled once enabled")
		}
		cfg.Exportable = *u.Exportable
	}
	if u.AllowPlaintextBackup != nil {
		if !*u.AllowPlaintextBackup && cfg.AllowPlaintextBackup {
			return nil, nil, bad("allow_plaintext_backup cannot be disabled once enabled")
		}
		cfg.AllowPlaintextBackup = *u.AllowPlaintextBackup
	}
	if u.AutoRotatePeriod != nil {
		p := *u.AutoRotatePeriod
		if p != 0 && p < MinAutoRotatePeriodSeconds*time.Second {
			return nil, nil, bad("auto_rotate_period must be 0 to disable or at least an hour")
		}
		cfg.AutoRotatePeriod = p
	}
	switch {
	case cfg.MinAvailableVersion > cfg.MinEncryptionVersion && cfg.MinAvailableVersion > 0:
		return nil, nil, bad("min_encryption_version should not be less than min_available_version")
	case cfg.MinAvailableVersion > cfg.MinDecryptionVersion:
		return nil, nil, bad("min_decryption_version should not be less than min_available_version")
	}
	if err := cfg.validate(); err != nil {
		return nil, nil, err
	}
	nk, err := LoadKey(cfg, k.Versions()...)
	if err != nil {
		return nil, nil, err
	}
	return nk, warnings, nil
}

// Trim raises min_available_version: the versions below it are dropped from
// the snapshot (the caller deletes their rows) and their derived keys from
// the cache; their material is overwritten once no snapshot refers to them.
// Vault's rules: it never goes down, and it may not exceed
// min_encryption_version (which must be set) or min_decryption_version.
func (e *Engine) Trim(k *Key, minAvailable int) (*Key, error) {
	cfg := k.cfg
	bad := func(d string) error { return newError(ReasonInvalidConfig, d) }
	switch {
	case minAvailable < cfg.MinAvailableVersion:
		return nil, bad("min_available_version cannot be decremented")
	case cfg.MinEncryptionVersion == 0:
		return nil, bad("min_available_version cannot be set when min_encryption_version is not set")
	case minAvailable > cfg.MinEncryptionVersion:
		return nil, bad("min_available_version cannot be greater than min_encryption_version")
	case minAvailable > cfg.MinDecryptionVersion:
		return nil, bad("min_available_version cannot be greater than min_decryption_version")
	case minAvailable <= 0:
		return nil, bad("min_available_version must be positive")
	}
	cfg.MinAvailableVersion = minAvailable
	var keep []*Version
	dropped := map[uint64]bool{}
	for _, v := range k.Versions() {
		if v.num < minAvailable {
			dropped[v.id] = true
			continue
		}
		keep = append(keep, v)
	}
	nk, err := LoadKey(cfg, keep...)
	if err != nil {
		return nil, err
	}
	e.derived.purge(dropped)
	return nk, nil
}
