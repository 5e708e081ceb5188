package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/keygate/keygate/jose"
)

// flagSet is a subcommand's flag.FlagSet with its usage text.
type flagSet struct {
	*flag.FlagSet
	a     *app
	synop string // e.g. "keygate token verify [flags] TOKEN"
	about string
}

func (a *app) flags(cmd, synopsis, about string) *flagSet {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return &flagSet{FlagSet: fs, a: a, synop: cmd + " " + synopsis, about: about}
}

// parse parses flags and positional arguments in any order ("--" ends the
// flags) and checks there are between min and max positional arguments
// (max < 0: no limit). -h prints the usage and returns errHelpShown.
func (fs *flagSet) parse(args []string, min, max int) ([]string, error) {
	pos, err := fs.interspersed(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.printUsage(fs.a.stdout)
		return nil, errHelpShown
	case err != nil:
		return nil, usageErrorf(fs.Name(), "%v", fs.explain(err))
	case len(pos) < min:
		return nil, usageErrorf(fs.Name(), "too few arguments (usage: %s)", fs.synop)
	case max >= 0 && len(pos) > max:
		return nil, usageErrorf(fs.Name(), "unexpected argument %q", pos[max])
	}
	return pos, nil
}

// badFlagValue is the flag package's message for a value its type's parser
// refused.
var badFlagValue = regexp.MustCompile(`^invalid value "(.*)" for flag -([\w-]+): parse error$`)

// explain replaces the flag package's "parse error" for a duration flag
// with what a duration looks like: "--ttl 15" is the usual mistake, a
// number without its unit.
func (fs *flagSet) explain(err error) error {
	m := badFlagValue.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	if f := fs.Lookup(m[2]); f == nil || fmt.Sprintf("%T", f.Value) != "*flag.durationValue" {
		return err
	}
	if _, nerr := strconv.ParseFloat(m[1], 64); nerr == nil {
		return fmt.Errorf("--%s %s: a duration needs a unit (ns, us, ms, s, m, h), such as %ss or %sm", m[2], m[1], m[1], m[1])
	}
	return fmt.Errorf("--%s %q: not a duration; write a number and a unit (ns, us, ms, s, m, h), such as 90s, 15m or 720h", m[2], m[1])
}

func (fs *flagSet) interspersed(args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

func (fs *flagSet) printUsage(w io.Writer) {
	fmt.Fprintf(w, "Usage: %s\n\n%s\n", fs.synop, fs.about)
	if hasFlags(fs.FlagSet) {
		fmt.Fprintln(w, "\nFlags:")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// isSet reports whether the named flag was given on the command line.
func (fs *flagSet) isSet(name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// givenEmpty names the flags given on the command line with an empty
// value ("--proxy=", as a script writes --proxy="$P" with P unset), which
// set nothing, like an empty KEYGATE_ variable (config.CommandLine.Apply).
func (fs *flagSet) givenEmpty() []string {
	var names []string
	fs.Visit(func(f *flag.Flag) {
		if f.Value.String() == "" {
			names = append(names, f.Name)
		}
	})
	return names
}

// stringsFlag is a repeatable string flag.
type stringsFlag []string

func (s *stringsFlag) String() string { return strings.Join(*s, ",") }
func (s *stringsFlag) Set(v string) error {
	*s = append(*s, v)
	return nil
}

// stringList is stringsFlag that also splits on commas (--scopes a,b),
// for values that never hold one.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// scopeList is a list of scopes, which never hold a comma or a space:
// given comma-separated (--scopes a,b), space-separated as the scope
// claim is (--scope "a b"), or repeated.
type scopeList []string

func (l *scopeList) String() string { return strings.Join(*l, ",") }

func (l *scopeList) Set(v string) error {
	*l = append(*l, strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' })...)
	return nil
}

// scopes registers l as --scopes and --scope: the commands that take
// scopes accept both spellings, so that one learned on one works on all.
func (fs *flagSet) scopes(l *scopeList, usage string) {
	fs.Var(l, "scopes", usage+" (comma- or space-separated, or repeated)")
	fs.Var(l, "scope", "the same as --scopes")
}

// scopesSet reports whether --scopes or --scope was given.
func (fs *flagSet) scopesSet() bool { return fs.isSet("scopes") || fs.isSet("scope") }

// algFlag is a JWS algorithm name.
type algFlag jose.Alg

func (a *algFlag) String() string {
	if *a == 0 {
		return ""
	}
	return jose.Alg(*a).String()
}

func (a *algFlag) Set(v string) error {
	alg, err := parseAlg(v)
	*a = algFlag(alg)
	return err
}

// algsFlag is a repeatable algorithm flag; a value may also list several,
// separated by commas.
type algsFlag []jose.Alg

func (s *algsFlag) String() string {
	names := make([]string, len(*s))
	for i, a := range *s {
		names[i] = a.String()
	}
	return strings.Join(names, ",")
}

func (s *algsFlag) Set(v string) error {
	for name := range strings.SplitSeq(v, ",") {
		alg, err := parseAlg(strings.TrimSpace(name))
		if err != nil {
			return err
		}
		*s = append(*s, alg)
	}
	return nil
}

func parseAlg(name string) (jose.Alg, error) {
	alg, err := jose.ParseAlg(name)
	if err != nil {
		return 0, fmt.Errorf("unknown algorithm %q (one of %s)", name, algNames())
	}
	return alg, nil
}

func algNames() string {
	var names []string
	for _, a := range jose.Algorithms() {
		names = append(names, a.String())
	}
	return strings.Join(names, ", ")
}

// claimsFlag collects name=value claims; a value that parses as JSON is
// used as JSON, anything else as a string.
type claimsFlag map[string]json.RawMessage

func (c claimsFlag) String() string { return "" }

func (c claimsFlag) Set(v string) error {
	name, value, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return fmt.Errorf("claim %q is not name=value", v)
	}
	if _, dup := c[name]; dup {
		return fmt.Errorf("claim %q given twice", name)
	}
	if json.Valid([]byte(value)) {
		c[name] = json.RawMessage(value)
		return nil
	}
	s, err := json.Marshal(value)
	c[name] = s
	return err
}
