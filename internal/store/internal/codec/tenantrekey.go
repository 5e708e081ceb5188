package codec

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/keygate/keygate/internal/store"
)

// tenantRekeyJSON is a tenant_rekeys row's body (the tenant and the
// revision are columns). Times are RFC 3339 with nanoseconds.
type tenantRekeyJSON struct {
	ID         string    `json:"id"`
	State      string    `json:"state"`
	Version    int       `json:"version"`
	Rate       int       `json:"rate,omitempty"`
	Done       int64     `json:"done"`
	Total      int64     `json:"total"`
	Failed     string    `json:"failed,omitempty"`
	Worker     string    `json:"worker,omitempty"`
	LeaseUntil time.Time `json:"lease_until"`
	StartedAt  time.Time `json:"started_at"`
	UpdatedAt  time.Time `json:"updated_at"`
	FinishedAt time.Time `json:"finished_at"`
}

// EncodeTenantRekey is a tenant_rekeys row's body for r.
func EncodeTenantRekey(r store.TenantRekey) ([]byte, error) {
	if r.ID == "" || r.Version < 1 || (r.State != store.TenantRekeyRewrapping && r.State != store.TenantRekeyDone) {
		return nil, fmt.Errorf("%w: tenant rekey state needs an id, a version and a known state, not %q", store.ErrInvalid, r.State)
	}
	return json.Marshal(tenantRekeyJSON{ID: r.ID, State: r.State, Version: r.Version, Rate: r.Rate, Done: r.Done,
		Total: r.Total, Failed: r.Failed, Worker: r.Worker, LeaseUntil: r.LeaseUntil.UTC(), StartedAt: r.StartedAt.UTC(),
		UpdatedAt: r.UpdatedAt.UTC(), FinishedAt: r.FinishedAt.UTC()})
}

// DecodeTenantRekey reads EncodeTenantRekey's body back, with its row's
// tenant and revision.
func DecodeTenantRekey(tenant string, body []byte, revision int64) (store.TenantRekey, error) {
	var j tenantRekeyJSON
	if err := json.Unmarshal(body, &j); err != nil {
		return store.TenantRekey{}, fmt.Errorf("tenant %q rekey state: %w", tenant, err)
	}
	return store.TenantRekey{Tenant: tenant, ID: j.ID, State: j.State, Version: j.Version, Rate: j.Rate, Done: j.Done,
		Total: j.Total, Failed: j.Failed, Worker: j.Worker, LeaseUntil: j.LeaseUntil, StartedAt: j.StartedAt,
		UpdatedAt: j.UpdatedAt, FinishedAt: j.FinishedAt, Revision: revision}, nil
}
