package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
)

// nodeStatus is what keygate status gathers from a node's admin listener;
// every part is what one endpoint answered, or why it could not be read.
type nodeStatus struct {
	Admin  string         `json:"admin"`
	Health string         `json:"health"`
	Ready  map[string]any `json:"ready"`
	Seal   map[string]any `json:"seal,omitempty"`
	Keys   []statusKey    `json:"keys,omitempty"`
	Audit  map[string]any `json:"audit,omitempty"`
	Rekey  map[string]any `json:"rekey,omitempty"` // the last root-key rotation
	Notes  []string       `json:"notes,omitempty"` // what could not be read, and why
}

type statusKey struct {
	KID     string `json:"kid"`
	Alg     string `json:"alg"`
	Signing bool   `json:"signing"`
}

// status is keygate status: one look at a running node through its admin
// listener: liveness, readiness (and what keeps it from being ready: the
// issuers without keys, a sealed node, an audit log without a sink), seal
// state, signing keys and audit log. Parts that need the admin token are
// left out, with a note, when there is none.
func (a *app) status(ctx context.Context, args []string) error {
	fs := a.flags("keygate status", "[--admin URL] [--json] [flags]",
		"Shows a running node at a glance, from its admin listener: health, readiness and what keeps\n"+
			"it from being ready, seal state, signing keys, audit log and root-key rotation (the last\n"+
			"three with the admin token). It exits 1 when the node is not ready, so a script can wait on it.")
	var af adminFlags
	af.register(fs)
	asJSON := fs.Bool("json", false, "print the status as JSON")
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	st := nodeStatus{Admin: af.url}
	tok, tokErr := af.token(a) // the admin parts are left out, with a note, without it
	get := func(path string, out any, withToken bool) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(af.url, "/")+path, nil)
		if err != nil {
			return err
		}
		if withToken {
			if tokErr != nil {
				return tokErr
			}
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		return af.tls.send(req, out)
	}
	var health map[string]any
	if err := get("/healthz", &health, false); err != nil {
		return fmt.Errorf("the node at %s does not answer: %w", af.url, err)
	}
	st.Health, _ = health["status"].(string)
	ready := true
	var se *statusError
	if err := get("/readyz", &st.Ready, false); errors.As(err, &se) && se.status == http.StatusServiceUnavailable {
		ready = false
		json.Unmarshal(se.body, &st.Ready)
	} else if err != nil {
		return err
	}
	if err := get("/v1/sys/seal-status", &st.Seal, false); err != nil {
		st.Notes = append(st.Notes, "seal status: "+err.Error()) // a gateway-only node has none
	}
	var keys struct {
		Keys []statusKey `json:"keys"`
	}
	if err := get("/v1/admin/keys", &keys, true); err != nil {
		st.Notes = append(st.Notes, "signing keys: "+err.Error())
	} else {
		st.Keys = keys.Keys
	}
	if err := get("/v1/admin/audit", &st.Audit, true); err != nil {
		st.Notes = append(st.Notes, "audit log: "+err.Error())
	}
	if st.Seal != nil {
		if err := get("/v1/sys/rekey", &st.Rekey, true); err != nil {
			st.Notes = append(st.Notes, "root key rotation: "+err.Error())
		}
	}
	if *asJSON {
		b, _ := json.Marshal(st)
		if err := a.printJSON(b); err != nil {
			return err
		}
	} else {
		a.printStatus(st, ready)
	}
	if !ready {
		return silentError{}
	}
	return nil
}

func (a *app) printStatus(st nodeStatus, ready bool) {
	w := a.stdout
	fmt.Fprintf(w, "node      %s\nhealth    %s\n", st.Admin, st.Health)
	if ready {
		fmt.Fprintln(w, "ready     yes")
	} else {
		fmt.Fprintf(w, "ready     no: %s\n", compactJSON(st.Ready))
	}
	if st.Seal != nil {
		line := fmt.Sprintf("sealed    %v", st.Seal["sealed"])
		if st.Seal["passphrase"] == true {
			line += " (passphrase unsealing)"
		}
		if kid, _ := st.Seal["signing_kid"].(string); kid != "" {
			line += ", signing key " + kid
		}
		fmt.Fprintln(w, line)
	}
	if st.Keys != nil {
		var names []string
		for _, k := range st.Keys {
			n := k.KID + " " + k.Alg
			if k.Signing {
				n += " (signing)"
			}
			names = append(names, n)
		}
		fmt.Fprintf(w, "keys      %d: %s\n", len(st.Keys), strings.Join(names, ", "))
	}
	if state, _ := st.Rekey["state"].(string); state != "" && state != "none" {
		line := fmt.Sprintf("rekey     %s, %v -> %v, rewrapped %v/%v", state, st.Rekey["old_key_id"], st.Rekey["new_key_id"],
			st.Rekey["done"], st.Rekey["total"])
		if at, _ := st.Rekey["finished_at"].(string); at != "" {
			line += ", finished " + at
		}
		fmt.Fprintln(w, line)
	}
	if st.Audit != nil {
		line := fmt.Sprintf("audit     enabled %v, ready %v", st.Audit["enabled"], st.Audit["ready"])
		if n, _ := st.Audit["node"].(string); n != "" {
			line += ", node " + n
		}
		if cp, ok := st.Audit["last_checkpoint"].(map[string]any); ok {
			line += fmt.Sprintf(", last checkpoint seq %v", cp["seq"])
		}
		fmt.Fprintln(w, line)
	}
	sort.Strings(st.Notes)
	for _, n := range st.Notes {
		fmt.Fprintf(w, "note      %s\n", n)
	}
}

func compactJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
