package secrets

import (
	"encoding/json"
	"fmt"
	"maps"
	"time"
	"unicode"

	"github.com/keygate/keygate/internal/rootkey/tenantkey"
	"github.com/keygate/keygate/internal/store"
)

// pathMeta is what the store keeps of a path, sealed: its settings,
// custom metadata and every kept version's metadata. Times are Unix
// microseconds (the stores' precision); 0 is none.
type pathMeta struct {
	CASRequired        bool              `json:"cas_required,omitempty"`
	MaxVersions        int               `json:"max_versions,omitempty"`
	DeleteVersionAfter time.Duration     `json:"delete_version_after,omitempty"`
	Custom             map[string]string `json:"custom_metadata,omitempty"`
	Created            int64             `json:"created"`
	Updated            int64             `json:"updated"`
	Current            int               `json:"current"`
	Versions           []versionMeta     `json:"versions,omitempty"` // ascending, the kept ones
	Gen                int64             `json:"gen,omitempty"`      // the path's generation (generation.go); 0: none
}

// newPathMeta is the metadata of a path made at now, with a generation of
// its own.
func newPathMeta(now int64) *pathMeta { return &pathMeta{Created: now, Gen: newGeneration()} }

type versionMeta struct {
	Version   int   `json:"v"`
	Created   int64 `json:"c"`
	Deleted   int64 `json:"d,omitempty"`
	Destroyed bool  `json:"x,omitempty"`
}

func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMicro(v).UTC()
}

func (v versionMeta) public() VersionMeta {
	return VersionMeta{Version: v.Version, CreatedTime: fromMicros(v.Created), DeletionTime: fromMicros(v.Deleted), Destroyed: v.Destroyed}
}

// gone reports whether the version reads as deleted or destroyed at now:
// a deletion time at or before now counts.
func (v versionMeta) gone(now int64) bool {
	return v.Destroyed || (v.Deleted != 0 && v.Deleted <= now)
}

// version returns the kept version n, or nil.
func (m *pathMeta) version(n int) *versionMeta {
	for i := range m.Versions {
		if m.Versions[i].Version == n {
			return &m.Versions[i]
		}
	}
	return nil
}

func (m *pathMeta) oldest() int {
	if len(m.Versions) == 0 {
		return 0
	}
	return m.Versions[0].Version
}

// custom returns a copy of the custom metadata (nil: none).
func (m *pathMeta) custom() map[string]string {
	if len(m.Custom) == 0 {
		return nil
	}
	return maps.Clone(m.Custom)
}

func (m *pathMeta) public(path string) *Metadata {
	out := &Metadata{
		Path: path, CASRequired: m.CASRequired, MaxVersions: m.MaxVersions, DeleteVersionAfter: m.DeleteVersionAfter,
		CustomMetadata: m.custom(), CreatedTime: fromMicros(m.Created), UpdatedTime: fromMicros(m.Updated),
		CurrentVersion: m.Current, OldestVersion: m.oldest(),
	}
	for _, v := range m.Versions {
		out.Versions = append(out.Versions, v.public())
	}
	return out
}

// apply sets the fields u names, replacing or (merge) merging the custom
// metadata, and checks the result.
func (m *pathMeta) apply(u MetadataUpdate, merge bool) error {
	if u.MaxVersions != nil {
		if *u.MaxVersions < 0 {
			return fmt.Errorf("%w: max_versions %d is negative", ErrInvalid, *u.MaxVersions)
		}
		m.MaxVersions = *u.MaxVersions
	}
	if u.CASRequired != nil {
		m.CASRequired = *u.CASRequired
	}
	if u.DeleteVersionAfter != nil {
		if *u.DeleteVersionAfter < 0 {
			return fmt.Errorf("%w: delete_version_after %v is negative", ErrInvalid, *u.DeleteVersionAfter)
		}
		m.DeleteVersionAfter = *u.DeleteVersionAfter
	}
	switch {
	case u.CustomMetadata == nil:
	case merge:
		next := maps.Clone(m.Custom)
		if next == nil {
			next = map[string]string{}
		}
		for k, v := range u.CustomMetadata {
			if v == "" {
				delete(next, k)
			} else {
				next[k] = v
			}
		}
		m.Custom = next
	default:
		m.Custom = maps.Clone(u.CustomMetadata)
	}
	return checkCustom(m.Custom)
}

