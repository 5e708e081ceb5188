package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/build"
	"go/format"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
)

// wrapper says what to generate: in package Package, the type Type, whose
// field Field holds the interface Iface of the package at IfacePath and
// which forwards each of its methods through a span named SpanPrefix plus
// the method's name in snake case. Doc is the type's doc comment.
type wrapper struct {
	IfacePath, Iface string
	Package          string
	Type, Field      string
	SpanPrefix       string
	Doc              string
}

// storeTrace is node's tracedStore, the one wrapper gentrace writes.
var storeTrace = wrapper{
	IfacePath:  "github.com/keygate/keygate/internal/store",
	Iface:      "Store",
	Package:    "node",
	Type:       "tracedStore",
	Field:      "st",
	SpanPrefix: "keygate.store.",
	Doc: `tracedStore gives each store call made under a recording span a child
span, keygate.store.<method> (snake case), with no attribute: what a
call reads or writes (client secrets' hashes, sealed keys, token ids)
is never recorded. The node wraps its store in it only when tracing is
on; a call without a recording span costs one context lookup. A method
without a context (Close) is passed through. tracedStore embeds
nothing, so a method added to store.Store fails to compile until this
file is generated again, rather than going untraced.`,
}

// The packages the generated spans come from, and the module's own
// prefix, whose imports are grouped last.
const (
	telemetryPath = "github.com/keygate/keygate/internal/telemetry"
	tracePath     = "go.opentelemetry.io/otel/trace"
	modulePrefix  = "github.com/keygate/keygate/"
)

// reserved are the names the generated bodies use; a parameter named so
// would shadow them.
var reserved = []string{"s", "span", "telemetry", "trace"}

// generate reads w's interface from its package's source and returns the
// wrapper's file, gofmt'ed.
func generate(w wrapper) ([]byte, error) {
	pkg, err := load(w.IfacePath)
	if err != nil {
		return nil, err
	}
	return render(w, pkg)
}

