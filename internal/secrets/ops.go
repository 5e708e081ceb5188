package secrets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/keygate/keygate/internal/store"
)

// Read returns version (0: the current one) of path.
func (e *Engine) Read(ctx context.Context, tenant, path string, version int) (*Secret, error) {
	data, vm, custom, err := e.read(ctx, tenant, path, version)
	if err != nil {
		return nil, err
	}
	return &Secret{Data: data, Meta: vm.public(), CustomMetadata: custom}, nil
}

// read returns the data of a live version of path, its metadata and the
// path's custom metadata (a copy; nil: none), from the cache or the
// store. A version erased between the reads of the metadata and of the
// value (trimmed by a writer) is read again from the metadata.
func (e *Engine) read(ctx context.Context, tenant, path string, version int) ([]byte, versionMeta, map[string]string, error) {
	if err := e.checkPath(path); err != nil {
		return nil, versionMeta{}, nil, err
	}
	if version < 0 {
		return nil, versionMeta{}, nil, fmt.Errorf("%w: version %d is negative", ErrInvalid, version)
	}
	if data, vm, custom, ok := e.cachedRead(ctx, tenant, path, version); ok {
		return data, vm, custom, nil
	}
	id := pathID{tenant, path}
	var mark uint64
	start := e.now()
	if e.cache != nil {
		e.cache.misses.Add(1)
		mark = e.cache.mark(id)
	}
	var err error
	for range 2 {
		var s *state
		s, err = e.load(ctx, tenant, path)
		if err != nil {
			return nil, versionMeta{}, nil, err
		}
		var vm versionMeta
		if vm, err = live(s, path, version, start.UnixMicro()); err != nil {
			return nil, versionMeta{}, nil, err
		}
		var data []byte
		var sv sealedValue
		data, sv, err = e.sealedValue(ctx, s, tenant, path, vm.Version)
		if err == nil {
			if e.cache != nil {
				e.cache.put(id, newEntry(s, path, start, vm.Version, sv), mark)
			}
			return data, vm, s.meta.custom(), nil
		}
		if !errors.Is(err, ErrNotFound) {
			break
		}
	}
	return nil, versionMeta{}, nil, err
}

// live returns version n (0: the current) of the path if it is live at
// now; a deleted or destroyed one is a *GoneError.
func live(s *state, path string, n int, now int64) (versionMeta, error) {
	if s.meta == nil {
		return versionMeta{}, fmt.Errorf("%w: %s", ErrNotFound, path)
	}
	if n == 0 {
		n = s.meta.Current
	}
	v := s.meta.version(n)
	switch {
	case v == nil:
		return versionMeta{}, fmt.Errorf("%w: %s version %d", ErrNotFound, path, n)
	case v.gone(now):
		return versionMeta{}, &GoneError{Meta: v.public()}
	}
	return *v, nil
}

// Write stores data as a new version of path.
func (e *Engine) Write(ctx context.Context, tenant, path string, data json.RawMessage, cas *int) (Written, error) {
	obj, err := parseObject("data", data)
	if err != nil {
		return Written{}, err
	}
	var out Written
	err = e.update(ctx, tenant, path, func(s *state, cfg MountConfig) (change, error) {
		if err := checkCAS(s, cfg, cas); err != nil {
			return change{}, err
		}
		c := e.addVersion(s, cfg, obj)
		out = c.written()
		return c, nil
	})
	return out, err
}

// written is what the write c makes: its version's metadata and the
// path's custom metadata (a copy).
func (c change) written() Written {
	return Written{VersionMeta: c.meta.version(c.meta.Current).public(), CustomMetadata: c.meta.custom()}
}

// checkCAS checks a write's cas against the path's current version, and
// that there is one if the path or the mount requires it.
func checkCAS(s *state, cfg MountConfig, cas *int) error {
	current := 0
	if s.meta != nil {
		current = s.meta.Current
	}
	switch {
	case cas != nil && *cas < 0:
		return fmt.Errorf("%w: cas %d is negative", ErrInvalid, *cas)
	case cas != nil && *cas != current:
		return ErrCASMismatch
	case cas == nil && (cfg.CASRequired || (s.meta != nil && s.meta.CASRequired)):
		return ErrCASRequired
	}
	return nil
}

// addVersion is the change that adds data as the path's next version,
// its deletion time set by delete_version_after, and drops the versions
// beyond max_versions, oldest first, erasing their values.
func (e *Engine) addVersion(s *state, cfg MountConfig, data []byte) change {
	now := e.clock()
	var m *pathMeta
	if s.meta != nil {
		cp := *s.meta
		cp.Versions = slices.Clone(s.meta.Versions)
		m = &cp
	} else {
		m = newPathMeta(now)
	}
	m.Current++
	m.Updated = now
	v := versionMeta{Version: m.Current, Created: now}
	if d := deleteAfter(m, cfg); d > 0 {
		v.Deleted = now + d.Microseconds()
	}
	m.Versions = append(m.Versions, v)
	var erase []int
	keep := m.Current - maxVersions(m, cfg) // versions up to keep go
	for len(m.Versions) > 0 && m.Versions[0].Version <= keep {
		if !m.Versions[0].Destroyed {
			erase = append(erase, m.Versions[0].Version)
		}
		m.Versions = m.Versions[1:]
	}
	return change{meta: m, add: data, erase: erase}
}

