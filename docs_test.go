package keygate_test

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode"
)

// docFiles are the Markdown files a reader of the repository follows links
// through: the front page, the contributors' guide, the maps and every page
// under docs/.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "CONTRIBUTING.md", "ARCHITECTURE.md", "BENCHMARKS.md"}
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append(files, pages...)
}

// TestDocLinks: every relative link in the documentation names a file of the
// repository, and every #anchor a heading of the page it points to, as
// GitHub renders it. A page moved or a heading renamed breaks this test, not
// a reader's click.
func TestDocLinks(t *testing.T) {
	docs := map[string]*mdDoc{}
	load := func(path string) (*mdDoc, error) {
		if d, ok := docs[path]; ok {
			return d, nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		d := parseMarkdown(string(b))
		docs[path] = d
		return d, nil
	}
	for _, file := range docFiles(t) {
		d, err := load(file)
		if err != nil {
			t.Errorf("%s: %v", file, err)
			continue
		}
		for _, l := range d.links {
			if msg := checkLink(file, l.target, load); msg != "" {
				t.Errorf("%s:%d: link %q: %s", file, l.line, l.target, msg)
			}
		}
	}
}

// TestDocCommands: every `keygate …` command line in a sh, bash, shell or
// console block names a real command and only flags that command defines,
// as the built binary's -h says. The commands a reader pastes cannot name a
// flag that was renamed or removed.
func TestDocCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/keygate (about half a minute on two cores); run without -short")
	}
	table := newBinaryCommands(t)
	for _, file := range docFiles(t) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Errorf("%s: %v", file, err)
			continue
		}
		for _, c := range shellCommands(string(b)) {
			if msg := checkCommand(c.words, table); msg != "" {
				t.Errorf("%s:%d: %s: %s", file, c.line, strings.Join(c.words, " "), msg)
			}
		}
	}
}

var updateCLI = flag.Bool("update", false, "rewrite docs/cli.md from the binary's help")

// cliReference is the command reference page.
const cliReference = "docs/cli.md"

