package kvapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/keygate/keygate/internal/secrets"
)

// fake is an in-memory secrets.Service with the engine's documented
// semantics, for the API's tests; it seals nothing.
type fake struct {
	mu      sync.Mutex
	now     func() time.Time
	tenants map[string]*fakeTenant
}

type fakeTenant struct {
	cfg   secrets.MountConfig
	paths map[string]*fakePath
}

type fakePath struct {
	meta     secrets.Metadata // Versions unused: versions holds them
	versions map[int]*fakeVersion
}

type fakeVersion struct {
	meta secrets.VersionMeta
	data json.RawMessage
}

var _ secrets.Service = (*fake)(nil)

func newFake() *fake { return &fake{now: time.Now, tenants: map[string]*fakeTenant{}} }

func (f *fake) tenant(name string) *fakeTenant {
	t := f.tenants[name]
	if t == nil {
		t = &fakeTenant{paths: map[string]*fakePath{}}
		f.tenants[name] = t
	}
	return t
}

func (f *fake) gone(v *fakeVersion) bool {
	return v.meta.Destroyed || !v.meta.DeletionTime.IsZero() && !v.meta.DeletionTime.After(f.now())
}

func (f *fake) version(tenant, path string, version int) (*fakePath, *fakeVersion, error) {
	if err := secrets.ValidPath(path); err != nil {
		return nil, nil, err
	}
	p := f.tenant(tenant).paths[path]
	if p == nil {
		return nil, nil, secrets.ErrNotFound
	}
	if version == 0 {
		version = p.meta.CurrentVersion
	}
	v := p.versions[version]
	if v == nil {
		return nil, nil, secrets.ErrNotFound
	}
	if f.gone(v) {
		return p, v, &secrets.GoneError{Meta: v.meta}
	}
	return p, v, nil
}

func (f *fake) Read(_ context.Context, tenant, path string, version int) (*secrets.Secret, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, v, err := f.version(tenant, path, version)
	if err != nil {
		return nil, err
	}
	return &secrets.Secret{Data: slices.Clone(v.data), Meta: v.meta, CustomMetadata: maps.Clone(p.meta.CustomMetadata)}, nil
}

func (f *fake) Write(_ context.Context, tenant, path string, data json.RawMessage, cas *int) (secrets.VersionMeta, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.write(tenant, path, data, cas)
}

func (f *fake) write(tenant, path string, data json.RawMessage, cas *int) (secrets.VersionMeta, error) {
	if err := secrets.ValidPath(path); err != nil {
		return secrets.VersionMeta{}, err
	}
	var obj map[string]any
	if json.Unmarshal(data, &obj) != nil || obj == nil {
		return secrets.VersionMeta{}, fmt.Errorf("%w: data is not a JSON object", secrets.ErrInvalid)
	}
	if len(data) > secrets.MaxValueBytes {
		return secrets.VersionMeta{}, fmt.Errorf("%w: data larger than %d bytes", secrets.ErrTooLarge, secrets.MaxValueBytes)
	}
	t := f.tenant(tenant)
	p := t.paths[path]
	cur := 0
	if p != nil {
		cur = p.meta.CurrentVersion
	}
	switch {
	case cas == nil && (t.cfg.CASRequired || p != nil && p.meta.CASRequired):
		return secrets.VersionMeta{}, secrets.ErrCASRequired
	case cas != nil && *cas != cur:
		return secrets.VersionMeta{}, secrets.ErrCASMismatch
	}
	now := f.now()
	if p == nil {
		p = &fakePath{meta: secrets.Metadata{Path: path, CreatedTime: now}, versions: map[int]*fakeVersion{}}
		t.paths[path] = p
	}
	m := secrets.VersionMeta{Version: cur + 1, CreatedTime: now}
	dva := p.meta.DeleteVersionAfter
	if dva == 0 {
		dva = t.cfg.DeleteVersionAfter
	}
	if dva > 0 {
		m.DeletionTime = now.Add(dva)
	}
	p.versions[m.Version] = &fakeVersion{meta: m, data: slices.Clone(data)}
	p.meta.CurrentVersion, p.meta.UpdatedTime = m.Version, now
	if p.meta.OldestVersion == 0 {
		p.meta.OldestVersion = m.Version
	}
	f.trim(t, p)
	return m, nil
}

