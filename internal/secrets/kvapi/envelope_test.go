package kvapi_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/secrets/kvapi"
)

var (
	uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	timeRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z$`)
)

// TestEnvelope checks answers byte for byte in Vault's shapes: the
// envelope's members and their values, a version's metadata, times in
// RFC 3339 UTC with nanoseconds, deletion_time "" when not deleted, and
// 404 with the envelope for a deleted version.
func TestEnvelope(t *testing.T) {
	e := start(t)
	tok := e.token("default", allScopes...)
	envelope := func(t *testing.T, b []byte) map[string]json.RawMessage {
		t.Helper()
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range m {
				if !yield(k) {
					return
				}
			}
		})
		want := []string{"auth", "data", "lease_duration", "lease_id", "renewable", "request_id", "warnings", "wrap_info"}
		if !slices.Equal(keys, want) {
			t.Fatalf("envelope members %v, want %v", keys, want)
		}
		for k, v := range map[string]string{"lease_id": `""`, "renewable": "false", "lease_duration": "0", "wrap_info": "null",
			"warnings": "null", "auth": "null"} {
			if string(m[k]) != v {
				t.Errorf("%s: %s, want %s", k, m[k], v)
			}
		}
		var id string
		json.Unmarshal(m["request_id"], &id) //nolint:errcheck
		if !uuidRE.MatchString(id) {
			t.Errorf("request_id %q", id)
		}
		return m
	}
	meta := func(t *testing.T, raw json.RawMessage, version int, deleted bool) {
		t.Helper()
		var m struct {
			CreatedTime    string             `json:"created_time"`
			CustomMetadata *map[string]string `json:"custom_metadata"`
			DeletionTime   *string            `json:"deletion_time"`
			Destroyed      *bool              `json:"destroyed"`
			Version        int                `json:"version"`
		}
		if err := json.Unmarshal(raw, &m); err != nil || m.DeletionTime == nil || m.Destroyed == nil {
			t.Fatalf("metadata %s: %v", raw, err)
		}
		if !timeRE.MatchString(m.CreatedTime) || m.Version != version {
			t.Errorf("metadata %s", raw)
		}
		if ct, _ := time.Parse(time.RFC3339Nano, m.CreatedTime); time.Since(ct) > time.Minute {
			t.Errorf("created_time %s", m.CreatedTime)
		}
		if deleted != (*m.DeletionTime != "") || deleted && !timeRE.MatchString(*m.DeletionTime) {
			t.Errorf("deletion_time %q (deleted: %v)", *m.DeletionTime, deleted)
		}
	}

	st, b := e.call(tok, "POST", "/v1/secret/data/a", `{"data":{"k":"v","n":{"x":[1,2]}}}`)
	if st != 200 {
		t.Fatalf("write: %d %s", st, b)
	}
	meta(t, envelope(t, b)["data"], 1, false)
	if !strings.Contains(string(b), `"data":{"created_time":"`) || !strings.Contains(string(b), `"custom_metadata":null,"deletion_time":"","destroyed":false,"version":1}`) {
		t.Errorf("write answer %s", b)
	}

	st, b = e.call(tok, "GET", "/v1/secret/data/a", "")
	if st != 200 {
		t.Fatalf("read: %d %s", st, b)
	}
	var read struct {
		Data     json.RawMessage `json:"data"`
		Metadata json.RawMessage `json:"metadata"`
	}
	json.Unmarshal(envelope(t, b)["data"], &read) //nolint:errcheck
	if string(read.Data) != `{"k":"v","n":{"x":[1,2]}}` {
		t.Errorf("data %s", read.Data)
	}
	meta(t, read.Metadata, 1, false)

	if st, b = e.call(tok, "DELETE", "/v1/secret/data/a", ""); st != 204 || len(b) != 0 {
		t.Fatalf("delete: %d %q", st, b)
	}
	st, b = e.call(tok, "GET", "/v1/secret/data/a", "")
	if st != 404 {
		t.Fatalf("read of a deleted version: %d %s", st, b)
	}
	json.Unmarshal(envelope(t, b)["data"], &read) //nolint:errcheck
	if string(read.Data) != "null" {
		t.Errorf("deleted: data %s", read.Data)
	}
	meta(t, read.Metadata, 1, true)

	st, b = e.call(tok, "GET", "/v1/secret/metadata/a", "")
	if st != 200 {
		t.Fatalf("metadata: %d %s", st, b)
	}
	d := string(envelope(t, b)["data"])
	for _, want := range []string{`"cas_required":false`, `"current_version":1`, `"custom_metadata":null`, `"delete_version_after":"0s"`,
		`"max_versions":0`, `"oldest_version":1`, `"versions":{"1":{"created_time":"`} {
		if !strings.Contains(d, want) {
			t.Errorf("metadata %s lacks %s", d, want)
		}
	}
	if st, b = e.call(tok, "POST", "/v1/secret/metadata/a", `{"delete_version_after":12319}`); st != 204 {
		t.Fatalf("metadata write: %d %s", st, b)
	}
	if _, b = e.call(tok, "GET", "/v1/secret/metadata/a", ""); !strings.Contains(string(b), `"delete_version_after":"3h25m19s"`) {
		t.Errorf("delete_version_after in seconds: %s", b)
	}
}

