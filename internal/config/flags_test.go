package config

import (
	"bytes"
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"
)

// TestFlagsDeclared: every flag names a setting the environment sets too,
// under its own variable, with help that names its argument, and no two
// flags share a name.
func TestFlagsDeclared(t *testing.T) {
	vars := map[string]string{}
	for _, v := range EnvVars() {
		vars[v.Path] = v.Name
	}
	seen := map[string]bool{}
	flags := Flags()
	if len(flags) == 0 {
		t.Fatal("no setting has a flag: the test would prove nothing")
	}
	for _, f := range flags {
		if seen[f.Name] {
			t.Errorf("--%s is declared twice", f.Name)
		}
		seen[f.Name] = true
		if vars[f.Path] == "" || vars[f.Path] != f.Env {
			t.Errorf("--%s: %s has variable %q, want the environment's %q", f.Name, f.Path, f.Env, vars[f.Path])
		}
		if name, _ := flag.UnquoteUsage(&flag.Flag{Usage: f.Usage, Value: &flagValue{Flag: f}}); !strings.Contains(f.Usage, "`") || name == "" {
			t.Errorf("--%s: usage %q names no argument ({word})", f.Name, f.Usage)
		}
		if strings.ContainsAny(f.Usage, "{}") {
			t.Errorf("--%s: usage %q keeps a brace", f.Name, f.Usage)
		}
	}
}

// TestFlagTagsReached: every flag tag in the configuration's types is on a
// field Flags reaches (not inside a list of sections, which the command
// line cannot address), so that no declared flag is silently dropped.
func TestFlagTagsReached(t *testing.T) {
	tagged := 0
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return
		}
		seen[t] = true
		for i := range t.NumField() {
			if t.Field(i).Tag.Get("flag") != "" {
				tagged++
			}
			walk(t.Field(i).Type)
		}
	}
	walk(reflect.TypeFor[Config]())
	if n := len(Flags()); n != tagged {
		t.Errorf("%d fields have a flag tag, Flags gives %d", tagged, n)
	}
}

// commandLine parses args with the settings' flags.
func commandLine(t *testing.T, args ...string) *CommandLine {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cl := DefineFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return cl
}

// TestCommandLinePrecedence: a flag given wins over the environment, which
// wins over the file; a flag given empty leaves what the others say.
func TestCommandLinePrecedence(t *testing.T) {
	file := writeConfig(t, "listen: 127.0.0.1:1\ndata_dir: /file\nlog_level: warn\n")
	env := []string{"KEYGATE_LISTEN=127.0.0.1:2", "KEYGATE_LOG_LEVEL=error"}
	for _, tc := range []struct {
		name                      string
		args                      []string
		listen, dataDir, logLevel string
	}{
		{"no flags", nil, "127.0.0.1:2", "/file", "error"},
		{"flags over both", []string{"--listen", "127.0.0.1:3", "--data-dir", "/flag", "--log-level", "debug"}, "127.0.0.1:3", "/flag", "debug"},
		{"empty flags", []string{"--listen=", "--data-dir=", "--log-level", " "}, "127.0.0.1:2", "/file", "error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(file, env)
			if err != nil {
				t.Fatal(err)
			}
			commandLine(t, tc.args...).Apply(c)
			if c.Listen != tc.listen || c.DataDir != tc.dataDir || c.LogLevel != tc.logLevel {
				t.Errorf("listen %q, data_dir %q, log_level %q; want %q, %q, %q", c.Listen, c.DataDir, c.LogLevel, tc.listen, tc.dataDir, tc.logLevel)
			}
		})
	}
}

// TestCommandLineReplaces: --proxy replaces the file's trusted_headers,
// which the file could not combine with a proxy; without the flag the
// file's headers stay.
func TestCommandLineReplaces(t *testing.T) {
	file := writeConfig(t, "forward_auth:\n  trusted_headers: {uri: X-Real-Uri}\n")
	for _, tc := range []struct {
		args    []string
		proxy   string
		headers bool
	}{{nil, "", true}, {[]string{"--proxy", "nginx"}, "nginx", false}, {[]string{"--proxy="}, "", true}} {
		c, err := Load(file, nil)
		if err != nil {
			t.Fatal(err)
		}
		commandLine(t, tc.args...).Apply(c)
		if c.ForwardAuth.Proxy != tc.proxy || (c.ForwardAuth.TrustedHeaders != nil) != tc.headers {
			t.Errorf("%q: proxy %q, trusted_headers %v", tc.args, c.ForwardAuth.Proxy, c.ForwardAuth.TrustedHeaders)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("%q: %v", tc.args, err)
		}
	}
}

// TestCommandLineCheck: a flag's value is validated as its field's is,
// and the problem names the flag and the field; good values pass.
func TestCommandLineCheck(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "" for none
	}{
		{nil, ""},
		{[]string{"--listen", "127.0.0.1:0", "--admin-listen", "off", "--log-level", "DEBUG", "--log-format", "json", "--proxy", "envoy"}, ""},
		{[]string{"--log-level", "loud"}, `--log-level (log_level): must be debug, info, warn or error, not "loud"`},
		{[]string{"--proxy", "haproxy"}, `--proxy (forward_auth.proxy): must be one of`},
		{[]string{"--listen", "nowhere"}, `--listen (listen): not a host:port address`},
		{[]string{"--log-format", "xml"}, `--log-format (log_format): must be text or json`},
	} {
		err := commandLine(t, tc.args...).Check()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestFlagValueSet: a value is checked against its field's type while the
// command line is parsed; a list flag given twice adds; a bool flag stands
// alone.
func TestFlagValueSet(t *testing.T) {
	d := &flagValue{Flag: Flag{typ: durationType}}
	if err := d.Set("15"); err == nil {
		t.Error("a duration without its unit was taken")
	}
	if err := d.Set("15m"); err != nil || d.raw != "15m" {
		t.Errorf("15m: %v %q", err, d.raw)
	}
	l := &flagValue{Flag: Flag{typ: reflect.TypeFor[[]string]()}}
	for _, s := range []string{"a,b", "c"} {
		if err := l.Set(s); err != nil {
			t.Fatal(err)
		}
	}
	v := reflect.New(l.typ).Elem()
	if err := setFromEnv(v, l.raw); err != nil || !reflect.DeepEqual(v.Interface(), []string{"a", "b", "c"}) {
		t.Errorf("list: %v %v", err, v.Interface())
	}
	b := &flagValue{Flag: Flag{typ: reflect.TypeFor[*bool]()}}
	if !b.IsBoolFlag() || (&flagValue{Flag: Flag{typ: durationType}}).IsBoolFlag() {
		t.Error("IsBoolFlag")
	}
}

// TestFlagsHelp: -h shows each flag's argument, its help, and the field
// and variable that give the same setting.
func TestFlagsHelp(t *testing.T) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	DefineFlags(fs)
	var b bytes.Buffer
	fs.SetOutput(&b)
	fs.PrintDefaults()
	for _, want := range []string{"-listen address\n", "traffic address (default 127.0.0.1:8080", "(listen, KEYGATE_LISTEN)",
		"-proxy proxy\n", "(forward_auth.proxy, KEYGATE_FORWARD_AUTH_PROXY)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, b.String())
		}
	}
}
