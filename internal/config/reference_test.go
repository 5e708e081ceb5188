package config

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"strings"
	"testing"
)

// referenceFile is the configuration reference, generated from this
// package's types and their comments.
const referenceFile = "../../docs/configuration.md"

var update = flag.Bool("update", false, "rewrite "+referenceFile)

// fieldDocs reads the doc and line comments of every struct field in the
// package's non-test files: "Type.Field" -> text.
func fieldDocs(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]string{}
	for _, p := range pkgs {
		for _, f := range p.Files {
			ast.Inspect(f, func(n ast.Node) bool {
				ts, ok := n.(*ast.TypeSpec)
				if !ok {
					return true
				}
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					return true
				}
				prev := ""
				for _, fl := range st.Fields.List {
					text := strings.TrimSpace(strings.Join([]string{fl.Doc.Text(), fl.Comment.Text()}, " "))
					text = strings.Join(strings.Fields(text), " ")
					for _, name := range fl.Names {
						// A comment over the first of a group ("A and B
						// hold ...") documents the others it names.
						if text == "" && strings.Contains(prev, name.Name) {
							text = prev
						}
						docs[ts.Name.Name+"."+name.Name] = text
					}
					prev = text
				}
				return true
			})
		}
	}
	return docs
}

type refRow struct{ path, typ, doc string }

// reference walks the configuration's type in field order.
func reference(t reflect.Type, prefix string, docs map[string]string, rows *[]refRow) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if opts == "inline" {
			reference(f.Type, prefix, docs, rows)
			continue
		}
		if name == "" || name == "-" {
			continue
		}
		path := prefix + name
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		*rows = append(*rows, refRow{path, yamlTypeName(ft), yamlNames(t, docs[t.Name()+"."+f.Name])})
		switch {
		case ft.Kind() == reflect.Struct && ft != durationType:
			reference(ft, path+".", docs, rows)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			reference(ft.Elem(), path+"[].", docs, rows)
		}
	}
}

// yamlNames writes the Go names of t's fields in doc as the file spells
// them: "DatabaseURLFile and RedisURLFile" -> "database_url_file and
// redis_url_file".
func yamlNames(t reflect.Type, doc string) string {
	words := strings.Fields(doc)
	for i, w := range words {
		core := strings.TrimRight(w, ".,:;)")
		if f, ok := t.FieldByName(core); ok && core != "" && core[0] >= 'A' && core[0] <= 'Z' {
			if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name != "" && name != "-" {
				words[i] = "`" + name + "`" + w[len(core):]
			}
		}
	}
	return strings.Join(words, " ")
}

// TestConfigurationReference: docs/configuration.md lists every field of
// the configuration file with its type, variable, flag and documentation,
// as generated from the code (go test ./internal/config -run Reference
// -update rewrites it), and no field goes undocumented.
func TestConfigurationReference(t *testing.T) {
	var rows []refRow
	reference(reflect.TypeFor[Config](), "", fieldDocs(t), &rows)
	env := map[string]string{}
	for _, v := range EnvVars() {
		env[v.Path] = "`" + v.Name + "`"
	}
	flags := map[string]string{}
	for _, f := range Flags() {
		flags[f.Path] = "`--" + f.Name + "`"
	}
	var b bytes.Buffer
	b.WriteString(referenceHeader)
	for _, r := range rows {
		if r.doc == "" {
			t.Errorf("%s has no doc comment in internal/config: the reference would not say what it does", r.path)
		}
		e, fl := env[r.path], flags[r.path]
		if e == "" {
			e = "–"
		}
		if fl == "" {
			fl = "–"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", r.path, r.typ, e, fl, strings.ReplaceAll(r.doc, "|", `\|`))
	}
	if *update {
		if err := os.WriteFile(referenceFile, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	have, err := os.ReadFile(referenceFile)
	if err != nil || !bytes.Equal(have, b.Bytes()) {
		t.Errorf("%s is not what the code says (%v): go test ./internal/config -run Reference -update", referenceFile, err)
	}
}

const referenceHeader = `# Configuration reference

Every field of keygate's YAML configuration file (` + "`keygate serve --config FILE`" + `), generated from the
code's doc comments by ` + "`go test ./internal/config -run Reference -update`" + `; ` + "`TestConfigurationReference`" + ` fails
when a field is missing here or has no comment. Durations are Go durations (` + "`90s`, `15m`, `720h`" + `: a number
needs its unit). A ` + "`[]`" + ` in a path is any item of a list. The few settings a command line needs
(where it listens, where it keeps its data, how it logs, the proxy in front) are also flags of
` + "`keygate serve`" + `, which win over the file and the environment; see ` + "`keygate serve -h`" + `. Complete examples:
[examples/](../examples/).

The environment sets any field outside a list, over the file and under the flags, by one rule:
` + "`KEYGATE_`" + ` and the field's path in upper case, dots as underscores
(` + "`token_service.redis_prefix`" + ` is ` + "`KEYGATE_TOKEN_SERVICE_REDIS_PREFIX`" + `); a list of values takes them
comma-separated (` + "`KEYGATE_ADMIN_HOSTS=a,b`" + `). ` + "`KEYGATE_DATABASE_URL`" + ` and ` + "`KEYGATE_REDIS_URL`" + ` are kept as short
names for the two URLs (the rule's name wins when both are set); ` + "`KEYGATE_CONFIG`" + ` names the file itself.
The lists of sections (issuers, rules, routes) are the file's alone. Secrets have variables of their own
that are not fields: ` + "`KEYGATE_ROOT_KEY`, `KEYGATE_ADMIN_TOKEN`, `KEYGATE_METRICS_TOKEN`" + `.

An empty variable is not set: ` + "`KEYGATE_ADMIN_TLS_CLIENT_CA_FILE=`" + ` (as Compose's ` + "`${CA:-}`" + ` and Helm templates write
a value left out) leaves the file's ` + "`admin_tls.client_ca_file`" + ` in force, as an empty flag
(` + "`--proxy=`" + `) leaves ` + "`forward_auth.proxy`" + `; so does a value of spaces, or for a list of commas. To turn a setting off,
write it in the file (` + "`client_ca_file: \"\"`" + `), or give its variable the value that means off (` + "`KEYGATE_AUDIT_DISABLED=true`" + `).
At start, ` + "`keygate serve`" + ` logs the names (never the values) of the variables that set the configuration
(` + "`configuration from the environment`" + `) and of those it ignored as empty; ` + "`keygate config check`" + ` prints them too.

| field | type | environment | flag | meaning |
| --- | --- | --- | --- | --- |
`
