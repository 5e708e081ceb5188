package kvapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/keygate/keygate/internal/secrets"
)

// versionOut is a version's metadata as Vault answers it (its members in
// Vault's order, the alphabetical one of a Go map).
type versionOut struct {
	CreatedTime    string            `json:"created_time"`
	CustomMetadata map[string]string `json:"custom_metadata"`
	DeletionTime   string            `json:"deletion_time"`
	Destroyed      bool              `json:"destroyed"`
	Version        int               `json:"version"`
}

func versionOf(m secrets.VersionMeta, custom map[string]string) versionOut {
	return versionOut{CreatedTime: timeString(m.CreatedTime), CustomMetadata: custom,
		DeletionTime: timeString(m.DeletionTime), Destroyed: m.Destroyed, Version: m.Version}
}

// timeString is a time as Vault writes it: RFC 3339 in UTC with
// nanoseconds (trailing zeros dropped); "" for none.
func timeString(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// customOf is the path's custom metadata, which Vault shows with every
// version it answers about; nil when it has none or it cannot be read
// (the answer is about the version, which was read).
func (h *Handler) customOf(c *call) map[string]string {
	m, err := h.svc.Metadata(c.ctx, c.tenant, c.path)
	if err != nil || len(m.CustomMetadata) == 0 {
		return nil
	}
	return m.CustomMetadata
}

// gone answers a read of a deleted or destroyed version as Vault does:
// 404 with the envelope, the data null (under key) and the version's
// metadata. It reports whether err was one.
func (h *Handler) gone(c *call, err error, key string) bool {
	var g *secrets.GoneError
	if !errors.As(err, &g) {
		return false
	}
	c.status, c.o.Version, c.o.Reason = http.StatusNotFound, g.Meta.Version, "deleted"
	if g.Meta.Destroyed {
		c.o.Reason = "destroyed"
	}
	c.out = map[string]any{key: nil, "metadata": versionOf(g.Meta, h.customOf(c))}
	return true
}

func (h *Handler) read(c *call) error {
	v, err := queryInt(c.r, "version")
	if err != nil {
		return err
	}
	s, err := h.svc.Read(c.ctx, c.tenant, c.path, v)
	if h.gone(c, err, "data") {
		return nil
	} else if err != nil {
		return err
	}
	c.o.Version = s.Meta.Version
	c.out = readOut{Data: s.Data, Metadata: versionOf(s.Meta, s.CustomMetadata)}
	return nil
}

// dataAndCAS reads a data write's or patch's body: {"data":{…},
// "options":{"cas":N}}.
func (h *Handler) dataAndCAS(c *call) (json.RawMessage, *int, error) {
	p, err := h.readParams(c)
	if err != nil {
		return nil, nil, err
	}
	if !p.has("data") {
		return nil, nil, badRequest("no data provided")
	}
	// The body parsed as JSON, so data is JSON: an object if it begins
	// with '{' (the engine checks it through).
	data := p["data"]
	if v := bytes.TrimLeft(data, " \t\r\n"); len(v) == 0 || v[0] != '{' {
		return nil, nil, badRequest("invalid data provided: data is not a JSON object")
	}
	opts, err := p.object("options")
	if err != nil {
		return nil, nil, err
	}
	cas, err := opts.integer("cas")
	if err != nil {
		return nil, nil, badRequest("error parsing check-and-set parameter")
	}
	return data, cas, nil
}

func (h *Handler) write(c *call) error {
	data, cas, err := h.dataAndCAS(c)
	if err != nil {
		return err
	}
	m, err := h.svc.Write(c.ctx, c.tenant, c.path, data, cas)
	return h.written(c, m, err)
}

func (h *Handler) patch(c *call) error {
	if err := checkMergePatch(c.r); err != nil {
		return err
	}
	data, cas, err := h.dataAndCAS(c)
	if err != nil {
		return err
	}
	m, err := h.svc.Patch(c.ctx, c.tenant, c.path, data, cas)
	return h.written(c, m, err)
}

// written answers a write or a patch: the new version's metadata, with
// the path's custom metadata as the write stored it (not read again).
func (h *Handler) written(c *call, m secrets.Written, err error) error {
	if err != nil {
		return err
	}
	c.o.Version = m.Version
	c.out = versionOf(m.VersionMeta, m.CustomMetadata)
	return nil
}

func (h *Handler) deleteLatest(c *call) error {
	return h.svc.Delete(c.ctx, c.tenant, c.path, nil)
}

// versionsOp reads the body's versions and hands them to do.
func (h *Handler) versionsOp(c *call, do func(*call, []int) error) error {
	p, err := h.readParams(c)
	if err != nil {
		return err
	}
	vs, err := p.versions()
	if err != nil {
		return err
	}
	if len(vs) == 1 {
		c.o.Version = vs[0]
	}
	return do(c, vs)
}

func (h *Handler) deleteVersions(c *call) error {
	return h.versionsOp(c, func(c *call, vs []int) error { return h.svc.Delete(c.ctx, c.tenant, c.path, vs) })
}

func (h *Handler) undelete(c *call) error {
	return h.versionsOp(c, func(c *call, vs []int) error { return h.svc.Undelete(c.ctx, c.tenant, c.path, vs) })
}

func (h *Handler) destroy(c *call) error {
	return h.versionsOp(c, func(c *call, vs []int) error { return h.svc.Destroy(c.ctx, c.tenant, c.path, vs) })
}

func (h *Handler) subkeys(c *call) error {
	v, err := queryInt(c.r, "version")
	if err != nil {
		return err
	}
	depth, err := queryInt(c.r, "depth")
	if err != nil {
		return err
	}
	keys, m, err := h.svc.Subkeys(c.ctx, c.tenant, c.path, v, depth)
	if h.gone(c, err, "subkeys") {
		return nil
	} else if err != nil {
		return err
	}
	c.o.Version = m.Version
	c.out = struct {
		Metadata versionOut      `json:"metadata"`
		Subkeys  json.RawMessage `json:"subkeys"`
	}{versionOf(m, h.customOf(c)), keys}
	return nil
}

// metadataOut is a path's metadata as Vault answers it.
type metadataOut struct {
	CASRequired        bool                   `json:"cas_required"`
	CreatedTime        string                 `json:"created_time"`
	CurrentVersion     int                    `json:"current_version"`
	CustomMetadata     map[string]string      `json:"custom_metadata"`
	DeleteVersionAfter string                 `json:"delete_version_after"`
	MaxVersions        int                    `json:"max_versions"`
	OldestVersion      int                    `json:"oldest_version"`
	UpdatedTime        string                 `json:"updated_time"`
	Versions           map[string]versionItem `json:"versions"`
}

type versionItem struct {
	CreatedTime  string `json:"created_time"`
	DeletionTime string `json:"deletion_time"`
	Destroyed    bool   `json:"destroyed"`
}

func (h *Handler) metadataRead(c *call) error {
	m, err := h.svc.Metadata(c.ctx, c.tenant, c.path)
	if err != nil {
		return err
	}
	out := metadataOut{CASRequired: m.CASRequired, CreatedTime: timeString(m.CreatedTime), CurrentVersion: m.CurrentVersion,
		CustomMetadata: m.CustomMetadata, DeleteVersionAfter: m.DeleteVersionAfter.String(), MaxVersions: m.MaxVersions,
		OldestVersion: m.OldestVersion, UpdatedTime: timeString(m.UpdatedTime), Versions: make(map[string]versionItem, len(m.Versions))}
	for _, v := range m.Versions {
		out.Versions[strconv.Itoa(v.Version)] = versionItem{timeString(v.CreatedTime), timeString(v.DeletionTime), v.Destroyed}
	}
	c.o.Version = m.CurrentVersion
	c.out = out
	return nil
}

// metadataUpdate reads a metadata write's or patch's body.
func (h *Handler) metadataUpdate(c *call, patch bool) (secrets.MetadataUpdate, error) {
	var u secrets.MetadataUpdate
	p, err := h.readParams(c)
	if err != nil {
		return u, err
	}
	if u.MaxVersions, err = p.integer("max_versions"); err != nil {
		return u, err
	}
	if u.CASRequired, err = p.boolean("cas_required"); err != nil {
		return u, err
	}
	if u.DeleteVersionAfter, err = p.duration("delete_version_after"); err != nil {
		return u, err
	}
	u.CustomMetadata, err = p.customMetadata(patch)
	return u, err
}

func (h *Handler) metadataWrite(c *call) error {
	u, err := h.metadataUpdate(c, false)
	if err != nil {
		return err
	}
	return h.svc.SetMetadata(c.ctx, c.tenant, c.path, u)
}

func (h *Handler) metadataPatch(c *call) error {
	if err := checkMergePatch(c.r); err != nil {
		return err
	}
	u, err := h.metadataUpdate(c, true)
	if err != nil {
		return err
	}
	return h.svc.PatchMetadata(c.ctx, c.tenant, c.path, u)
}

func (h *Handler) metadataDelete(c *call) error {
	return h.svc.DeleteMetadata(c.ctx, c.tenant, c.path)
}

func (h *Handler) list(c *call) error {
	keys, err := h.svc.List(c.ctx, c.tenant, c.path)
	if err != nil {
		return err
	}
	if len(keys) == 0 {
		return errNotFound
	}
	c.out = struct {
		Keys []string `json:"keys"`
	}{keys}
	return nil
}

// configOut is the mount's configuration as Vault answers it.
type configOut struct {
	CASRequired        bool   `json:"cas_required"`
	DeleteVersionAfter string `json:"delete_version_after"`
	MaxVersions        int    `json:"max_versions"`
}

func (h *Handler) configRead(c *call) error {
	mc, err := h.svc.Config(c.ctx, c.tenant)
	if err != nil {
		return err
	}
	c.out = configOut{mc.CASRequired, mc.DeleteVersionAfter.String(), mc.MaxVersions}
	return nil
}

// configWrite changes the members the body holds, as Vault does.
func (h *Handler) configWrite(c *call) error {
	p, err := h.readParams(c)
	if err != nil {
		return err
	}
	maxV, err := p.integer("max_versions")
	if err != nil {
		return err
	}
	cas, err := p.boolean("cas_required")
	if err != nil {
		return err
	}
	dva, err := p.duration("delete_version_after")
	if err != nil || (maxV == nil && cas == nil && dva == nil) {
		return err
	}
	mc, err := h.svc.Config(c.ctx, c.tenant)
	if err != nil {
		return err
	}
	if maxV != nil {
		mc.MaxVersions = *maxV
	}
	if cas != nil {
		mc.CASRequired = *cas
	}
	if dva != nil {
		mc.DeleteVersionAfter = *dva
	}
	return h.svc.SetConfig(c.ctx, c.tenant, mc)
}
