package config

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/keygate/keygate/internal/operr"
)

// EnvPrefix begins every environment variable that sets a configuration
// field.
const EnvPrefix = "KEYGATE_"

// EnvAliases are short names kept beside the rule's, for the settings
// most often given by a secret store; the rule's name wins when both are
// set.
var EnvAliases = map[string]string{
	"KEYGATE_DATABASE_URL": "token_service.database_url",
	"KEYGATE_REDIS_URL":    "token_service.redis_url",
}

// EnvVar is one field the environment can set: its YAML path and its
// variable.
type EnvVar struct {
	Path, Name, Type string
}

// EnvVars lists the fields the environment can set, by the one naming
// rule: KEYGATE_ and the field's YAML path in upper case, dots as
// underscores (token_service.redis_prefix: KEYGATE_TOKEN_SERVICE_REDIS_PREFIX).
// Every field outside a list can be set; a list of plain values (admin_hosts,
// trusted_proxies) takes comma-separated values. The lists of sections
// (issuers, routes, forward_auth.rules) are the file's alone.
func EnvVars() []EnvVar {
	var out []EnvVar
	envWalk(reflect.TypeFor[Config](), "", func(path string, f reflect.StructField, _ []int) {
		out = append(out, EnvVar{Path: path, Name: envName(path), Type: envType(f.Type)})
	}, nil)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func envName(path string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(path, ".", "_"))
}

// envWalk calls fn for every settable field of t (not inside a list), with
// its YAML path and its index path from the root.
func envWalk(t reflect.Type, prefix string, fn func(path string, f reflect.StructField, index []int), index []int) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		idx := append(append([]int(nil), index...), i)
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case opts == "inline":
			envWalk(ft, prefix, fn, idx)
		case name == "" || name == "-":
		case ft.Kind() == reflect.Struct && ft != durationType:
			envWalk(ft, prefix+name+".", fn, idx)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct, ft.Kind() == reflect.Map:
			// lists of sections and maps: the file's alone
		default:
			fn(prefix+name, f, idx)
		}
	}
}

func envType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return yamlTypeName(t)
}

// yamlTypeName names a field's type as the reference and EnvVars do.
func yamlTypeName(t reflect.Type) string {
	switch {
	case t == durationType:
		return "duration"
	case t.Kind() == reflect.Struct:
		return "section"
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
		return "list of sections"
	case t.Kind() == reflect.Slice:
		return "list of " + yamlTypeName(t.Elem())
	case t.Kind() == reflect.Map:
		return "map of " + yamlTypeName(t.Key()) + " to " + yamlTypeName(t.Elem())
	case t.Kind() == reflect.Bool:
		return "bool"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		return "integer"
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		return "number"
	}
	return "string"
}

// ApplyEnv sets the fields the environment names (EnvVars), over the
// file's values; a variable that does not parse as its field's type is an
// error for the operator (operr) naming the variable. An empty variable (nothing but spaces, or for
// a list nothing but commas) is unset: Compose's ${VAR:-} and Helm's
// templates write one for every value left out, and it must not clear
// what the file sets (an admin client CA, a metrics token file). Variables
// that name no field are left to their users (KEYGATE_ROOT_KEY,
// KEYGATE_ADMIN_TOKEN, ...).
func (c *Config) ApplyEnv(env []string) error {
	root := reflect.ValueOf(c).Elem()
	set, _ := readEnv(env)
	for _, s := range set {
		if err := setFromEnv(fieldByIndexAlloc(root, s.index), s.value); err != nil {
			// The value is shown: a secret (a URL with a password) is a
			// string setting, and a string always parses.
			return operr.Errorf("%s=%q: %v", s.given, s.value, err)
		}
	}
	return nil
}

// EnvReport names the variables of an environment that ApplyEnv reads.
type EnvReport struct {
	Set     []string // variables that set a field, as given (an alias or the rule's name)
	Ignored []string // variables that name a field but are empty: the file's value or the default stays
}

// ReadEnvReport reports which variables of env ApplyEnv applies and which
// it ignores as empty, sorted, by name only: a value may be a secret.
func ReadEnvReport(env []string) EnvReport {
	set, ignored := readEnv(env)
	var r EnvReport
	for _, s := range set {
		r.Set = append(r.Set, s.given)
	}
	r.Set, r.Ignored = sortedSet(r.Set), sortedSet(ignored)
	return r
}

func sortedSet(names []string) []string {
	sort.Strings(names)
	return slices.Compact(names)
}

// envSetting is a variable that sets a field.
type envSetting struct {
	given, value string
	index        []int
}

// readEnv returns the variables of env (os.Environ form) that set a field,
// in the order they apply: aliases first, so that the rule's own name,
// applied after, wins. ignored names those that are empty.
func readEnv(env []string) (set []envSetting, ignored []string) {
	type field struct {
		index []int
		list  bool
	}
	fields := map[string]field{}
	envWalk(reflect.TypeFor[Config](), "", func(path string, f reflect.StructField, index []int) {
		fields[envName(path)] = field{index, f.Type.Kind() == reflect.Slice}
	}, nil)
	for _, pass := range []bool{true, false} {
		for _, kv := range env {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				continue
			}
			name := k
			if path, alias := EnvAliases[k]; alias != pass {
				continue
			} else if alias {
				name = envName(path)
			}
			f, known := fields[name]
			switch {
			case !known:
			case envEmpty(v, f.list):
				ignored = append(ignored, k)
			default:
				set = append(set, envSetting{given: k, value: v, index: f.index})
			}
		}
	}
	return set, ignored
}

// envEmpty reports whether a variable's value gives nothing: only spaces,
// and for a list only commas besides.
func envEmpty(v string, list bool) bool {
	cut := " \t\r\n"
	if list {
		cut += ","
	}
	return strings.Trim(v, cut) == ""
}

// fieldByIndexAlloc is Value.FieldByIndex, allocating nil pointers on the
// way.
func fieldByIndexAlloc(v reflect.Value, index []int) reflect.Value {
	for i, x := range index {
		if i > 0 {
			for v.Kind() == reflect.Pointer {
				if v.IsNil() {
					v.Set(reflect.New(v.Type().Elem()))
				}
				v = v.Elem()
			}
		}
		v = v.Field(x)
	}
	return v
}

func setFromEnv(v reflect.Value, s string) error {
	if v.Kind() == reflect.Pointer {
		p := reflect.New(v.Type().Elem())
		if err := setFromEnv(p.Elem(), s); err != nil {
			return err
		}
		v.Set(p)
		return nil
	}
	switch {
	case v.Type() == durationType:
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("want a duration such as 60s, 15m or 720h")
		}
		v.SetInt(int64(d))
	case v.Kind() == reflect.String:
		v.SetString(s)
	case v.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("want true or false")
		}
		v.SetBool(b)
	case v.Kind() >= reflect.Int && v.Kind() <= reflect.Int64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v.OverflowInt(n) {
			return fmt.Errorf("want a whole number")
		}
		v.SetInt(n)
	case v.Kind() == reflect.Float64 || v.Kind() == reflect.Float32:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("want a number")
		}
		v.SetFloat(f)
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.String:
		var items []string
		for _, it := range strings.Split(s, ",") {
			if it = strings.TrimSpace(it); it != "" {
				items = append(items, it)
			}
		}
		v.Set(reflect.ValueOf(items).Convert(v.Type()))
	default:
		return fmt.Errorf("cannot be set from the environment")
	}
	return nil
}