// Patch merges patch into the current version and stores the result as
// a new version.
func (e *Engine) Patch(ctx context.Context, tenant, path string, patch json.RawMessage, cas *int) (Written, error) {
	p, err := parseObject("patch", patch)
	if err != nil {
		return Written{}, err
	}
	var out Written
	err = e.update(ctx, tenant, path, func(s *state, cfg MountConfig) (change, error) {
		if s.meta == nil {
			return change{}, fmt.Errorf("%w: %s", ErrNotFound, path)
		}
		if err := checkCAS(s, cfg, cas); err != nil {
			return change{}, err
		}
		cur, err := live(s, path, 0, e.clock())
		if err != nil {
			return change{}, err
		}
		data, err := e.value(ctx, s, tenant, path, cur.Version)
		if err != nil {
			return change{}, err
		}
		merged, err := applyPatch(data, p)
		if err != nil {
			return change{}, err
		}
		c := e.addVersion(s, cfg, merged)
		out = c.written()
		return c, nil
	})
	return out, err
}

// Subkeys returns the version's keys, every leaf null, to depth.
func (e *Engine) Subkeys(ctx context.Context, tenant, path string, version, depth int) (json.RawMessage, VersionMeta, error) {
	if depth < 0 {
		return nil, VersionMeta{}, fmt.Errorf("%w: depth %d is negative", ErrInvalid, depth)
	}
	data, vm, _, err := e.read(ctx, tenant, path, version)
	if err != nil {
		return nil, VersionMeta{}, err
	}
	keys, err := subkeys(data, depth)
	if err != nil {
		return nil, VersionMeta{}, fmt.Errorf("%w: %s version %d: %w", ErrCorrupt, path, vm.Version, err)
	}
	return keys, vm.public(), nil
}

// Metadata returns the path's metadata.
func (e *Engine) Metadata(ctx context.Context, tenant, path string) (*Metadata, error) {
	if err := e.checkPath(path); err != nil {
		return nil, err
	}
	s, err := e.load(ctx, tenant, path)
	if err != nil {
		return nil, err
	}
	if s.meta == nil {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, path)
	}
	return s.meta.public(path), nil
}

// SetMetadata changes the path's metadata, creating it if absent.
func (e *Engine) SetMetadata(ctx context.Context, tenant, path string, u MetadataUpdate) error {
	return e.setMetadata(ctx, tenant, path, u, false)
}

// PatchMetadata changes the metadata of an existing path, merging the
// custom metadata.
func (e *Engine) PatchMetadata(ctx context.Context, tenant, path string, u MetadataUpdate) error {
	return e.setMetadata(ctx, tenant, path, u, true)
}

func (e *Engine) setMetadata(ctx context.Context, tenant, path string, u MetadataUpdate, patch bool) error {
	return e.update(ctx, tenant, path, func(s *state, _ MountConfig) (change, error) {
		now := e.clock()
		var m *pathMeta
		switch {
		case s.meta != nil:
			cp := *s.meta
			m = &cp
		case patch:
			return change{}, fmt.Errorf("%w: %s", ErrNotFound, path)
		default:
			m = newPathMeta(now)
		}
		if err := m.apply(u, patch); err != nil {
			return change{}, err
		}
		m.Updated = now
		return change{meta: m}, nil
	})
}

// DeleteMetadata erases the path and every version of it.
func (e *Engine) DeleteMetadata(ctx context.Context, tenant, path string) error {
	if err := e.checkPath(path); err != nil {
		return err
	}
	if _, err := e.key(ctx, tenant, false); err != nil {
		return err
	}
	err := e.st.DeleteSecret(ctx, tenant, path)
	e.changed(ctx, tenant, path)
	return err
}

// Delete soft-deletes versions (none: the current one).
func (e *Engine) Delete(ctx context.Context, tenant, path string, versions []int) error {
	if err := checkVersions(versions, true); err != nil {
		return err
	}
	return e.update(ctx, tenant, path, func(s *state, _ MountConfig) (change, error) {
		if s.meta == nil {
			return change{}, nil
		}
		now := e.clock()
		todo := versions
		if len(todo) == 0 {
			todo = []int{s.meta.Current}
		}
		return s.eachVersion(todo, func(v *versionMeta) bool {
			if v.gone(now) {
				return false
			}
			v.Deleted = now
			return true
		}), nil
	})
}