// trim drops the oldest versions beyond max_versions.
func (f *fake) trim(t *fakeTenant, p *fakePath) {
	limit := p.meta.MaxVersions
	if limit == 0 {
		limit = t.cfg.MaxVersions
	}
	if limit == 0 {
		limit = secrets.DefaultMaxVersions
	}
	for len(p.versions) > limit {
		delete(p.versions, p.meta.OldestVersion)
		p.meta.OldestVersion++
	}
}

func (f *fake) Patch(_ context.Context, tenant, path string, patch json.RawMessage, cas *int) (secrets.VersionMeta, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, v, err := f.version(tenant, path, 0)
	if err != nil {
		return secrets.VersionMeta{}, secrets.ErrNotFound
	}
	var doc, p any
	if json.Unmarshal(v.data, &doc) != nil || json.Unmarshal(patch, &p) != nil {
		return secrets.VersionMeta{}, fmt.Errorf("%w: patch is not JSON", secrets.ErrInvalid)
	}
	merged, _ := json.Marshal(mergePatch(doc, p))
	return f.write(tenant, path, merged, cas)
}

// mergePatch is RFC 7396's.
func mergePatch(target, patch any) any {
	pm, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	tm, ok := target.(map[string]any)
	if !ok {
		tm = map[string]any{}
	}
	for k, v := range pm {
		if v == nil {
			delete(tm, k)
		} else {
			tm[k] = mergePatch(tm[k], v)
		}
	}
	return tm
}

func (f *fake) Subkeys(_ context.Context, tenant, path string, version, depth int) (json.RawMessage, secrets.VersionMeta, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, v, err := f.version(tenant, path, version)
	if err != nil {
		return nil, secrets.VersionMeta{}, err
	}
	var doc any
	json.Unmarshal(v.data, &doc) //nolint:errcheck // checked when written
	out, _ := json.Marshal(subkeys(doc, depth, 1))
	return out, v.meta, nil
}

func subkeys(doc any, depth, level int) any {
	m, ok := doc.(map[string]any)
	if !ok {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		if depth == 0 || level < depth {
			out[k] = subkeys(v, depth, level+1)
		} else {
			out[k] = nil
		}
	}
	return out
}

func (f *fake) Metadata(_ context.Context, tenant, path string) (*secrets.Metadata, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := secrets.ValidPath(path); err != nil {
		return nil, err
	}
	p := f.tenant(tenant).paths[path]
	if p == nil {
		return nil, secrets.ErrNotFound
	}
	m := p.meta
	m.CustomMetadata = maps.Clone(p.meta.CustomMetadata)
	for _, n := range slices.Sorted(maps.Keys(p.versions)) {
		m.Versions = append(m.Versions, p.versions[n].meta)
	}
	return &m, nil
}

func checkCustom(m map[string]string) error {
	if len(m) > secrets.MaxCustomMetadata {
		return fmt.Errorf("%w: custom_metadata has more than %d keys", secrets.ErrInvalid, secrets.MaxCustomMetadata)
	}
	for k, v := range m {
		if k == "" || len(k) > secrets.MaxCustomKeyBytes || len(v) > secrets.MaxCustomValueByte {
			return fmt.Errorf("%w: custom_metadata key or value out of bounds", secrets.ErrInvalid)
		}
	}
	return nil
}

