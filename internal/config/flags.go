package config

import (
	"errors"
	"flag"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
)

// Flag is the flag of one setting. A setting is declared once, as a field
// of Config with its tags, and every way of giving it is derived from that
// declaration:
//
//	Listen string `yaml:"listen" flag:"listen" usage:"traffic {address} (default 127.0.0.1:8080)"`
//
// yaml is its key in the file, and its path (listen, token_service.issuer)
// names it everywhere else. The environment sets it by that path alone:
// KEYGATE_LISTEN (EnvVars). flag, on the few settings a command line needs,
// makes it a flag of keygate serve, --listen, with usage as its help
// ({word} names the flag's argument there); a flag given wins over the
// environment and the file on every load, the start's and each reload's.
// replaces:"key ..." names fields of the same section that the flag's
// value replaces as well: --proxy names a preset of forwarding headers, so
// it replaces forward_auth.trusted_headers, which the file would otherwise
// combine with it (an error). Adding a setting is adding its field; no
// code binds a flag or a variable to it.
type Flag struct {
	Name  string // the flag's name: listen for --listen
	Path  string // the setting's YAML path
	Env   string // its variable
	Usage string // its help, as the flag package takes it
	index []int  // the field from Config's root
	typ   reflect.Type
	// replaces are the fields the flag's value replaces too, from the root.
	replaces [][]int
}

// Flags lists the settings that have a flag, in field order.
func Flags() []Flag {
	var out []Flag
	root := reflect.TypeFor[Config]()
	envWalk(root, "", func(path string, f reflect.StructField, index []int) {
		name := f.Tag.Get("flag")
		if name == "" {
			return
		}
		fl := Flag{Name: name, Path: path, Env: envName(path), Usage: flagUsage(f.Tag.Get("usage"), path),
			index: index, typ: f.Type}
		parent := index[:len(index)-1]
		for _, key := range strings.Fields(f.Tag.Get("replaces")) {
			fl.replaces = append(fl.replaces, siblingIndex(root, parent, key))
		}
		out = append(out, fl)
	}, nil)
	return out
}

// flagPlaceholder is the {word} of a usage tag that names the flag's
// argument.
var flagPlaceholder = regexp.MustCompile(`\{([a-z ]+)\}`)

// flagUsage turns a usage tag into the flag package's form (the argument's
// name between backquotes) and names the setting's field and variable
// after it.
func flagUsage(usage, path string) string {
	if m := flagPlaceholder.FindStringSubmatchIndex(usage); m != nil {
		usage = usage[:m[0]] + "`" + usage[m[2]:m[3]] + "`" + usage[m[1]:]
	}
	return usage + "\n(" + path + ", " + envName(path) + ")"
}

// siblingIndex is the index path of the field whose YAML key is key in the
// section at parent; a tag naming no field is a mistake in this package.
func siblingIndex(root reflect.Type, parent []int, key string) []int {
	t := root
	if len(parent) > 0 {
		t = root.FieldByIndex(parent).Type
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); name == key {
			return append(slices.Clip(parent), i)
		}
	}
	panic("config: replaces names no field: " + key)
}

// CommandLine holds the values of the settings' flags given on a command
// line.
type CommandLine struct {
	values []*flagValue
}

// DefineFlags defines the settings' flags (Flags) on fs and returns what
// they will hold once fs has parsed a command line.
func DefineFlags(fs *flag.FlagSet) *CommandLine {
	cl := &CommandLine{}
	for _, f := range Flags() {
		v := &flagValue{Flag: f}
		fs.Var(v, f.Name, f.Usage)
		cl.values = append(cl.values, v)
	}
	return cl
}

// Apply writes the flags given, over what the file and the environment put
// in c. A flag given empty (--proxy=, as a script writes --proxy="$P" with
// P unset) is not set, like an empty variable: it must not clear what the
// file sets.
func (cl *CommandLine) Apply(c *Config) {
	root := reflect.ValueOf(c).Elem()
	for _, v := range cl.given() {
		for _, r := range v.replaces {
			f := fieldByIndexAlloc(root, r)
			f.Set(reflect.Zero(f.Type()))
		}
		_ = setFromEnv(fieldByIndexAlloc(root, v.index), v.raw) // Set has parsed it already
	}
}

// Check validates the flags' values alone, as the configuration's
// validation does, naming the flags: a problem of the whole (a flag's value
// against the file's) is the configuration's to report.
func (cl *CommandLine) Check() error {
	c := new(Config)
	cl.Apply(c)
	c.SetDefaults()
	err := c.Validate()
	if err == nil {
		return nil
	}
	flagOf := map[string]string{}
	for _, v := range cl.given() {
		flagOf[v.Path] = v.Name
	}
	var errs []error
	for _, e := range unjoin(err) {
		var fe *FieldError
		if errors.As(e, &fe) && flagOf[fe.Field] != "" {
			errs = append(errs, fmt.Errorf("--%s (%s): %s", flagOf[fe.Field], fe.Field, fe.Problem))
		}
	}
	return errors.Join(errs...)
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// given returns the flags given with a value.
func (cl *CommandLine) given() []*flagValue {
	var out []*flagValue
	for _, v := range cl.values {
		if v.set && !envEmpty(v.raw, v.typ.Kind() == reflect.Slice) {
			out = append(out, v)
		}
	}
	return out
}

// flagValue is a setting's flag.Value: it keeps the text given, checked
// against the field's type, and writes it on Apply.
type flagValue struct {
	Flag
	raw string
	set bool
}

func (v *flagValue) String() string {
	if v == nil {
		return ""
	}
	return v.raw
}

// Set checks s as the environment's value of the field would be, so that
// a bad value is refused while the command line is parsed. A list flag
// given again adds to the list.
func (v *flagValue) Set(s string) error {
	if err := setFromEnv(reflect.New(v.typ).Elem(), s); err != nil {
		return err
	}
	if v.set && v.typ.Kind() == reflect.Slice {
		s = v.raw + "," + s
	}
	v.raw, v.set = s, true
	return nil
}

// IsBoolFlag lets a bool setting's flag be given alone (--x for --x=true).
func (v *flagValue) IsBoolFlag() bool {
	t := v.typ
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t != nil && t.Kind() == reflect.Bool
}
