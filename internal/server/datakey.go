package server

import (
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/keygate/keygate/internal/audit/httpaudit"
	"github.com/keygate/keygate/internal/httperr"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/store"
)

// A tenant's data key on the admin listener, both with the admin token:
// POST /v1/admin/tenants/{name}/data-key/rotate rotates it
// (node.StartTenantRekey) and GET /v1/admin/tenants/{name}/data-key
// reports its versions and the last rotation's progress.

// Audit operations of the data-key endpoints.
const (
	dataKeyRotateOp = "admin.tenants.data_key.rotate"
	dataKeyReadOp   = "admin.tenants.data_key.read"
)

// maxDataKeyBody bounds the rotation's body: {"rate": N} at most.
const maxDataKeyBody = 1 << 10

func (s *Server) rotateDataKey(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Cache-Control", "no-store")
	note := httpaudit.From(w)
	note.Admin()
	tenant := r.PathValue("name")
	if err := store.ValidTenantName(tenant); err != nil {
		return invalidDataKeyRequest("the tenant name is not valid")
	}
	note.Tenant(tenant)
	var in struct {
		Rate int `json:"rate"`
	}
	if err := decodeOptionalJSON(w, r, &in); err != nil {
		return err
	}
	if in.Rate < 0 {
		return invalidDataKeyRequest("rate must be 0 (no bound) or a number of records per second")
	}
	if err := note.Intent(r.Context()); err != nil {
		return err
	}
	st, err := s.node.StartTenantRekey(r.Context(), tenant, in.Rate)
	if err != nil {
		return s.dataKeyError(err)
	}
	note.Key("data-key", st.Version)
	s.log.Warn("tenant data key rotation started by the admin API", "remote", r.RemoteAddr, "tenant", tenant,
		"rotation", st.ID, "version", st.Version)
	writeJSON(w, http.StatusAccepted, dataKeyJSON(st))
	return nil
}

func (s *Server) getDataKey(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Cache-Control", "no-store")
	httpaudit.From(w).Admin()
	tenant := r.PathValue("name")
	if err := store.ValidTenantName(tenant); err != nil {
		return invalidDataKeyRequest("the tenant name is not valid")
	}
	httpaudit.From(w).Tenant(tenant)
	st, err := s.node.TenantRekeyStatus(r.Context(), tenant)
	if err != nil {
		return s.dataKeyError(err)
	}
	writeJSON(w, http.StatusOK, dataKeyJSON(st))
	return nil
}

// decodeOptionalJSON reads a small JSON object body into v (see
// readStrict); an empty body leaves v as it is. A body must come as
// application/json, and not from a browser page.
func decodeOptionalJSON(w http.ResponseWriter, r *http.Request, v any) error {
	if _, ok := r.Header["Origin"]; ok {
		return &httperr.Error{Status: http.StatusForbidden, Code: "forbidden",
			Description: "requests with an Origin header (from a browser page) are refused"}
	}
	if r.ContentLength != 0 {
		if err := checkSysPost(r); err != nil {
			return err
		}
	}
	switch _, err := readStrict(w, r, maxDataKeyBody, v); {
	case errors.Is(err, io.EOF):
		return nil
	case err != nil:
		return invalidDataKeyRequest(`the body must be {"rate": <records per second>} or empty: ` + err.Error())
	}
	return nil
}

func (s *Server) dataKeyError(err error) error {
	var refused *node.RefusedError
	switch {
	case errors.Is(err, node.ErrTenantUnknown):
		return &httperr.Error{Status: http.StatusNotFound, Code: "not_found", Description: "no such tenant"}
	case errors.Is(err, node.ErrTenantRekeyRunning):
		return &httperr.Error{Status: http.StatusConflict, Code: "rotation_running", Description: err.Error()}
	case errors.Is(err, node.ErrRekeySealed):
		return &httperr.Error{Status: http.StatusServiceUnavailable, Code: "sealed", Description: "the node is sealed"}
	case errors.As(err, &refused):
		return &httperr.Error{Status: http.StatusConflict, Code: "refused", Description: refused.Reason}
	}
	s.log.Error("tenant data key: the store failed", "err", err)
	return errStoreUnavailable
}

func invalidDataKeyRequest(desc string) error {
	return &httperr.Error{Status: http.StatusBadRequest, Code: "invalid_request", Description: desc}
}

// dataKeyJSON is a tenant's data key and its last rotation as the
// endpoints answer them.
func dataKeyJSON(st node.TenantRekeyStatus) map[string]any {
	versions := st.Versions
	if versions == nil {
		versions = []uint32{}
	}
	out := map[string]any{"tenant": st.Tenant, "current_version": st.Current, "versions": versions}
	if st.ID == "" {
		out["rotation"] = map[string]any{"state": "none"}
		return out
	}
	rot := map[string]any{"id": st.ID, "state": st.State, "version": st.Version, "done": st.Done, "total": st.Total,
		"rate": st.Rate, "started_at": st.StartedAt.Format(time.RFC3339Nano), "updated_at": st.UpdatedAt.Format(time.RFC3339Nano)}
	if st.Worker != "" {
		rot["worker"] = st.Worker
	}
	if st.Failed != "" {
		rot["failed"] = st.Failed
	}
	if !st.FinishedAt.IsZero() {
		rot["finished_at"] = st.FinishedAt.Format(time.RFC3339Nano)
	}
	out["rotation"] = rot
	return out
}
