package strictjson

import (
	"strings"
	"testing"
)

type body struct {
	Key  string `json:"key"`
	Rate int    `json:"rate,omitempty"`
	Skip string `json:"-"`
	Bare string
}

func TestExactFields(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want string // "" for accepted, else a part of the error
	}{
		{`{}`, ""},
		{`{"key":"a","rate":1}`, ""},
		{`{"KEY":"a"}`, `unknown field "KEY"`},
		{`{"key":"a","Key":"b"}`, `unknown field "Key"`},
		{`{"Rate":1}`, `unknown field "Rate"`},
		{`{"-":1}`, `unknown field "-"`},
		{`{"Bare":"x"}`, `unknown field "Bare"`},
		{`{"other":1}`, `unknown field "other"`},
		{`[]`, "cannot unmarshal"},
		{`{"key":`, "unexpected end"},
	} {
		err := ExactFields([]byte(c.raw), &body{})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want accepted", c.raw, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error with %q", c.raw, err, c.want)
		}
	}
	if err := ExactFields([]byte(`{}`), body{}); err == nil {
		t.Error("a struct, not a pointer to one, was accepted")
	}
}

// FuzzExactFields: any body is accepted or refused without a panic, and
// what is accepted names only the struct's fields, exactly.
func FuzzExactFields(f *testing.F) {
	for _, s := range []string{`{"key":"a"}`, `{"KEY":"a"}`, `{"rate":1,"key":""}`, `{`, `null`, `{"k\u0065y":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if ExactFields(raw, &body{}) != nil {
			return
		}
		for _, bad := range []string{`"KEY"`, `"Key"`, `"RATE"`, `"Rate"`} {
			if strings.Contains(string(raw), bad+":") && !strings.Contains(string(raw), `\`) {
				t.Fatalf("accepted %q", raw)
			}
		}
	})
}
