package vaultsys

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/keygate/keygate/internal/audit/httpaudit"
	"github.com/keygate/keygate/internal/httperr"
	"github.com/keygate/keygate/internal/vaultauth"
)

// Mount is a secrets engine mounted at Path.
type Mount struct {
	Path        string            // ending in '/': "secret/"
	Type        string            // Vault's engine type: "kv", "transit"
	Description string            // shown by vault secrets list
	Options     map[string]string // {"version": "2"} for KV version 2; nil: none
}

// keygate's engines, as Vault's clients expect to find them.
var (
	KVv2Mount    = Mount{Path: "secret/", Type: "kv", Description: "keygate's versioned secret store", Options: map[string]string{"version": "2"}}
	TransitMount = Mount{Path: "transit/", Type: "transit", Description: "keygate's transit engine"}
)

// MountsOptions configure the mounts handler.
type MountsOptions struct {
	Verifier vaultauth.Verifier // required: the token service's own tokens
	Mounts   []Mount            // what is mounted (KVv2Mount, TransitMount, ...)
	Sealed   func() bool        // nil: never sealed
	Logger   *slog.Logger       // nil discards
}

// mountOut is a mount as Vault describes it.
type mountOut struct {
	Accessor              string            `json:"accessor"`
	Config                mountConfig       `json:"config"`
	Description           string            `json:"description"`
	ExternalEntropyAccess bool              `json:"external_entropy_access"`
	Local                 bool              `json:"local"`
	Options               map[string]string `json:"options"`
	Path                  string            `json:"path,omitempty"` // ui/mounts only
	PluginVersion         string            `json:"plugin_version"`
	RunningPluginVersion  string            `json:"running_plugin_version"`
	RunningSha256         string            `json:"running_sha256"`
	SealWrap              bool              `json:"seal_wrap"`
	Type                  string            `json:"type"`
	UUID                  string            `json:"uuid"`
}

type mountConfig struct {
	DefaultLeaseTTL int  `json:"default_lease_ttl"`
	ForceNoCache    bool `json:"force_no_cache"`
	MaxLeaseTTL     int  `json:"max_lease_ttl"`
}

// out describes m. Its accessor and uuid are derived from its path and
// type, so that every node of a fleet names a mount the same.
func (m Mount) out() mountOut {
	sum := sha256.Sum256([]byte("keygate mount\x00" + m.Type + "\x00" + m.Path))
	h := hex.EncodeToString(sum[:16])
	return mountOut{Accessor: m.Type + "_" + h[:8], Description: m.Description, Options: m.Options,
		RunningPluginVersion: "keygate", Type: m.Type, UUID: h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]}
}

type mountsHandler struct {
	o      MountsOptions
	mounts []Mount
}

// NewMounts returns the handler of MountsPath and of every path under
// UIMountsPrefix: GET, with a valid token.
func NewMounts(o MountsOptions) (http.Handler, error) {
	if o.Verifier == nil {
		return nil, errors.New("vaultsys.MountsOptions: Verifier is required")
	}
	for _, m := range o.Mounts {
		if m.Type == "" || !strings.HasSuffix(m.Path, "/") || strings.Count(m.Path, "/") != 1 {
			return nil, errors.New("vaultsys.MountsOptions: a mount has a type, and a path of one segment ending in '/'")
		}
	}
	o.Logger = discard(o.Logger)
	return &mountsHandler{o: o, mounts: slices.Clone(o.Mounts)}, nil
}

func (h *mountsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := h.serve(w, r); err != nil {
		writeError(w, r, h.o.Logger, err)
	}
}

func (h *mountsHandler) serve(w http.ResponseWriter, r *http.Request) error {
	if h.o.Sealed != nil && h.o.Sealed() {
		return errSealed
	}
	if _, _, err := vaultauth.Authenticate(r.Context(), r.Header, h.o.Verifier); err != nil {
		return err
	}
	p := r.URL.Path
	ui, isUI := strings.CutPrefix(p, UIMountsPrefix)
	if p != MountsPath && !isUI {
		return errNoPath
	}
	if r.Method != http.MethodGet {
		return errMethod
	}
	if !isUI {
		return h.list(w, r)
	}
	if ui == "" { // Vault's ui/mounts of nothing: every mount, by kind
		secret := make(map[string]mountOut, len(h.mounts))
		for _, m := range h.mounts {
			secret[m.Path] = m.out()
		}
		writeJSON(w, r, h.o.Logger, http.StatusOK, vaultauth.Envelope{RequestID: vaultauth.RequestID(httpaudit.From(w)),
			Data: map[string]any{"auth": map[string]any{}, "secret": secret}})
		return nil
	}
	for _, m := range h.mounts {
		if strings.HasPrefix(strings.TrimSuffix(ui, "/")+"/", m.Path) {
			out := m.out()
			out.Path = m.Path
			writeJSON(w, r, h.o.Logger, http.StatusOK, vaultauth.Envelope{RequestID: vaultauth.RequestID(httpaudit.From(w)), Data: out})
			return nil
		}
	}
	// Vault's answer for a path under no mount: a 403, so that this path
	// cannot be used to find which mounts exist.
	return &httperr.Error{Status: http.StatusForbidden, Code: "permission_denied",
		Description: "preflight capability check returned 403, please ensure client's policies grant access to path \"" +
			strings.ToValidUTF8(ui, "\uFFFD") + "\""}
}

// list answers sys/mounts: the mounts in the envelope's data and, as
// Vault still does for its oldest clients, at the top level too.
func (h *mountsHandler) list(w http.ResponseWriter, r *http.Request) error {
	data := make(map[string]mountOut, len(h.mounts))
	for _, m := range h.mounts {
		data[m.Path] = m.out()
	}
	top := map[string]any{"request_id": vaultauth.RequestID(httpaudit.From(w)), "lease_id": "", "renewable": false, "lease_duration": 0,
		"data": data, "wrap_info": nil, "warnings": nil, "auth": nil}
	for p, m := range data {
		top[p] = m
	}
	writeJSON(w, r, h.o.Logger, http.StatusOK, top)
	return nil
}
