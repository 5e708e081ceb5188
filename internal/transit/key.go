package transit

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"
)

// Config is a named key's policy: everything about it except the versions'
// material, with Vault's field names. It is what MarshalConfig stores and
// what a key read reports (with KeyType.Capabilities for the supports_*
// fields).
type Config struct {
	Name                 string
	Type                 KeyType
	LatestVersion        int
	MinDecryptionVersion int // >= 1
	MinEncryptionVersion int // 0: the latest version
	MinAvailableVersion  int // 0 until the key is first trimmed
	DeletionAllowed      bool
	Exportable           bool
	AllowPlaintextBackup bool
	Derived              bool // the KDF is then always hkdf_sha256
	ConvergentEncryption bool // convergent version 3
	AutoRotatePeriod     time.Duration
	// Imported is set by import and cleared by a rotation done by the
	// engine, as Vault does.
	Imported                 bool
	AllowImportedKeyRotation bool
	KeySize                  int // hmac keys: the key length in bytes; 0 otherwise
}

// KDF is Vault's kdf field: "hkdf_sha256" for derived keys, "" otherwise.
func (c Config) KDF() string {
	if c.Derived {
		return "hkdf_sha256"
	}
	return ""
}

// validate checks every invariant Vault keeps between the fields.
func (c Config) validate() error {
	bad := func(d string) error { return newError(ReasonInvalidConfig, d) }
	caps := c.Type.Capabilities()
	switch {
	case !c.Type.valid():
		return bad("unknown key type")
	case len(c.Name) > 1024:
		return bad("name longer than 1024 bytes")
	case c.LatestVersion < 1 || c.LatestVersion > MaxVersion:
		return bad("latest_version out of range")
	case c.MinDecryptionVersion < 1 || c.MinDecryptionVersion > c.LatestVersion:
		return bad("min_decryption_version must be between 1 and latest_version")
	case c.MinEncryptionVersion < 0 || c.MinEncryptionVersion > c.LatestVersion:
		return bad("min_encryption_version must be between 0 and latest_version")
	case c.MinEncryptionVersion > 0 && c.MinEncryptionVersion < c.MinDecryptionVersion:
		return bad("min_encryption_version must be 0 or at least min_decryption_version")
	case c.MinAvailableVersion < 0 || c.MinAvailableVersion > c.MinDecryptionVersion:
		return bad("min_available_version must be between 0 and min_decryption_version")
	case c.MinAvailableVersion > 0 && c.MinEncryptionVersion == 0:
		return bad("a trimmed key needs min_encryption_version set")
	case c.MinAvailableVersion > c.MinEncryptionVersion && c.MinAvailableVersion > 0:
		return bad("min_available_version above min_encryption_version")
	case c.Derived && !caps.Derivation:
		return bad("key derivation is not supported by the key type")
	case c.ConvergentEncryption && !c.Derived:
		return bad("convergent encryption requires derivation to be enabled")
	case c.ConvergentEncryption && !caps.Convergent:
		return bad("convergent encryption is not supported by the key type")
	case c.AutoRotatePeriod != 0 && c.AutoRotatePeriod < MinAutoRotatePeriodSeconds*time.Second:
		return bad("auto_rotate_period must be 0 to disable or at least an hour")
	case c.AutoRotatePeriod < 0 || c.AutoRotatePeriod%time.Second != 0:
		return bad("auto_rotate_period must be whole seconds")
	case c.Type == HMAC && (c.KeySize < HMACMinKeySize || c.KeySize > HMACMaxKeySize):
		return bad("key_size must be between 32 and 512 bytes")
	case c.Type != HMAC && c.KeySize != 0:
		return bad("key_size applies to hmac keys only")
	}
	return nil
}

// Key is an immutable snapshot of a named key (Vault's policy): its Config
// and the versions it holds. Operations read it without locks; a change
// (Engine.Rotate, Configure, Trim, ImportVersion) returns a new Key sharing
// the unchanged versions, which the caller swaps in atomically (for example
// with an atomic.Pointer). A snapshot must hold every version from
// MinDecryptionVersion to LatestVersion; it may hold older ones down to
// MinAvailableVersion, contiguously.
type Key struct {
	_        noCompare
	cfg      Config
	base     int        // the lowest version number held
	versions []*Version // versions[n-base] is version n, up to the latest
}

