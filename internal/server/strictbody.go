package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/keygate/keygate/internal/secrets"
	"github.com/keygate/keygate/internal/strictjson"
)

// readStrict reads a JSON body of at most limit bytes into v, a pointer to
// a struct, and returns the body for the caller to clear (it may hold a
// key). The body must be one object whose every field is spelled exactly
// as one of v's json tags, none twice and none other, with nothing after
// it: encoding/json matches field names whatever their case and keeps the
// last of a repeated one, so {"key":A,"KEY":B} would be B here and A to a
// proxy or an audit reader in front. An empty body is io.EOF, v untouched.
func readStrict(w http.ResponseWriter, r *http.Request, limit int64, v any) ([]byte, error) {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	switch {
	case err != nil:
		return raw, err
	case len(bytes.TrimSpace(raw)) == 0:
		return raw, io.EOF
	}
	if err := secrets.CheckObject("the body", raw); err != nil {
		return raw, err
	}
	if err := strictjson.ExactFields(raw, v); err != nil {
		return raw, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return raw, err
	}
	if dec.Decode(&struct{}{}) != io.EOF {
		return raw, errors.New("the body must hold one JSON object and nothing after it")
	}
	return raw, nil
}