// TestOutcome: every request's outcome names the operation, the caller,
// the path and the version, and how it ended — and holds neither the
// value nor custom metadata nor the token.
func TestOutcome(t *testing.T) {
	e := start(t)
	tok := e.token("default", allScopes...)
	tests := []struct {
		method, path, body string
		want               kvapi.Outcome
	}{
		{"POST", "/v1/secret/data/app/x", `{"data":{"pw":"hunter2"}}`, kvapi.Outcome{Operation: "secret.write", Path: "app/x", Version: 1, Status: 200}},
		{"POST", "/v1/secret/metadata/app/x", `{"custom_metadata":{"owner":"sekrit-owner"}}`, kvapi.Outcome{Operation: "secret.metadata.write", Path: "app/x", Status: 204}},
		{"GET", "/v1/secret/data/app/x", "", kvapi.Outcome{Operation: "secret.read", Path: "app/x", Version: 1, Status: 200}},
		{"POST", "/v1/secret/delete/app/x", `{"versions":[1]}`, kvapi.Outcome{Operation: "secret.delete", Path: "app/x", Version: 1, Status: 204}},
		{"GET", "/v1/secret/data/app/x", "", kvapi.Outcome{Operation: "secret.read", Path: "app/x", Version: 1, Status: 404, Reason: "deleted"}},
		{"PUT", "/v1/secret/destroy/app/x", `{"versions":[1]}`, kvapi.Outcome{Operation: "secret.destroy", Path: "app/x", Version: 1, Status: 204}},
		{"GET", "/v1/secret/subkeys/app/x", "", kvapi.Outcome{Operation: "secret.subkeys", Path: "app/x", Version: 1, Status: 404, Reason: "destroyed"}},
		{"GET", "/v1/secret/data/none", "", kvapi.Outcome{Operation: "secret.read", Path: "none", Status: 404, Reason: "not_found"}},
		{"LIST", "/v1/secret/metadata/app", "", kvapi.Outcome{Operation: "secret.list", Path: "app/", Status: 200}},
		{"GET", "/v1/secret/config", "", kvapi.Outcome{Operation: "secret.config.read", Status: 200}},
		{"GET", "/v1/secret/data/a//b", "", kvapi.Outcome{Operation: "secret.read", Status: 400, Reason: "invalid_request"}},
		{"GET", "/v1/secret/nope", "", kvapi.Outcome{Operation: "secret", Status: 404, Reason: "unsupported_path"}},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			e.call(tok, tt.method, tt.path, tt.body)
			got := e.last()
			if !uuidRE.MatchString(got.RequestID) {
				t.Errorf("request id %q", got.RequestID)
			}
			tt.want.RequestID, tt.want.Tenant, tt.want.Principal = got.RequestID, "default", "kgc_test"
			if got != tt.want {
				t.Errorf("outcome %+v, want %+v", got, tt.want)
			}
			if s := fmt.Sprintf("%+v", got); strings.Contains(s, "hunter2") || strings.Contains(s, "sekrit") || strings.Contains(s, tok) {
				t.Errorf("outcome holds a value: %s", s)
			}
		})
	}
	e.call("", "GET", "/v1/secret/data/app/x", "")
	if o := e.last(); o.Status != 403 || o.Reason != "no_token" || o.Tenant != "" || o.Operation != "secret" {
		t.Errorf("no token: %+v", o)
	}
}

// TestReadAnswerData: a read answers the secret's data as it was
// written (compacted), whatever characters it holds, in a well-formed
// envelope; custom metadata beside it is encoded as usual.
func TestReadAnswerData(t *testing.T) {
	e := start(t)
	tok := e.token("default", allScopes...)
	for i, data := range []string{
		`{"html":"<b>&amp;</b>","u":"\u2028é\u0000","q":"\"kv-raw\"","nested":{"a":[1,{"b":null}]}}`,
		`{}`,
		`{"k":"\"\\u0000kv-raw\""}`,
	} {
		path := fmt.Sprintf("/v1/secret/data/raw%d", i)
		if st, b := e.call(tok, "POST", path, `{"data":`+data+`}`); st != 200 {
			t.Fatalf("write %s: %d %s", data, st, b)
		}
		if st, b := e.call(tok, "POST", "/v1/secret/metadata/raw"+fmt.Sprint(i), `{"custom_metadata":{"owner":"<ops>"}}`); st != 204 {
			t.Fatalf("metadata: %d %s", st, b)
		}
		for range 2 { // a miss, then a hit
			st, b := e.call(tok, "GET", path, "")
			var env struct {
				Data struct {
					Data     json.RawMessage `json:"data"`
					Metadata struct {
						Custom map[string]string `json:"custom_metadata"`
					} `json:"metadata"`
				} `json:"data"`
			}
			if st != 200 || json.Unmarshal(b, &env) != nil {
				t.Fatalf("read %s: %d %s", data, st, b)
			}
			var got, want any
			if json.Unmarshal(env.Data.Data, &got) != nil || json.Unmarshal([]byte(data), &want) != nil || fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("read %s: data %s", data, env.Data.Data)
			}
			if env.Data.Metadata.Custom["owner"] != "<ops>" {
				t.Errorf("read %s: custom metadata %v", data, env.Data.Metadata.Custom)
			}
		}
	}
}