// Config returns the key's policy.
func (k *Key) Config() Config { return k.cfg }

// Name is the key's name.
func (k *Key) Name() string { return k.cfg.Name }

// Type is the key's type.
func (k *Key) Type() KeyType { return k.cfg.Type }

// LatestVersion is the newest version.
func (k *Key) LatestVersion() int { return k.cfg.LatestVersion }

// Version returns version n, or false if this snapshot does not hold it.
func (k *Key) Version(n int) (*Version, bool) {
	v := k.version(n)
	return v, v != nil
}

// Versions returns the versions held, oldest first.
func (k *Key) Versions() []*Version { return slices.Clone(k.versions) }

func (k *Key) version(n int) *Version {
	i := n - k.base
	if i < 0 || i >= len(k.versions) {
		return nil
	}
	return k.versions[i]
}

func (k *Key) latest() *Version { return k.versions[len(k.versions)-1] }

// String, GoString and Format name the key without material.
func (k *Key) String() string {
	if k == nil {
		return "transit.Key(nil)"
	}
	return fmt.Sprintf("transit.Key{%q %s latest v%d}", k.cfg.Name, k.cfg.Type, k.cfg.LatestVersion)
}
func (k *Key) GoString() string              { return k.String() }
func (k *Key) Format(f fmt.State, verb rune) { fmt.Fprint(f, k.String()) }

// LoadKey assembles a snapshot from stored parts: the configuration
// (UnmarshalConfig) and versions (UnmarshalVersion), in any order. The
// versions must be a contiguous run ending at LatestVersion and reaching
// down to MinDecryptionVersion at least (older ones, down to
// MinAvailableVersion, are optional).
func LoadKey(cfg Config, versions ...*Version) (*Key, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	need := cfg.LatestVersion - cfg.MinDecryptionVersion + 1
	if len(versions) < need {
		return nil, versionError(ReasonVersionNotLoaded, "the versions from min_decryption_version to latest_version are not all given", cfg.MinDecryptionVersion)
	}
	vs := slices.Clone(versions)
	for _, v := range vs {
		if v == nil {
			return nil, newError(ReasonInvalidConfig, "nil version")
		}
	}
	slices.SortFunc(vs, func(a, b *Version) int { return a.num - b.num })
	base := vs[0].num
	for i, v := range vs {
		switch {
		case v.num != base+i:
			if i > 0 && v.num == vs[i-1].num {
				return nil, versionError(ReasonInvalidConfig, "version given twice", v.num)
			}
			return nil, versionError(ReasonVersionNotLoaded, "the versions given are not contiguous", base+i)
		case v.num > cfg.LatestVersion:
			return nil, versionError(ReasonInvalidConfig, "version newer than latest_version", v.num)
		}
	}
	switch {
	case vs[len(vs)-1].num != cfg.LatestVersion:
		return nil, versionError(ReasonVersionNotLoaded, "latest_version is not given", cfg.LatestVersion)
	case base > cfg.MinDecryptionVersion:
		return nil, versionError(ReasonVersionNotLoaded, "min_decryption_version is not given", cfg.MinDecryptionVersion)
	case cfg.MinAvailableVersion > 0 && base < cfg.MinAvailableVersion:
		return nil, versionError(ReasonInvalidConfig, "version below min_available_version", base)
	}
	k := &Key{cfg: cfg, base: base, versions: vs}
	for _, v := range vs {
		if err := k.checkVersion(v); err != nil {
			return nil, err
		}
	}
	return k, nil
}

func (k *Key) checkVersion(v *Version) error {
	switch {
	case v.typ != k.cfg.Type:
		return versionError(ReasonInvalidConfig, "version of another key type", v.num)
	case v.typ == HMAC && len(v.key) != k.cfg.KeySize:
		return versionError(ReasonInvalidConfig, "hmac key length differs from key_size", v.num)
	case !v.HasPrivateKey() && !v.typ.Capabilities().PublicKeyOnly:
		return versionError(ReasonInvalidConfig, "version without its key", v.num)
	}
	return nil
}

