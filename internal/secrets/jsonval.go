package secrets

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// parseObject checks that raw is one JSON object in UTF-8, of at most
// MaxValueBytes, without a key twice in any object, and returns it compacted: its text
// as given, less insignificant white space. what names it in errors.
func parseObject(what string, raw []byte) ([]byte, error) {
	if len(raw) > MaxValueBytes {
		return nil, fmt.Errorf("%w: %s of %d bytes is over %d", ErrTooLarge, what, len(raw), MaxValueBytes)
	}
	if !utf8.Valid(raw) {
		return nil, fmt.Errorf("%w: %s is not UTF-8", ErrInvalid, what)
	}
	if out, ok := compactObject(raw); ok {
		return out, nil
	}
	return parseObjectSlow(what, raw)
}

// parseObjectSlow is parseObject past its checks of size and encoding,
// through encoding/json's tokens: it decides what compactObject leaves,
// and words every refusal.
func parseObjectSlow(what string, raw []byte) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	tok, err := d.Token()
	if err != nil {
		return nil, syntaxError(what, err)
	}
	if tok != json.Delim('{') {
		return nil, fmt.Errorf("%w: %s must be a JSON object", ErrInvalid, what)
	}
	if err := checkObject(what, d); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: %s: data after the JSON object", ErrInvalid, what)
	}
	var out bytes.Buffer
	if err := json.Compact(&out, raw); err != nil {
		return nil, syntaxError(what, err)
	}
	return out.Bytes(), nil
}

func syntaxError(what string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: %s: JSON ends early", ErrInvalid, what)
	}
	return fmt.Errorf("%w: %s is not valid JSON: %v", ErrInvalid, what, err)
}

// checkObject reads the rest of an object whose '{' was read, refusing a
// key given twice.
func checkObject(what string, d *json.Decoder) error {
	seen := map[string]bool{}
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return syntaxError(what, err)
		}
		key := tok.(string) // the decoder allows only strings as keys
		if seen[key] {
			return fmt.Errorf("%w: %s: key %q appears twice in one object", ErrInvalid, what, key)
		}
		seen[key] = true
		if err := checkValue(what, d); err != nil {
			return err
		}
	}
	if _, err := d.Token(); err != nil { // '}'
		return syntaxError(what, err)
	}
	return nil
}

// checkValue reads one value, checking the objects within it.
func checkValue(what string, d *json.Decoder) error {
	tok, err := d.Token()
	if err != nil {
		return syntaxError(what, err)
	}
	switch tok {
	case json.Delim('{'):
		return checkObject(what, d)
	case json.Delim('['):
		for d.More() {
			if err := checkValue(what, d); err != nil {
				return err
			}
		}
		if _, err := d.Token(); err != nil { // ']'
			return syntaxError(what, err)
		}
	}
	return nil
}

// decodeObject decodes a JSON object parseObject accepted, numbers kept
// as their text.
func decodeObject(raw []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	return m, nil
}

// encode is json.Marshal without HTML escaping: a value is returned as
// it was written.
func encode(v any) ([]byte, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// mergePatch applies patch to target as RFC 7396 says: an object patch
// merges into target member by member (null removes one), anything else
// replaces target. target may be changed in place.
func mergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
		} else {
			t[k] = mergePatch(t[k], v)
		}
	}
	return t
}

// applyPatch merges patch (a JSON object parseObject accepted) into data
// (another) and returns the result, compacted, keys sorted.
func applyPatch(data, patch []byte) ([]byte, error) {
	d, err := decodeObject(data)
	if err != nil {
		return nil, err
	}
	p, err := decodeObject(patch)
	if err != nil {
		return nil, err
	}
	out, err := encode(mergePatch(d, p))
	if err != nil {
		return nil, err
	}
	if len(out) > MaxValueBytes {
		return nil, fmt.Errorf("%w: patched data of %d bytes is over %d", ErrTooLarge, len(out), MaxValueBytes)
	}
	return out, nil
}

// subkeys is data (a JSON object) with every leaf null: a value that is
// not an object, or an object at depth (0: no limit).
func subkeys(data []byte, depth int) (json.RawMessage, error) {
	d, err := decodeObject(data)
	if err != nil {
		return nil, err
	}
	return encode(subtree(d, depth, 1))
}

func subtree(obj map[string]any, depth, level int) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		if child, ok := v.(map[string]any); ok && (depth == 0 || level < depth) {
			out[k] = subtree(child, depth, level+1)
		} else {
			out[k] = nil
		}
	}
	return out
}