// TestCLIReference: docs/cli.md is the help of every command, as the
// binary built from this tree prints it, so the reference cannot drift from
// the commands. go test . -run CLIReference -update rewrites it.
func TestCLIReference(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/keygate (about half a minute on two cores); run without -short")
	}
	table := newBinaryCommands(t)
	var b bytes.Buffer
	b.WriteString("# Command reference\n\n" +
		"Every `keygate` command and its flags, as `keygate -h` and `keygate <command> -h` print them.\n" +
		"This page is generated from the binary (`go test . -run CLIReference -update` rewrites it, and\n" +
		"the test fails when it is out of date).\n\n")
	for _, p := range table.order {
		anchor := githubSlug("keygate " + p)
		fmt.Fprintf(&b, "- [keygate %s](#%s)\n", p, anchor)
	}
	fmt.Fprintf(&b, "\n## keygate\n\n```text\n%s\n```\n", strings.TrimRight(table.help, "\n"))
	for _, p := range table.order {
		out := helpOutput(table.bin, append(strings.Fields(p), "-h")...)
		fmt.Fprintf(&b, "\n## keygate %s\n\n```text\n%s\n```\n", p, strings.TrimRight(string(out), "\n"))
	}
	if *updateCLI {
		if err := os.WriteFile(cliReference, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	have, err := os.ReadFile(cliReference)
	if err != nil {
		t.Fatalf("%v (go test . -run CLIReference -update writes it)", err)
	}
	if !bytes.Equal(have, b.Bytes()) {
		t.Errorf("%s is not what the commands' help says; go test . -run CLIReference -update rewrites it", cliReference)
	}
}

// TestDocChecksFindBreakage: the two checks above fail on a broken link, a
// heading that is not there, a command or a flag that does not exist, and
// read shell lines the way a shell splits them.
func TestDocChecksFindBreakage(t *testing.T) {
	dir := t.TempDir()
	page := "# A page\n\n## Set up (a fresh machine)\n\nsee [x](#set-up-a-fresh-machine), [y](other.md#a-heading)\n"
	if err := os.WriteFile(filepath.Join(dir, "page.md"), []byte(page), 0o600); err != nil {
		t.Fatal(err)
	}
	other := "# Other\n\n## A heading\n\n## A heading\n\n### `code` and *emphasis*, (parens)\n"
	if err := os.WriteFile(filepath.Join(dir, "other.md"), []byte(other), 0o600); err != nil {
		t.Fatal(err)
	}
	load := func(path string) (*mdDoc, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		return parseMarkdown(string(b)), nil
	}
	from := filepath.Join(dir, "page.md")
	links := []struct {
		target string
		ok     bool
	}{
		{"#set-up-a-fresh-machine", true},
		{"#set-up", false},
		{"other.md", true},
		{"other.md#a-heading", true},
		{"other.md#a-heading-1", true},
		{"other.md#a-heading-2", false},
		{"other.md#code-and-emphasis-parens", true},
		{"missing.md", false},
		{"missing.md#x", false},
		{"https://example.com/x#y", true},
		{"../../outside.md", false},
	}
	for _, l := range links {
		if msg := checkLink(from, l.target, load); (msg == "") != l.ok {
			t.Errorf("link %q: got %q, want ok=%v", l.target, msg, l.ok)
		}
	}

	table := fakeCommands{
		"serve":         {"proxy": true, "dev": false},
		"token":         {"client": true, "secret": true},
		"token inspect": {},
		"config nginx":  {"app": true},
	}
	block := "```sh\n" +
		"keygate serve --proxy nginx --dev   # a comment --bogus\n" +
		"TOKEN=$(keygate token --client \"$id\" --secret x) && echo ok\n" +
		"FOO=bar keygate serve \\\n  --proxy=caddy\n" +
		"keygate config nginx --app 127.0.0.1:9000 > keygate.conf\n" +
		"keygate serve --tls-cert-file x\n" +
		"echo \"$(keygate tokens inspect x)\" | jq .jti\n" +
		"keygate config nginx|caddy\n" +
		"keygate config\n" +
		"keygate token inspect \"$TOKEN\" [--bad]\n" +
		"keygate token inspect x > out.txt 2>&1; keygate token inspect y >out\n" +
		"```\n" +
		"```go\nkeygate serve --nope\n```\n"
	var got []string
	for _, c := range shellCommands(block) {
		if msg := checkCommand(c.words, table); msg != "" {
			got = append(got, fmt.Sprintf("%d %s", c.line, msg))
		}
	}
	want := []string{
		`7 unknown flag --tls-cert-file of keygate serve`,
		`8 no command "keygate tokens"`,
		`10 no command "keygate config"`,
		`11 unknown flag --bad of keygate token inspect`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems found:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// mdDoc is what the checks need of a Markdown page: its links and the
// anchors its headings (and explicit HTML anchors) define.
type mdDoc struct {
	links   []mdLink
	anchors map[string]bool
}

type mdLink struct {
	line   int
	target string
}

var (
	fenceRE      = regexp.MustCompile("^ {0,3}(```+|~~~+)\\s*([\\w+-]*)")
	headingRE    = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	inlineCodeRE = regexp.MustCompile("`+[^`]*`+")
	linkRE       = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	htmlAnchorRE = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	mdLinkTextRE = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// parseMarkdown reads the links and heading anchors outside code blocks and
// inline code.
func parseMarkdown(text string) *mdDoc {
	d := &mdDoc{anchors: map[string]bool{}}
	seen := map[string]int{}
	fence := ""
	for i, line := range strings.Split(text, "\n") {
		if m := fenceRE.FindStringSubmatch(line); m != nil {
			switch {
			case fence == "":
				fence = m[1]
				continue
			case strings.HasPrefix(m[1], fence) && strings.TrimSpace(line) == m[1]:
				fence = ""
				continue
			}
		}
		if fence != "" {
			continue
		}
		for _, m := range htmlAnchorRE.FindAllStringSubmatch(line, -1) {
			d.anchors[m[1]] = true
		}
		if m := headingRE.FindStringSubmatch(line); m != nil {
			slug := githubSlug(m[2])
			if n := seen[slug]; n > 0 {
				d.anchors[fmt.Sprintf("%s-%d", slug, n)] = true
			} else {
				d.anchors[slug] = true
			}
			seen[slug]++
		}
		prose := inlineCodeRE.ReplaceAllString(line, "")
		for _, m := range linkRE.FindAllStringSubmatch(prose, -1) {
			d.links = append(d.links, mdLink{line: i + 1, target: m[1]})
		}
	}
	return d
}

// githubSlug is the anchor GitHub gives a heading: its text as rendered,
// lower case, with everything but letters, digits, spaces, hyphens and
// underscores dropped, and spaces made hyphens.
func githubSlug(heading string) string {
	heading = mdLinkTextRE.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// checkLink says what is wrong with a link from the page at from, or "".
// Links with a scheme (https:, mailto:) are not followed.
func checkLink(from, target string, load func(string) (*mdDoc, error)) string {
	u, err := url.Parse(target)
	if err != nil {
		return err.Error()
	}
	if u.Scheme != "" || u.Host != "" {
		return ""
	}
	path := from
	if u.Path != "" {
		if filepath.IsAbs(u.Path) {
			return "an absolute path; write it relative to the page"
		}
		path = filepath.Join(filepath.Dir(from), filepath.FromSlash(u.Path))
		// The repository's pages are named relative to its root, where the
		// test runs; the self-test's pages by absolute paths in a directory
		// of their own, which then stands for the repository.
		root := "."
		if filepath.IsAbs(from) {
			root = filepath.Dir(from)
		}
		if r, err := filepath.Rel(root, path); err != nil || r == ".." || strings.HasPrefix(r, "../") {
			return "points outside the repository, which a clone does not have"
		}
		if _, err := os.Stat(path); err != nil {
			return "no such file"
		}
	}
	if u.Fragment == "" || !strings.HasSuffix(path, ".md") {
		return ""
	}
	d, err := load(path)
	if err != nil {
		return err.Error()
	}
	if !d.anchors[u.Fragment] {
		return fmt.Sprintf("%s has no heading with the anchor #%s", path, u.Fragment)
	}
	return ""
}

// shellCommand is one simple command of a shell block, split into words.
type shellCommand struct {
	line  int
	words []string
}

// shellCommands returns the simple commands of every sh, bash, shell or
// console block: continuation lines joined, comments dropped, pipelines,
// lists (&&, ||, ;, &) and command substitutions $(...) split into their
// commands. In a console block only lines prompted with "$ " are commands.
func shellCommands(text string) []shellCommand {
	var out []shellCommand
	var lang, fence string
	var pending strings.Builder
	start := 0
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if m := fenceRE.FindStringSubmatch(line); m != nil {
			if fence == "" {
				fence, lang = m[1], m[2]
				continue
			}
			if strings.TrimSpace(line) == fence {
				fence = ""
				continue
			}
		}
		if fence == "" || !slices.Contains([]string{"sh", "bash", "shell", "console"}, lang) {
			continue
		}
		if pending.Len() == 0 {
			if lang == "console" {
				rest, ok := strings.CutPrefix(strings.TrimSpace(line), "$ ")
				if !ok {
					continue
				}
				line = rest
			}
			start = n
		}
		if body, ok := strings.CutSuffix(line, `\`); ok {
			pending.WriteString(body + " ")
			continue
		}
		pending.WriteString(line)
		for _, words := range splitShell(pending.String()) {
			out = append(out, shellCommand{line: start, words: words})
		}
		pending.Reset()
	}
	return out
}

// splitShell splits one command line into simple commands of words, as a
// shell would for what the checks need: quotes group, a # at the start of a
// word begins a comment, redirections and their targets are dropped, and the
// inside of each $(...) is a command of its own.
func splitShell(line string) [][]string {
	var cmds [][]string
	var words []string
	var word strings.Builder
	inWord := false
	skipNext := false // the next word is a redirection's target
	endWord := func() {
		if inWord && skipNext {
			skipNext = false
		} else if inWord {
			words = append(words, word.String())
		}
		word.Reset()
		inWord = false
	}
	endCmd := func() {
		endWord()
		if len(words) > 0 {
			cmds = append(cmds, words)
		}
		words = nil
	}
	rs := []rune(line)
	var quote rune
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		if r == '$' && i+1 < len(rs) && rs[i+1] == '(' && quote != '\'' {
			end := matchParen(rs, i+1)
			cmds = append(cmds, splitShell(string(rs[i+2:end]))...)
			word.WriteString("X")
			inWord = true
			i = end
			continue
		}
		if quote != 0 {
			if r == quote {
				quote = 0
			} else {
				word.WriteRune(r)
			}
			continue
		}
		switch {
		case r == '\'' || r == '"':
			quote = r
			inWord = true
		case r == '#' && !inWord:
			endCmd()
			return cmds
		case r == ' ' || r == '\t':
			endWord()
		case r == '|' || r == ';' || r == '&':
			endCmd()
		case r == '>' || r == '<':
			if inWord && isDigits(word.String()) { // 2>file
				word.Reset()
				inWord = false
			}
			endWord()
			for i+1 < len(rs) && (rs[i+1] == '>' || rs[i+1] == '&') {
				i++
			}
			skipNext = true
			if i+1 < len(rs) && rs[i+1] != ' ' {
				// the target follows at once: 2>&1, >file
				for i+1 < len(rs) && rs[i+1] != ' ' {
					i++
				}
				skipNext = false
			}
		default:
			word.WriteRune(r)
			inWord = true
		}
	}
	endCmd()
	return cmds
}

func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// matchParen returns the index of the ')' closing the '(' at open, or the
// end of the line.
func matchParen(rs []rune, open int) int {
	depth := 0
	var quote rune
	for i := open; i < len(rs); i++ {
		switch r := rs[i]; {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '(':
			depth++
		case r == ')':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return len(rs)
}

// commandTable answers which keygate commands exist and the flags of each:
// flags maps a flag's name to whether it takes a value.
type commandTable interface {
	flags(path string) (flags map[string]bool, ok bool)
	isGroup(word string) bool
}

var envAssignRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// checkCommand says what is wrong with a simple command that runs keygate
// (keygate, ./keygate, go run ./cmd/keygate; after env assignments or sudo),
// or "" for a good one or another program.
func checkCommand(words []string, table commandTable) string {
	for len(words) > 0 && (envAssignRE.MatchString(words[0]) || slices.Contains([]string{"sudo", "exec", "time", "nohup", "env"}, words[0])) {
		words = words[1:]
	}
	switch {
	case len(words) >= 3 && words[0] == "go" && words[1] == "run" && words[2] == "./cmd/keygate":
		words = words[3:]
	case len(words) > 0 && (words[0] == "keygate" || words[0] == "./keygate"):
		words = words[1:]
	default:
		return ""
	}
	if len(words) == 0 || strings.HasPrefix(words[0], "-") {
		for _, w := range words {
			if !slices.Contains([]string{"-h", "-help", "--help", "--version", "-version"}, w) {
				return fmt.Sprintf("keygate takes no flag %s before a command", w)
			}
		}
		return ""
	}
	var path string
	var flags map[string]bool
	var rest []string
	for _, n := range []int{2, 1} {
		if len(words) < n {
			continue
		}
		p := strings.Join(words[:n], " ")
		if f, ok := table.flags(p); ok {
			path, flags, rest = p, f, words[n:]
			break
		}
	}
	if path == "" {
		p := words[0]
		if len(words) > 1 && table.isGroup(words[0]) && !strings.HasPrefix(words[1], "-") {
			p += " " + words[1]
		}
		return fmt.Sprintf("no command %q", "keygate "+p)
	}
	takesValue := false
	for _, w := range rest {
		w = strings.TrimRight(strings.TrimLeft(w, "["), "].")
		if takesValue {
			takesValue = false
			continue
		}
		if !strings.HasPrefix(w, "-") || w == "-" || w == "--" {
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(w, "-"), "=")
		if name == "h" || name == "help" {
			continue
		}
		v, ok := flags[name]
		if !ok {
			return fmt.Sprintf("unknown flag --%s of keygate %s", name, path)
		}
		takesValue = v && !hasValue
	}
	return ""
}

// fakeCommands is a command table for the checks' own test.
type fakeCommands map[string]map[string]bool

func (f fakeCommands) flags(path string) (map[string]bool, bool) {
	fl, ok := f[path]
	return fl, ok
}

func (f fakeCommands) isGroup(word string) bool {
	for p := range f {
		if strings.HasPrefix(p, word+" ") {
			return true
		}
	}
	return false
}

// binaryCommands is the command table of the keygate binary built from this
// tree: the commands `keygate -h` lists, each one's flags from its own -h.
type binaryCommands struct {
	bin   string
	order []string // the commands in the order -h lists them
	paths map[string]bool
	help  string // keygate -h
	mu    sync.Mutex
	cache map[string]map[string]bool
}

var (
	helpCommandRE = regexp.MustCompile(`^  ([a-z][a-z-]*(?: [a-z][a-z-]*)?)  +\S`)
	helpFlagRE    = regexp.MustCompile(`^  -([A-Za-z0-9][\w.-]*)(?: (\S+))?`)
)

func newBinaryCommands(t *testing.T) *binaryCommands {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "keygate")
	build := exec.Command("go", "build", "-o", bin, "./cmd/keygate")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/keygate: %v\n%s", err, out)
	}
	out := helpOutput(bin, "-h")
	b := &binaryCommands{bin: bin, paths: map[string]bool{}, cache: map[string]map[string]bool{}}
	for _, line := range strings.Split(string(out), "\n") {
		if m := helpCommandRE.FindStringSubmatch(line); m != nil && !b.paths[m[1]] {
			b.paths[m[1]] = true
			b.order = append(b.order, m[1])
		}
	}
	b.help = string(out)
	if !b.paths["serve"] || !b.paths["token inspect"] {
		t.Fatalf("keygate -h lists no serve or token inspect command; the help's format changed?\n%s", out)
	}
	return b
}

func (b *binaryCommands) flags(path string) (map[string]bool, bool) {
	if !b.paths[path] {
		return nil, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if f, ok := b.cache[path]; ok {
		return f, true
	}
	out := helpOutput(b.bin, append(strings.Fields(path), "-h")...)
	f := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if m := helpFlagRE.FindStringSubmatch(line); m != nil {
			f[m[1]] = m[2] != ""
		}
	}
	b.cache[path] = f
	return f, true
}

// helpOutput runs the binary for its help in an environment of its own, so
// that defaults drawn from the machine (GOMAXPROCS) or from KEYGATE_*
// variables print the same everywhere.
func helpOutput(bin string, args ...string) string {
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"GOMAXPROCS=2", "PATH=" + os.Getenv("PATH")}
	out, _ := cmd.CombinedOutput() // -h exits non-zero by the flag package's convention
	return string(out)
}

func (b *binaryCommands) isGroup(word string) bool {
	for p := range b.paths {
		if strings.HasPrefix(p, word+" ") {
			return true
		}
	}
	return false
}