// WithVersions returns a snapshot that also holds the given older versions
// (between MinAvailableVersion and MinDecryptionVersion), so that a
// configuration change may lower min_decryption_version to them.
func (k *Key) WithVersions(vs ...*Version) (*Key, error) {
	all := k.Versions()
	for _, v := range vs {
		if v == nil {
			return nil, newError(ReasonInvalidConfig, "nil version")
		}
		if held := k.version(v.num); held != nil {
			if held != v {
				return nil, versionError(ReasonInvalidConfig, "a different version with this number is held", v.num)
			}
			continue
		}
		all = append(all, v)
	}
	return LoadKey(k.cfg, all...)
}

// configJSON is the stored form of Config, with Vault's names and units
// (auto_rotate_period in seconds), and a format number for migrations.
type configJSON struct {
	Format                   int     `json:"format"`
	Name                     string  `json:"name"`
	Type                     KeyType `json:"type"`
	LatestVersion            int     `json:"latest_version"`
	MinDecryptionVersion     int     `json:"min_decryption_version"`
	MinEncryptionVersion     int     `json:"min_encryption_version"`
	MinAvailableVersion      int     `json:"min_available_version"`
	DeletionAllowed          bool    `json:"deletion_allowed"`
	Exportable               bool    `json:"exportable"`
	AllowPlaintextBackup     bool    `json:"allow_plaintext_backup"`
	Derived                  bool    `json:"derived"`
	KDF                      string  `json:"kdf,omitempty"`
	ConvergentEncryption     bool    `json:"convergent_encryption"`
	ConvergentVersion        int     `json:"convergent_encryption_version,omitempty"`
	AutoRotatePeriod         int64   `json:"auto_rotate_period"`
	Imported                 bool    `json:"imported_key"`
	AllowImportedKeyRotation bool    `json:"imported_key_allow_rotation"`
	KeySize                  int     `json:"key_size,omitempty"`
}

const (
	configFormat  = 1
	maxConfigJSON = 4 << 10
)

// MarshalConfig encodes a key's configuration as JSON for storage.
func MarshalConfig(c Config) ([]byte, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	j := configJSON{
		Format: configFormat, Name: c.Name, Type: c.Type,
		LatestVersion: c.LatestVersion, MinDecryptionVersion: c.MinDecryptionVersion,
		MinEncryptionVersion: c.MinEncryptionVersion, MinAvailableVersion: c.MinAvailableVersion,
		DeletionAllowed: c.DeletionAllowed, Exportable: c.Exportable, AllowPlaintextBackup: c.AllowPlaintextBackup,
		Derived: c.Derived, KDF: c.KDF(), ConvergentEncryption: c.ConvergentEncryption,
		AutoRotatePeriod: int64(c.AutoRotatePeriod / time.Second),
		Imported:         c.Imported, AllowImportedKeyRotation: c.AllowImportedKeyRotation, KeySize: c.KeySize,
	}
	if c.ConvergentEncryption {
		j.ConvergentVersion = ConvergentVersion
	}
	return json.Marshal(j)
}

var errCorruptConfig = newError(ReasonCorrupt, "stored key configuration does not parse")