func (f *fake) setMetadata(tenant, path string, u secrets.MetadataUpdate, merge bool) error {
	if err := secrets.ValidPath(path); err != nil {
		return err
	}
	t := f.tenant(tenant)
	p := t.paths[path]
	if p == nil && merge {
		return secrets.ErrNotFound
	}
	custom := u.CustomMetadata
	if merge && custom != nil {
		custom = maps.Clone(p.meta.CustomMetadata)
		if custom == nil {
			custom = map[string]string{}
		}
		for k, v := range u.CustomMetadata {
			if v == "" {
				delete(custom, k)
			} else {
				custom[k] = v
			}
		}
	}
	if err := checkCustom(custom); err != nil {
		return err
	}
	now := f.now()
	if p == nil {
		p = &fakePath{meta: secrets.Metadata{Path: path, CreatedTime: now}, versions: map[int]*fakeVersion{}}
		t.paths[path] = p
	}
	if u.MaxVersions != nil {
		p.meta.MaxVersions = *u.MaxVersions
	}
	if u.CASRequired != nil {
		p.meta.CASRequired = *u.CASRequired
	}
	if u.DeleteVersionAfter != nil {
		p.meta.DeleteVersionAfter = *u.DeleteVersionAfter
	}
	if custom != nil {
		p.meta.CustomMetadata = custom
		if len(custom) == 0 {
			p.meta.CustomMetadata = nil
		}
	}
	p.meta.UpdatedTime = now
	f.trim(t, p)
	return nil
}

func (f *fake) SetMetadata(_ context.Context, tenant, path string, u secrets.MetadataUpdate) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.setMetadata(tenant, path, u, false)
}

func (f *fake) PatchMetadata(_ context.Context, tenant, path string, u secrets.MetadataUpdate) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.setMetadata(tenant, path, u, true)
}

func (f *fake) DeleteMetadata(_ context.Context, tenant, path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := secrets.ValidPath(path); err != nil {
		return err
	}
	delete(f.tenant(tenant).paths, path)
	return nil
}

// each applies fn to the versions named (none: the current one) that exist.
func (f *fake) each(tenant, path string, versions []int, fn func(*fakeVersion)) error {
	if err := secrets.ValidPath(path); err != nil {
		return err
	}
	p := f.tenant(tenant).paths[path]
	if p == nil {
		return nil
	}
	if len(versions) == 0 {
		versions = []int{p.meta.CurrentVersion}
	}
	for _, n := range versions {
		if v := p.versions[n]; v != nil && !v.meta.Destroyed {
			fn(v)
		}
	}
	return nil
}

func (f *fake) Delete(_ context.Context, tenant, path string, versions []int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	return f.each(tenant, path, versions, func(v *fakeVersion) {
		if v.meta.DeletionTime.IsZero() || v.meta.DeletionTime.After(now) {
			v.meta.DeletionTime = now
		}
	})
}

func (f *fake) Undelete(_ context.Context, tenant, path string, versions []int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.each(tenant, path, versions, func(v *fakeVersion) { v.meta.DeletionTime = time.Time{} })
}

func (f *fake) Destroy(_ context.Context, tenant, path string, versions []int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.each(tenant, path, versions, func(v *fakeVersion) { v.meta.Destroyed, v.data = true, nil })
}

func (f *fake) List(_ context.Context, tenant, prefix string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := secrets.ValidFolder(prefix); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for path := range f.tenant(tenant).paths {
		rest, ok := strings.CutPrefix(path, prefix)
		if !ok {
			continue
		}
		if dir, _, ok := strings.Cut(rest, "/"); ok {
			seen[dir+"/"] = true
		} else {
			seen[rest] = true
		}
	}
	if len(seen) == 0 {
		return nil, secrets.ErrNotFound
	}
	keys := slices.Collect(maps.Keys(seen))
	sort.Strings(keys)
	return keys, nil
}

func (f *fake) Config(_ context.Context, tenant string) (secrets.MountConfig, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tenant(tenant).cfg, nil
}

func (f *fake) SetConfig(_ context.Context, tenant string, c secrets.MountConfig) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tenant(tenant).cfg = c
	return nil
}
