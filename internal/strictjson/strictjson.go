// Package strictjson holds request bodies of a fixed shape to one
// spelling. encoding/json matches an object's field names to a struct's
// whatever their case, and keeps the last of a field given twice, so two
// readers of one body — keygate and a proxy, a WAF or an audit reader in
// front — could each see a different value. A body checked here names
// every field exactly as the struct's json tags do.
package strictjson

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// ExactFields refuses a field of the JSON object raw that is not spelled
// exactly as one of the json tags of the struct v points to. It does not
// look for a field given twice (secrets.CheckObject does) nor for
// anything after the object (the decoder does).
func ExactFields(raw []byte, v any) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return err
	}
	t := reflect.TypeOf(v)
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("a request body's fields checked against %T, which is not a pointer to a struct", v)
	}
	t = t.Elem()
	for k := range m {
		found := false
		for i := range t.NumField() {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
			found = found || (name == k && name != "-")
		}
		if !found {
			return fmt.Errorf("unknown field %q (field names are case-sensitive)", k)
		}
	}
	return nil
}
