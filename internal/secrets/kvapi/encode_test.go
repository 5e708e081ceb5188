package kvapi

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/keygate/keygate/internal/vaultauth"
)

// mark stands for a read's data in encoding/json's envelope: it holds a
// NUL, which nothing else in an answer can.
var mark = json.RawMessage(`"\u0000data"`)

// checkEnvelope fails t unless appendEnvelope writes out's envelope byte
// for byte as encoding/json does, except that a read's data is as stored
// (encoding/json would escape its '<', '>' and '&').
func checkEnvelope(t *testing.T, name, id string, out any) {
	t.Helper()
	got, err := appendEnvelope(nil, id, out)
	if err != nil {
		t.Fatalf("%s: appendEnvelope: %v", name, err)
	}
	var data json.RawMessage
	if r, ok := out.(readOut); ok {
		data, r.Data = r.Data, mark
		out = r
	}
	want, err := json.Marshal(vaultauth.Envelope{RequestID: id, Data: out})
	if err != nil {
		t.Fatalf("%s: json.Marshal: %v", name, err)
	}
	if data != nil {
		want = bytes.Replace(want, mark, data, 1)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s:\n got %s\nwant %s", name, got, want)
	}
}

func TestAppendEnvelope(t *testing.T) {
	v := versionOut{CreatedTime: "2026-11-29T04:00:00.123456Z", Version: 3}
	withCustom := v
	withCustom.CustomMetadata = map[string]string{"owner": "<ops> & \"dev\"", "b": "é\u2028", "a": "x"}
	gone := v
	gone.DeletionTime, gone.Destroyed = "2026-11-29T05:00:00Z", true
	cases := []struct {
		name, id string
		out      any
	}{
		{"read", "0f8e4c1a-7b2d-4e5f-9a6b-1c2d3e4f5a6b", readOut{Data: json.RawMessage(`{"k":"v","n":[1,{"x":null}]}`), Metadata: v}},
		{"read, custom metadata", "id", readOut{Data: json.RawMessage(`{}`), Metadata: withCustom}},
		{"read, data with what encoding/json escapes", "id", readOut{Data: json.RawMessage(`{"h":"<b>&amp;</b>","u":"\u2028"}`), Metadata: v}},
		{"write", "id", v},
		{"write, destroyed and deleted", "id", gone},
		{"write, empty custom metadata", "id", versionOut{CustomMetadata: map[string]string{}}},
		{"request id to escape", "<a\"b\\c>&\x01é\u2029\xff", v},
		{"empty request id", "", v},
		{"another answer", "id", map[string]any{"data": nil, "metadata": v}},
		{"a list", "id", struct {
			Keys []string `json:"keys"`
		}{[]string{"a/", "b"}}},
	}
	for _, tc := range cases {
		checkEnvelope(t, tc.name, tc.id, tc.out)
	}
}

// FuzzAppendEnvelope: for any request id, times, version, custom metadata
// and (compact) data, the hand-written envelope is encoding/json's.
func FuzzAppendEnvelope(f *testing.F) {
	f.Add("id", "2026-11-29T04:00:00Z", "", false, 1, "", "", `{"a":1}`)
	f.Add("<&>", "\x01", "\u2028", true, -7, "owner", "ops<>", `{"h":"<b>"}`)
	f.Add("\xff\xfe", "t", "d", false, 1<<40, "k\"", "\\", `{}`)
	f.Fuzz(func(t *testing.T, id, created, deleted string, destroyed bool, version int, key, value, data string) {
		var buf bytes.Buffer
		if strings.Contains(id+created+deleted+key+value, "\x00") { // it could stand for mark
			t.Skip()
		}
		if json.Compact(&buf, []byte(data)) != nil || !json.Valid(buf.Bytes()) || buf.Len() == 0 || buf.Bytes()[0] != '{' {
			t.Skip()
		}
		v := versionOut{CreatedTime: created, DeletionTime: deleted, Destroyed: destroyed, Version: version}
		if key != "" {
			v.CustomMetadata = map[string]string{key: value}
		}
		checkEnvelope(t, "write", id, v)
		checkEnvelope(t, "read", id, readOut{Data: buf.Bytes(), Metadata: v})
	})
}