// checkCustom checks custom metadata against Vault's limits: at most
// MaxCustomMetadata entries, keys and values not empty, printable and
// within their lengths.
func checkCustom(c map[string]string) error {
	if len(c) > MaxCustomMetadata {
		return fmt.Errorf("%w: custom_metadata has %d keys, at most %d", ErrInvalid, len(c), MaxCustomMetadata)
	}
	for k, v := range c {
		switch {
		case k == "":
			return fmt.Errorf("%w: custom_metadata has an empty key", ErrInvalid)
		case len(k) > MaxCustomKeyBytes:
			return fmt.Errorf("%w: custom_metadata key %.32q... is over %d bytes", ErrInvalid, k, MaxCustomKeyBytes)
		case v == "":
			return fmt.Errorf("%w: custom_metadata key %q has an empty value", ErrInvalid, k)
		case len(v) > MaxCustomValueByte:
			return fmt.Errorf("%w: custom_metadata value of key %q is over %d bytes", ErrInvalid, k, MaxCustomValueByte)
		case !printable(k):
			return fmt.Errorf("%w: custom_metadata key %q has an unprintable character", ErrInvalid, k)
		case !printable(v):
			return fmt.Errorf("%w: custom_metadata value of key %q has an unprintable character", ErrInvalid, k)
		}
	}
	return nil
}

func printable(s string) bool {
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

func (m *pathMeta) marshal() ([]byte, error) { return json.Marshal(m) }

func unmarshalMeta(b []byte) (*pathMeta, error) {
	if m, ok := decodeMeta(b); ok {
		return m, nil
	}
	var m pathMeta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// Additional data binding a sealed blob to its tenant, path and version
// (the tenant's data key binds the tenant as well). Paths hold no NUL.
func metaAD(tenant, path string) []byte {
	return tenantkey.RecordAD(tenant, store.SealedRef{Kind: store.SealedSecretMeta, Name: path})
}

func valueAD(tenant, path string, version int) []byte {
	return tenantkey.RecordAD(tenant, store.SealedRef{Kind: store.SealedSecretValue, Name: path, Version: version})
}

// mountConfig is MountConfig as the store keeps it (not secret).
type mountConfig struct {
	MaxVersions        int           `json:"max_versions,omitempty"`
	CASRequired        bool          `json:"cas_required,omitempty"`
	DeleteVersionAfter time.Duration `json:"delete_version_after,omitempty"`
}

func checkConfig(c MountConfig) error {
	switch {
	case c.MaxVersions < 0:
		return fmt.Errorf("%w: max_versions %d is negative", ErrInvalid, c.MaxVersions)
	case c.DeleteVersionAfter < 0:
		return fmt.Errorf("%w: delete_version_after %v is negative", ErrInvalid, c.DeleteVersionAfter)
	}
	return nil
}

// maxVersions is how many versions the path keeps: its own max_versions,
// else the mount's, else DefaultMaxVersions.
func maxVersions(m *pathMeta, c MountConfig) int {
	switch {
	case m.MaxVersions > 0:
		return m.MaxVersions
	case c.MaxVersions > 0:
		return c.MaxVersions
	}
	return DefaultMaxVersions
}

// deleteAfter is how long a new version lives: the shorter of the path's
// and the mount's delete_version_after that are set (as Vault); 0: for
// ever.
func deleteAfter(m *pathMeta, c MountConfig) time.Duration {
	d, mount := m.DeleteVersionAfter, c.DeleteVersionAfter
	if d == 0 || (mount != 0 && mount < d) {
		d = mount
	}
	return d
}
