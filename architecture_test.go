package keygate_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestArchitectureTree keeps ARCHITECTURE.md's map of the tree true: its
// first code block after "## The tree" names every directory of the
// repository that holds Go files, each once, and nothing that is not a
// directory here; and every package has a doc comment saying its job.
// A package added, moved or removed without the map fails here.
func TestArchitectureTree(t *testing.T) {
	listed := architectureEntries(t)
	var have []string
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && p != "." && (name == "testdata" || strings.HasPrefix(name, ".") || name == "node_modules") {
			return fs.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(name, ".go") {
			dir := filepath.ToSlash(filepath.Dir(p)) + "/"
			if !slices.Contains(have, dir) {
				have = append(have, dir)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, e := range listed {
		count[e]++
		if count[e] == 2 {
			t.Errorf("ARCHITECTURE.md lists %s twice", e)
		}
		if fi, err := os.Stat(e); err != nil || !fi.IsDir() {
			t.Errorf("ARCHITECTURE.md lists %s, which is not a directory here", e)
		}
	}
	for _, dir := range have {
		if dir == "./" {
			continue // this test's own directory: the repository's root
		}
		if count[dir] == 0 {
			t.Errorf("%s holds Go files but ARCHITECTURE.md's tree does not list it", dir)
		}
		checkPackageDoc(t, dir)
	}
}

// architectureEntries reads the directories the tree block lists: each
// line that starts at the margin with a path ending in '/', with
// {a,b} alternatives expanded.
func architectureEntries(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "\n## The tree\n")
	if i < 0 {
		t.Fatal(`ARCHITECTURE.md has no "## The tree" section`)
	}
	start := strings.Index(doc[i:], "\n```")
	if start < 0 {
		t.Fatal("no code block under ## The tree")
	}
	block := doc[i+start+4:]
	block = block[strings.Index(block, "\n")+1:]
	block = block[:strings.Index(block, "\n```")]
	entry := regexp.MustCompile(`^([a-z][^\s]*/)(\s|$)`)
	brace := regexp.MustCompile(`\{([^}]*)\}`)
	var out []string
	for _, line := range strings.Split(block, "\n") {
		m := entry.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		p := m[1]
		if b := brace.FindStringSubmatchIndex(p); b != nil {
			for _, alt := range strings.Split(p[b[2]:b[3]], ",") {
				out = append(out, p[:b[0]]+alt+p[b[1]:])
			}
			continue
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		t.Fatal("the tree block lists no directory")
	}
	return out
}

// checkPackageDoc: some non-test file of dir begins with a doc comment
// "Package <name> ..." (or, for a command, "Command <name> ...").
func checkPackageDoc(t *testing.T, dir string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	sawCode := false
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			return
		}
		sawCode = true
		if af.Doc == nil {
			continue
		}
		text := af.Doc.Text()
		if strings.HasPrefix(text, "Package "+af.Name.Name+" ") ||
			(af.Name.Name == "main" && strings.HasPrefix(text, "Command ")) {
			return
		}
	}
	if sawCode {
		t.Errorf("%s: no package doc comment (\"Package name ...\") says what it is for", dir)
	}
}
