package cli

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// formerPackages are names keygate's packages had: moved code can bring
// their prefixes back.
var formerPackages = []string{"keyring", "keys", "transitkeys", "transitapi", "benchrun", "benchreport"}

// prefixAllowed are the "package:word" pairs where a word that is also a
// package's name begins an error in that package for another reason.
var prefixAllowed = map[string]bool{
	"audit:node": true, // the node field of an audit record
}

// publicPackages are the module's packages for other programs to import.
// Their errors keep Go's convention for a library's errors ("jose:
// expired", as crypto/x509's begin "x509: "): a program that imports them
// shows them among its own, where the package name says whose they are.
var publicPackages = []string{"jose/", "middleware/"}

// TestNoPackagePrefixInErrors scans the module's Go files: no error text
// begins with the name of one of its packages ("node: ", "keyring: "), Go's
// convention, which names code rather than what the operator did. The
// command line prints errors as they are, without the regex of package
// names it once stripped them with, so such a prefix would reach the
// operator. An error text is the message of errors.New, fmt.Errorf and
// operr's constructors, and any string literal of an Error() method.
func TestNoPackagePrefixInErrors(t *testing.T) {
	root := moduleRoot(t)
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") {
			rel, _ := filepath.Rel(root, path)
			for _, p := range publicPackages {
				if strings.HasPrefix(filepath.ToSlash(rel), p) {
					return nil
				}
			}
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	parsed := make(map[string]*ast.File, len(files))
	names := map[string]bool{}
	for _, n := range formerPackages {
		names[n] = true
	}
	for _, path := range files {
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed[path] = f
		if pkg := strings.TrimSuffix(f.Name.Name, "_test"); pkg != "main" {
			names[pkg] = true
		}
	}
	names["jose"], names["middleware"] = true, true
	if !names["cli"] || !names["rootkey"] || len(names) < 20 {
		t.Fatalf("the scan found only the packages %v under %s", names, root)
	}
	texts := 0
	for _, path := range files {
		f := parsed[path]
		pkg := strings.TrimSuffix(f.Name.Name, "_test")
		for _, lit := range errorTexts(f) {
			texts++
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				continue
			}
			word, _, ok := strings.Cut(s, ": ")
			if ok && names[word] && !prefixAllowed[pkg+":"+word] {
				rel, _ := filepath.Rel(root, fset.Position(lit.Pos()).Filename)
				t.Errorf("%s:%d: error text %q begins with the package name %q: say what failed in the operator's words", rel, fset.Position(lit.Pos()).Line, s, word)
			}
		}
	}
	if texts < 500 {
		t.Errorf("the scan found only %d error texts: is errorTexts still finding them?", texts)
	}
}

// errorTexts lists the string literals that begin an error's text in f.
func errorTexts(f *ast.File) []*ast.BasicLit {
	local := map[string]string{} // the name a file gives errors, fmt and operr
	for _, im := range f.Imports {
		path, _ := strconv.Unquote(im.Path.Value)
		switch path {
		case "errors", "fmt", "github.com/keygate/keygate/internal/operr":
			name := path[strings.LastIndex(path, "/")+1:]
			if im.Name != nil {
				local[im.Name.Name] = name
			} else {
				local[name] = name
			}
		}
	}
	var out []*ast.BasicLit
	add := func(e ast.Expr) {
		for {
			b, ok := e.(*ast.BinaryExpr)
			if !ok || b.Op != token.ADD {
				break
			}
			e = b.X
		}
		if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			out = append(out, lit)
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			id, ok := sel.X.(*ast.Ident)
			if !ok {
				return true
			}
			arg := -1
			switch local[id.Name] + "." + sel.Sel.Name {
			case "errors.New", "fmt.Errorf", "operr.New", "operr.Errorf":
				arg = 0
			case "operr.Wrap", "operr.Wrapf":
				arg = 1
			}
			if arg >= 0 && arg < len(n.Args) {
				add(n.Args[arg])
			}
		case *ast.FuncDecl:
			if n.Recv != nil && n.Name.Name == "Error" && n.Body != nil && n.Type.Params.NumFields() == 0 {
				ast.Inspect(n.Body, func(m ast.Node) bool {
					if lit, ok := m.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						out = append(out, lit)
					}
					return true
				})
			}
		}
		return true
	})
	return out
}

// moduleRoot is the directory of the go.mod above the test's directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