// Undelete clears the deletion of versions; delete_version_after, if
// set, runs again from now (as Vault).
func (e *Engine) Undelete(ctx context.Context, tenant, path string, versions []int) error {
	if err := checkVersions(versions, false); err != nil {
		return err
	}
	return e.update(ctx, tenant, path, func(s *state, cfg MountConfig) (change, error) {
		if s.meta == nil {
			return change{}, nil
		}
		now := e.clock()
		var again int64
		if d := deleteAfter(s.meta, cfg); d > 0 {
			again = now + d.Microseconds()
		}
		return s.eachVersion(versions, func(v *versionMeta) bool {
			if v.Destroyed || v.Deleted == again {
				return false
			}
			v.Deleted = again
			return true
		}), nil
	})
}

// Destroy erases the versions' values for good.
func (e *Engine) Destroy(ctx context.Context, tenant, path string, versions []int) error {
	if err := checkVersions(versions, false); err != nil {
		return err
	}
	return e.update(ctx, tenant, path, func(s *state, _ MountConfig) (change, error) {
		if s.meta == nil {
			return change{}, nil
		}
		var erase []int
		c := s.eachVersion(versions, func(v *versionMeta) bool {
			if v.Destroyed {
				return false
			}
			v.Destroyed = true
			erase = append(erase, v.Version)
			return true
		})
		c.erase = erase
		return c, nil
	})
}

// checkVersions checks the version numbers of Delete (none: the current,
// when noneOK), Undelete and Destroy.
func checkVersions(versions []int, noneOK bool) error {
	if len(versions) == 0 && !noneOK {
		return fmt.Errorf("%w: no version number given", ErrInvalid)
	}
	for _, v := range versions {
		if v < 1 {
			return fmt.Errorf("%w: version %d, want 1 or more", ErrInvalid, v)
		}
	}
	return nil
}

// eachVersion applies f to the kept versions among versions (the others
// are skipped, as Vault does); the change stores the metadata if f
// changed any.
func (s *state) eachVersion(versions []int, f func(v *versionMeta) bool) change {
	m := *s.meta
	m.Versions = slices.Clone(s.meta.Versions)
	changed := false
	for _, n := range versions {
		if v := m.version(n); v != nil && f(v) {
			changed = true
		}
	}
	if !changed {
		return change{}
	}
	return change{meta: &m}
}

// listPage is how many paths List reads from the store at a time (a
// variable for tests).
var listPage = 1000

// List returns the names directly under the folder prefix. A folder
// holding many paths is skipped past in one read, not listed through.
func (e *Engine) List(ctx context.Context, tenant, prefix string) ([]string, error) {
	if err := e.checkFolder(prefix); err != nil {
		return nil, err
	}
	if _, err := e.key(ctx, tenant, false); err != nil {
		return nil, err
	}
	var names []string
	start, skip := prefix, ""
	for {
		paths, err := e.st.ListSecrets(ctx, tenant, prefix, start, listPage)
		if err != nil {
			return nil, err
		}
		for _, p := range paths {
			if skip != "" && strings.HasPrefix(p, skip) {
				continue
			}
			if !e.internal && strings.HasPrefix(p, InternalPrefix) {
				// keygate's own records are listed only in their view: the
				// next page starts past them ('A' follows '@').
				start = max(start, "A")
				continue
			}
			rest := p[len(prefix):]
			if i := strings.IndexByte(rest, '/'); i >= 0 {
				names = append(names, rest[:i+1])
				// '0' follows '/': the next page starts past the folder.
				skip, start = prefix+rest[:i+1], prefix+rest[:i]+"0"
				continue
			}
			names = append(names, rest)
			skip, start = "", p+"\x01" // no path holds a NUL: p+"\x01" is the least after p
		}
		if len(paths) < listPage {
			break
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: folder %q", ErrNotFound, prefix)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// checkFolder checks a List prefix for the view.
func (e *Engine) checkFolder(prefix string) error {
	if !e.internal {
		return ValidFolder(prefix)
	}
	p, ok := strings.CutSuffix(prefix, "/")
	if !ok {
		return fmt.Errorf("%w: a folder ends with '/'", ErrInvalid)
	}
	return validInternal(p)
}

// Config returns the tenant's mount configuration.
func (e *Engine) Config(ctx context.Context, tenant string) (MountConfig, error) {
	if _, err := e.key(ctx, tenant, false); err != nil {
		return MountConfig{}, err
	}
	return e.config(ctx, tenant)
}

// SetConfig replaces the tenant's mount configuration.
func (e *Engine) SetConfig(ctx context.Context, tenant string, c MountConfig) error {
	if err := checkConfig(c); err != nil {
		return err
	}
	if _, err := e.key(ctx, tenant, false); err != nil {
		return err
	}
	raw, err := json.Marshal(mountConfig(c))
	if err != nil {
		return err
	}
	err = e.st.SetSecretConfig(ctx, tenant, raw)
	e.configChanged(ctx, tenant)
	if errors.Is(err, store.ErrNotFound) { // deleted meanwhile
		return fmt.Errorf("%w: tenant %q", ErrNotFound, tenant)
	}
	return err
}