// UnmarshalConfig decodes what MarshalConfig wrote: strict JSON (no unknown
// or duplicate members, nothing after the object), format 1, and a
// configuration that passes every check MarshalConfig makes.
func UnmarshalConfig(b []byte) (Config, error) {
	if len(b) > maxConfigJSON || hasDuplicateKeys(b) {
		return Config{}, errCorruptConfig
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var j configJSON
	if err := dec.Decode(&j); err != nil {
		return Config{}, wrapError(ReasonCorrupt, "stored key configuration does not parse", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Config{}, errCorruptConfig
	}
	wantKDF, wantConv := "", 0
	if j.Derived {
		wantKDF = "hkdf_sha256"
	}
	if j.ConvergentEncryption {
		wantConv = ConvergentVersion
	}
	if j.Format != configFormat || j.KDF != wantKDF || j.ConvergentVersion != wantConv ||
		j.AutoRotatePeriod < 0 || j.AutoRotatePeriod > maxAutoRotateSeconds {
		return Config{}, errCorruptConfig
	}
	c := Config{
		Name: j.Name, Type: j.Type,
		LatestVersion: j.LatestVersion, MinDecryptionVersion: j.MinDecryptionVersion,
		MinEncryptionVersion: j.MinEncryptionVersion, MinAvailableVersion: j.MinAvailableVersion,
		DeletionAllowed: j.DeletionAllowed, Exportable: j.Exportable, AllowPlaintextBackup: j.AllowPlaintextBackup,
		Derived: j.Derived, ConvergentEncryption: j.ConvergentEncryption,
		AutoRotatePeriod: time.Duration(j.AutoRotatePeriod) * time.Second,
		Imported:         j.Imported, AllowImportedKeyRotation: j.AllowImportedKeyRotation, KeySize: j.KeySize,
	}
	if err := c.validate(); err != nil {
		return Config{}, wrapError(ReasonCorrupt, "stored key configuration is inconsistent", err)
	}
	return c, nil
}

// maxAutoRotateSeconds keeps the period inside time.Duration (about 292
// years).
const maxAutoRotateSeconds = int64(1<<63-1) / int64(time.Second)

// hasDuplicateKeys reports whether any JSON object in b names a member
// twice (encoding/json would keep the last silently). b is expected to be
// small; a document that does not tokenize is left to the decoder.
func hasDuplicateKeys(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	type frame struct {
		obj    bool
		keys   map[string]bool
		expKey bool
	}
	var stack []frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		if len(stack) > 0 && stack[len(stack)-1].obj && stack[len(stack)-1].expKey {
			if s, ok := tok.(string); ok {
				top := &stack[len(stack)-1]
				if top.keys[s] {
					return true
				}
				top.keys[s] = true
				top.expKey = false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{obj: true, keys: map[string]bool{}, expKey: true})
			continue
		case json.Delim('['):
			stack = append(stack, frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && stack[len(stack)-1].obj {
			stack[len(stack)-1].expKey = true
		}
	}
}

// Description is what Vault's key read returns besides the Config fields:
// per version, its creation time and, for asymmetric keys, its public key as
// Vault formats it (PEM for ECDSA and RSA, base64 for ed25519; for a derived
// ed25519 key, the key derived for the given context, or "" without one).
type Description struct {
	Config       Config
	Capabilities Capabilities
	KDF          string
	Versions     []VersionDescription
}

// VersionDescription is one entry of a key read's "keys".
type VersionDescription struct {
	Version      int
	CreationTime time.Time
	Name         string // asymmetric keys: the curve or type name Vault reports
	PublicKey    string // asymmetric keys only
}

func (vd VersionDescription) String() string { return "v" + strconv.Itoa(vd.Version) }

// Describe returns what Vault's key read shows. It lists the versions from
// min_decryption_version up only, as Vault (which archives the older ones)
// does: a retired version's public key is not published, though a
// snapshot may still hold the version. For a derived ed25519 key the
// public keys are derived for context (and empty without one).
func (e *Engine) Describe(k *Key, context []byte) (Description, error) {
	d := Description{Config: k.cfg, Capabilities: k.cfg.Type.Capabilities(), KDF: k.cfg.KDF()}
	for _, v := range k.versions {
		if v.num < k.cfg.MinDecryptionVersion {
			continue
		}
		vd := VersionDescription{Version: v.num, CreationTime: v.created}
		switch {
		case v.typ.isECDSA():
			vd.Name, vd.PublicKey = curveOf(v.typ).Params().Name, v.pubText
		case v.typ.isRSA():
			vd.Name, vd.PublicKey = v.typ.String(), v.pubText
		case v.typ == Ed25519:
			vd.Name, vd.PublicKey = "ed25519", v.pubText
			if k.cfg.Derived {
				vd.PublicKey = ""
				if len(context) > 0 {
					dk, err := e.derived.get(v, context, false)
					if err != nil {
						return Description{}, err
					}
					vd.PublicKey = base64.StdEncoding.EncodeToString(dk.ed[32:])
				}
			}
		}
		d.Versions = append(d.Versions, vd)
	}
	return d, nil
}
