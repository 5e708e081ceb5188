package config

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// TypeError is a value of the configuration file that does not fit its
// field: Path is the field's YAML path ("issuers[0].leeway"), Line the
// value's line, and Problem says what was wanted and what was found.
type TypeError struct {
	Path    string
	Line    int
	Problem string
}

func (e *TypeError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s (line %d): %s", e.Path, e.Line, e.Problem)
	}
	return e.Path + ": " + e.Problem
}

var (
	durationType    = reflect.TypeFor[time.Duration]()
	unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()
)

// checkTypes walks the document against t (a struct type) before it is
// decoded, and returns the first value that does not fit, as a *TypeError
// naming the YAML path: the decoder's own errors name Go types ("cannot
// unmarshal !!int `60` into time.Duration", "field leway not found in type
// config.Issuer"), which a user cannot map back to the file.
func checkTypes(doc *yaml.Node, t reflect.Type) error {
	if doc.Kind == 0 { // an empty file
		return nil
	}
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return nil
		}
		doc = doc.Content[0]
	}
	return checkNode(doc, t, "")
}

func checkNode(n *yaml.Node, t reflect.Type, path string) error {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Tag == "!!null" {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil // decides for itself
	}
	bad := func(format string, args ...any) error {
		p := path
		if p == "" {
			p = "the file"
		}
		return &TypeError{Path: p, Line: n.Line, Problem: fmt.Sprintf(format, args...)}
	}
	switch {
	case t == durationType:
		return checkDuration(n, bad)
	case t.Kind() == reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return bad("want a mapping of %s, got %s", fieldList(t), describe(n))
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i], n.Content[i+1]
			f, ok := fieldByTag(t, key.Value)
			sub := join(path, key.Value)
			if !ok {
				msg := fmt.Sprintf("unknown field %q", key.Value)
				if near := nearest(key.Value, fieldNames(t)); near != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", near)
				}
				return &TypeError{Path: orFile(path), Line: key.Line, Problem: msg}
			}
			if err := checkNode(val, f.Type, sub); err != nil {
				return err
			}
		}
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return bad("want a list (- item, or [a, b]), got %s", describe(n))
		}
		for i, item := range n.Content {
			if err := checkNode(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case t.Kind() == reflect.Map:
		if n.Kind != yaml.MappingNode {
			return bad("want a mapping (name: value), got %s", describe(n))
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := checkNode(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value)); err != nil {
				return err
			}
		}
	case t.Kind() == reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
			return bad("want true or false, got %s", describe(n))
		}
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
			return bad("want a whole number, got %s", describe(n))
		}
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
			return bad("want a number, got %s", describe(n))
		}
	case t.Kind() == reflect.String:
		if n.Kind != yaml.ScalarNode {
			return bad("want a single value, got %s", describe(n))
		}
	}
	return nil
}

// checkDuration wants a Go duration with its unit.
func checkDuration(n *yaml.Node, bad func(string, ...any) error) error {
	if n.Kind != yaml.ScalarNode {
		return bad("want a duration such as 60s, got %s", describe(n))
	}
	if n.Tag == "!!int" || n.Tag == "!!float" {
		return bad("want a duration such as %ss (a number needs a unit: ns, us, ms, s, m, h), got %s", n.Value, n.Value)
	}
	if _, err := time.ParseDuration(n.Value); err != nil {
		hint := ""
		if strings.HasSuffix(n.Value, "d") {
			if days, err := strconv.Atoi(strings.TrimSuffix(n.Value, "d")); err == nil {
				hint = fmt.Sprintf(" (there is no day unit: %dh)", days*24)
			}
		}
		return bad("want a duration such as 60s, 15m or 720h, got %q%s", n.Value, hint)
	}
	return nil
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	if n.Tag == "!!str" {
		return strconv.Quote(n.Value)
	}
	return n.Value
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orFile(path string) string {
	if path == "" {
		return "the file"
	}
	return path
}

// fieldByTag finds the field of t whose yaml tag names key, looking into
// inline fields too.
func fieldByTag(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if opts == "inline" && f.Type.Kind() == reflect.Struct {
			if g, ok := fieldByTag(f.Type, key); ok {
				return g, true
			}
			continue
		}
		if name == key && name != "-" {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func fieldNames(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case opts == "inline" && f.Type.Kind() == reflect.Struct:
			out = append(out, fieldNames(f.Type)...)
		case name != "" && name != "-":
			out = append(out, name)
		}
	}
	return out
}

func fieldList(t reflect.Type) string {
	names := fieldNames(t)
	if len(names) > 6 {
		names = append(names[:6], "...")
	}
	return strings.Join(names, ", ")
}

// nearest returns the name within two edits of s, if one is.
func nearest(s string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		if d := editDistance(s, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
