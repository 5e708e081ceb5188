package codec

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/keygate/keygate/internal/store"
)

// rekeyJSON is the rekey row's body. Times are RFC 3339 with nanoseconds;
// byte fields base64, as encoding/json writes them.
type rekeyJSON struct {
	ID         string    `json:"id"`
	State      string    `json:"state"`
	OldKeyID   string    `json:"old_key_id"`
	NewKeyID   string    `json:"new_key_id"`
	NewByOld   []byte    `json:"new_by_old,omitempty"`
	OldByNew   []byte    `json:"old_by_new,omitempty"`
	Header     []byte    `json:"header,omitempty"`
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

// EncodeRekey is the rekey row's body for r (its Revision is a column).
func EncodeRekey(r store.Rekey) ([]byte, error) {
	if r.ID == "" || (r.State != store.RekeyRewrapping && r.State != store.RekeyDone) {
		return nil, fmt.Errorf("%w: rekey state needs an id and a known state, not %q", store.ErrInvalid, r.State)
	}
	return json.Marshal(rekeyJSON{ID: r.ID, State: r.State, OldKeyID: r.OldKeyID, NewKeyID: r.NewKeyID,
		NewByOld: r.NewByOld, OldByNew: r.OldByNew, Header: r.Header, Rate: r.Rate, Done: r.Done, Total: r.Total,
		Failed: r.Failed, Worker: r.Worker, LeaseUntil: r.LeaseUntil.UTC(), StartedAt: r.StartedAt.UTC(),
		UpdatedAt: r.UpdatedAt.UTC(), FinishedAt: r.FinishedAt.UTC()})
}

// DecodeRekey reads EncodeRekey's body back, with its row's revision.
func DecodeRekey(body []byte, revision int64) (store.Rekey, error) {
	var j rekeyJSON
	if err := json.Unmarshal(body, &j); err != nil {
		return store.Rekey{}, fmt.Errorf("rekey state: %w", err)
	}
	return store.Rekey{ID: j.ID, State: j.State, OldKeyID: j.OldKeyID, NewKeyID: j.NewKeyID, NewByOld: nilIfEmpty(j.NewByOld),
		OldByNew: nilIfEmpty(j.OldByNew), Header: nilIfEmpty(j.Header), Rate: j.Rate, Done: j.Done, Total: j.Total, Failed: j.Failed,
		Worker: j.Worker, LeaseUntil: j.LeaseUntil, StartedAt: j.StartedAt, UpdatedAt: j.UpdatedAt,
		FinishedAt: j.FinishedAt, Revision: revision}, nil
}

// nilIfEmpty is b, or nil when b is empty: an empty sealed key is none.
func nilIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}
