package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/keygate/keygate/internal/audit/httpaudit"
	"github.com/keygate/keygate/internal/httperr"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/rootkey"
	"github.com/keygate/keygate/internal/telemetry"
)

// The root-key rotation endpoints on the admin listener, both with the
// admin token: POST /v1/sys/rekey starts one (node.StartRekey), GET
// /v1/sys/rekey reports its progress. The new key and the current one
// travel in the body as unseal's do, and are never logged or recorded.

// rekeyRequest carries the new key or passphrase, and optionally the
// current one (otherwise the node reads its own key file or variable).
type rekeyRequest struct {
	Key               string `json:"key"`
	Passphrase        string `json:"passphrase"`
	CurrentKey        string `json:"current_key"`
	CurrentPassphrase string `json:"current_passphrase"`
	Rate              int    `json:"rate"`
}

var errAdminRequired = &httperr.Error{Status: http.StatusUnauthorized, Code: "unauthorized",
	Description: "the admin token is required", Challenge: `Bearer realm="keygate-admin"`}

func (s *Server) startRekey(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Cache-Control", "no-store")
	if err := checkSysPost(r); err != nil {
		return err
	}
	if !s.guards.operator.Allows(r) {
		return errAdminRequired
	}
	note := httpaudit.From(w)
	note.Admin()
	var in rekeyRequest
	raw, err := readStrict(w, r, MaxUnsealBody, &in)
	defer clear(raw)
	if err != nil {
		// The error names a field, never a value.
		return badUnseal(`the body must be {"key":"<base64 root key>"} or {"passphrase":"..."}, with "current_key" or "current_passphrase" and "rate" if wanted: ` + err.Error())
	}
	if in.Rate < 0 {
		return badUnseal("rate must be 0 (no bound) or a number of records per second")
	}
	req := node.RekeyRequest{Rate: in.Rate}
	for _, k := range []struct {
		text string
		dst  *rootkey.Key
		name string
	}{{in.Key, &req.NewKey, "key"}, {in.CurrentKey, &req.CurrentKey, "current_key"}} {
		if k.text == "" {
			continue
		}
		key, err := rootkey.ParseKey([]byte(strings.TrimSpace(k.text)))
		if err != nil {
			return badUnseal(k.name + " is not a base64 root key of 32 bytes")
		}
		defer key.Destroy()
		*k.dst = key
	}
	req.NewPassphrase, req.CurrentPassphrase = []byte(in.Passphrase), []byte(in.CurrentPassphrase)
	defer clear(req.NewPassphrase)
	defer clear(req.CurrentPassphrase)
	if err := note.Intent(r.Context()); err != nil {
		return err
	}
	st, err := s.node.StartRekey(r.Context(), req)
	var refused *node.RefusedError
	switch {
	case err == nil:
	case errors.As(err, &refused):
		return badUnseal(refused.Reason)
	case errors.Is(err, node.ErrRekeyRunning):
		return &httperr.Error{Status: http.StatusConflict, Code: "rekey_running", Description: err.Error()}
	case errors.Is(err, node.ErrRekeySealed):
		return &httperr.Error{Status: http.StatusServiceUnavailable, Code: "sealed", Description: err.Error()}
	case errors.Is(err, node.ErrStore):
		s.log.Error("root key rotation: the store failed", "err", err)
		return errStoreUnavailable
	default:
		return err
	}
	note.Key(st.NewKeyID, 0)
	s.log.Warn("root key rotation started by the admin API", "remote", r.RemoteAddr, "rekey", st.ID, "new", st.NewKeyID)
	writeJSON(w, http.StatusAccepted, rekeyJSON(st))
	return nil
}

func (s *Server) getRekey(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Cache-Control", "no-store")
	if !s.guards.operator.Allows(r) {
		return errAdminRequired
	}
	st, err := s.node.RekeyStatus(r.Context())
	if err != nil {
		s.log.Error("root key rotation: the store failed", "err", err)
		return errStoreUnavailable
	}
	writeJSON(w, http.StatusOK, rekeyJSON(st))
	return nil
}

// rekeyScrapeTimeout bounds the store read behind the rotation's metrics:
// a store that does not answer leaves them out of that scrape rather than
// holding the scrape.
const rekeyScrapeTimeout = 2 * time.Second

// rekeyStats is the rotation's state for the metrics: the status GET
// /v1/sys/rekey answers, read from the store at each scrape (one query;
// the node reads it every node.RekeyPoll anyway).
func (s *Server) rekeyStats() (telemetry.RekeyStats, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), rekeyScrapeTimeout)
	defer cancel()
	st, err := s.node.RekeyStatus(ctx)
	if err != nil {
		s.log.Warn("root key rotation metrics: reading the state failed", "err", err)
		return telemetry.RekeyStats{}, false
	}
	return telemetry.RekeyStats{Rewrapping: st.Rewrapping(), Done: st.Done, Total: st.Total}, true
}

// rekeyJSON is a rotation's status as the endpoints answer it.
func rekeyJSON(st node.RekeyStatus) map[string]any {
	out := map[string]any{"state": st.State, "holds": st.Holds}
	if st.State == "" {
		out["state"] = "none"
		return out
	}
	out["id"], out["old_key_id"], out["new_key_id"] = st.ID, st.OldKeyID, st.NewKeyID
	out["done"], out["total"], out["rate"] = st.Done, st.Total, st.Rate
	out["started_at"], out["updated_at"] = st.StartedAt.Format(time.RFC3339Nano), st.UpdatedAt.Format(time.RFC3339Nano)
	if st.Worker != "" {
		out["worker"] = st.Worker
	}
	if st.Failed != "" {
		out["failed"] = st.Failed
	}
	if !st.FinishedAt.IsZero() {
		out["finished_at"] = st.FinishedAt.Format(time.RFC3339Nano)
	}
	return out
}