// load type-checks the package at path from its source files (the ones
// this platform builds, tests excluded). Its imports are read from their
// export data, which the go command builds: the store imports only the
// standard library, and type-checking that from source too would take
// several times longer.
func load(path string) (*types.Package, error) {
	bp, err := build.Default.Import(path, ".", 0)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	files := make([]*ast.File, 0, len(bp.GoFiles))
	for _, name := range bp.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(bp.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", nil)}
	return conf.Check(path, fset, files, nil)
}

// file is the generated file as it is built: the packages its code
// names, by path, and its methods.
type file struct {
	w       wrapper
	imports map[string]string // path: name
	methods bytes.Buffer
}

// render returns the file wrapping w.Iface of pkg, w.IfacePath: one
// method per method of the interface's method set (embedded interfaces
// included), sorted by name.
func render(w wrapper, pkg *types.Package) ([]byte, error) {
	tn, ok := pkg.Scope().Lookup(w.Iface).(*types.TypeName)
	if !ok {
		return nil, fmt.Errorf("%s has no type %s", w.IfacePath, w.Iface)
	}
	iface, ok := tn.Type().Underlying().(*types.Interface)
	if !ok {
		return nil, fmt.Errorf("%s.%s is not an interface", w.IfacePath, w.Iface)
	}
	f := &file{w: w, imports: map[string]string{pkg.Path(): pkg.Name()}}
	ms := make([]*types.Func, iface.NumMethods())
	for i := range ms {
		ms[i] = iface.Method(i)
	}
	slices.SortFunc(ms, func(a, b *types.Func) int { return strings.Compare(a.Name(), b.Name()) })
	for _, m := range ms {
		if err := f.method(m); err != nil {
			return nil, fmt.Errorf("%s.%s.%s: %w", w.IfacePath, w.Iface, m.Name(), err)
		}
	}
	return f.bytes(pkg.Name())
}

// method writes m's wrapper: a span around the call when m's first
// parameter is a context.Context, the bare call otherwise.
func (f *file) method(m *types.Func) error {
	sig := m.Type().(*types.Signature)
	params, args, err := f.params(sig)
	if err != nil {
		return err
	}
	call := fmt.Sprintf("s.%s.%s(%s)", f.w.Field, m.Name(), args)
	if sig.Results().Len() > 0 {
		call = "return " + call
	}
	fmt.Fprintf(&f.methods, "\nfunc (s %s) %s(%s)%s {", f.w.Type, m.Name(), params, f.results(sig))
	ctx := contextParam(sig)
	if ctx == "" {
		fmt.Fprintf(&f.methods, " %s }\n", call)
		return nil
	}
	f.imports[telemetryPath], f.imports[tracePath] = "telemetry", "trace"
	fmt.Fprintf(&f.methods, "\n\t%s, span := telemetry.StartChild(%s, %q, trace.SpanKindClient)\n\tdefer span.End()\n\t%s\n}\n",
		ctx, ctx, f.w.SpanPrefix+snake(m.Name()), call)
	return nil
}

// params returns sig's parameter list, one "name type" each, and the
// arguments that pass them on.
func (f *file) params(sig *types.Signature) (params, args string, err error) {
	ps := sig.Params()
	decl, use := make([]string, ps.Len()), make([]string, ps.Len())
	for i := range ps.Len() {
		p := ps.At(i)
		switch {
		case p.Name() == "" || p.Name() == "_":
			return "", "", fmt.Errorf("parameter %d has no name", i+1)
		case slices.Contains(reserved, p.Name()):
			return "", "", fmt.Errorf("parameter %s: the generated code uses that name", p.Name())
		}
		typ, dots := p.Type(), ""
		if sig.Variadic() && i == ps.Len()-1 {
			typ, dots = typ.(*types.Slice).Elem(), "..."
		}
		decl[i] = p.Name() + " " + dots + types.TypeString(typ, f.qualify)
		use[i] = p.Name() + dots
	}
	return strings.Join(decl, ", "), strings.Join(use, ", "), nil
}

// results returns sig's result list as it follows the parameters: types
// only, in parentheses when there are more than one.
func (f *file) results(sig *types.Signature) string {
	rs := sig.Results()
	ts := make([]string, rs.Len())
	for i := range ts {
		ts[i] = types.TypeString(rs.At(i).Type(), f.qualify)
	}
	switch len(ts) {
	case 0:
		return ""
	case 1:
		return " " + ts[0]
	}
	return " (" + strings.Join(ts, ", ") + ")"
}

// qualify names p in the generated file, and imports it.
func (f *file) qualify(p *types.Package) string {
	f.imports[p.Path()] = p.Name()
	return p.Name()
}

// contextParam returns the name of sig's first parameter if it is a
// context.Context, else "".
func contextParam(sig *types.Signature) string {
	if sig.Params().Len() == 0 {
		return ""
	}
	p := sig.Params().At(0)
	n, ok := types.Unalias(p.Type()).(*types.Named)
	if !ok || n.Obj().Pkg() == nil || n.Obj().Pkg().Path() != "context" || n.Obj().Name() != "Context" {
		return ""
	}
	return p.Name()
}

// bytes assembles the file: the generated-code line, the package, its
// imports, the type and its methods.
func (f *file) bytes(ifacePkg string) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Code generated by gentrace from %s.%s; DO NOT EDIT.\n", f.w.IfacePath, f.w.Iface)
	fmt.Fprintf(&b, "// To change it, change the interface or internal/node/internal/gentrace\n// and run go generate ./internal/node.\n\n")
	fmt.Fprintf(&b, "package %s\n\n", f.w.Package)
	if err := f.writeImports(&b); err != nil {
		return nil, err
	}
	iface := ifacePkg + "." + f.w.Iface
	fmt.Fprintf(&b, "\n// %s\ntype %s struct{ %s %s }\n\n", strings.ReplaceAll(f.w.Doc, "\n", "\n// "), f.w.Type, f.w.Field, iface)
	fmt.Fprintf(&b, "var _ %s = %s{}\n", iface, f.w.Type)
	b.Write(f.methods.Bytes())
	return format.Source(b.Bytes())
}

// writeImports writes the import block in three groups: the standard
// library, other modules, this module.
func (f *file) writeImports(b *bytes.Buffer) error {
	var groups [3][]string
	byName := map[string]string{}
	for path, name := range f.imports {
		if other, ok := byName[name]; ok {
			return fmt.Errorf("two imports named %s: %s and %s", name, other, path)
		}
		byName[name] = path
		switch {
		case strings.HasPrefix(path, modulePrefix):
			groups[2] = append(groups[2], path)
		case strings.Contains(strings.SplitN(path, "/", 2)[0], "."):
			groups[1] = append(groups[1], path)
		default:
			groups[0] = append(groups[0], path)
		}
	}
	b.WriteString("import (\n")
	sep := ""
	for _, g := range groups {
		if len(g) == 0 {
			continue
		}
		slices.Sort(g)
		b.WriteString(sep)
		for _, path := range g {
			fmt.Fprintf(b, "\t%q\n", path)
		}
		sep = "\n"
	}
	b.WriteString(")\n")
	return nil
}

// snake returns a Go name in snake case: GetUserByName get_user_by_name,
// an initialism one word (GetJWKSKey get_jwks_key).
func snake(name string) string {
	rs := []rune(name)
	var b strings.Builder
	for i, r := range rs {
		if unicode.IsUpper(r) && i > 0 {
			prev := rs[i-1]
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || unicode.IsUpper(prev) && nextLower {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}
