// Package docs holds coordd's design documents; this test keeps the links
// into them honest and the repository self-contained.
package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoRoot is the repository root, one level above this package.
const repoRoot = ".."

// headingSlug is GitHub's anchor for a Markdown heading: lower case, spaces
// to hyphens, everything but letters, digits, hyphens and underscores
// dropped.
func headingSlug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchorsOf returns the heading anchors of a Markdown file (headings inside
// fenced code blocks do not count).
func anchorsOf(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	out := map[string]bool{}
	fenced := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimLeft(line, "#")
		if !strings.HasPrefix(h, " ") {
			continue
		}
		out[headingSlug(h)] = true
	}
	return out
}

// sourceFiles lists the repository's Go, proto, Markdown and shell files
// and its Makefile, skipping build output and data.
func sourceFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "bin", "data", "testdata", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".proto", ".md", ".sh":
			files = append(files, path)
		default:
			if d.Name() == "Makefile" || d.Name() == "run" {
				files = append(files, path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk repository: %v", err)
	}
	return files
}

var (
	// docLink is a reference to a section of a page in docs/ from anywhere:
	// "docs/semantics.md#pchannel-terms".
	docLink = regexp.MustCompile(`docs/([a-z0-9_-]+\.md)#([A-Za-z0-9_-]+)`)
	// relLink is a Markdown link inside docs/: "(semantics.md#x)" or "(#x)".
	relLink = regexp.MustCompile(`\]\(([a-z0-9_-]+\.md)?#([A-Za-z0-9_-]+)\)`)
	// headingName cites a section by its title instead of its anchor
	// ("docs/semantics.md, \"Recovery\""); titles change, anchors are checked.
	headingName = regexp.MustCompile(`docs/[a-z0-9_-]+\.md,\s*(//\s*)?"`)
)

// TestDocLinksResolve fails when a comment or page links to a docs/ section
// that does not exist, so headings and the code that cites them stay in step.
func TestDocLinksResolve(t *testing.T) {
	pages := map[string]map[string]bool{}
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".md") {
			pages[e.Name()] = anchorsOf(t, e.Name())
		}
	}
	for _, want := range []string{"architecture.md", "semantics.md"} {
		if len(pages[want]) == 0 {
			t.Fatalf("docs/%s is missing or has no headings", want)
		}
	}
	check := func(file, page, anchor string) {
		anchors, ok := pages[page]
		switch {
		case !ok:
			t.Errorf("%s: links to docs/%s, which does not exist", file, page)
		case !anchors[anchor]:
			t.Errorf("%s: links to docs/%s#%s, which has no such heading", file, page, anchor)
		}
	}
	links := 0
	for _, f := range sourceFiles(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range docLink.FindAllStringSubmatch(string(data), -1) {
			check(f, m[1], m[2])
			links++
		}
		if loc := headingName.FindIndex(data); loc != nil {
			t.Errorf("%s: cites a docs/ section by its title (%q); link its anchor instead, e.g. docs/semantics.md#recovery",
				f, data[loc[0]:loc[1]])
		}
		if filepath.Dir(f) == filepath.Join(repoRoot, "docs") && strings.HasSuffix(f, ".md") {
			for _, m := range relLink.FindAllStringSubmatch(string(data), -1) {
				page := m[1]
				if page == "" {
					page = filepath.Base(f)
				}
				check(f, page, m[2])
				links++
			}
		}
	}
	if links == 0 {
		t.Fatal("found no links into docs/ at all; is the walk broken?")
	}
}

// outside lists ways of citing a document that is not in the repository:
// the design notes and specification the code was first written against,
// and paths on a developer's machine. Built by concatenation so this file
// does not match itself.
var outside = []*regexp.Regexp{
	regexp.MustCompile(`spec ` + `§`),
	regexp.MustCompile(`§` + `\d`),
	regexp.MustCompile(`DESIGN` + `\.md`),
	regexp.MustCompile(`\.\./` + `shared`),
	regexp.MustCompile(`milvus-` + `semantics\.md`),
	regexp.MustCompile(`research` + `/[a-z-]+\.md`),
	regexp.MustCompile(`(^|[\s("'\x60])/(work|home|Users|root)` + `/`),
}

// TestNoReferencesOutsideTheRepository fails when a source file or page
// cites a document that lives outside the repository; cite docs/ instead.
func TestNoReferencesOutsideTheRepository(t *testing.T) {
	for _, f := range sourceFiles(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			for _, re := range outside {
				if re.MatchString(line) {
					t.Errorf("%s:%d cites something outside the repository (%s): %s", f, i+1, re, strings.TrimSpace(line))
				}
			}
		}
	}
}

// readmeTableFolders returns the top-level folders the README's "What is
// here" table names in its path column (a row may name several, each in
// backticks; only the first path segment counts).
func readmeTableFolders(t *testing.T, readme string) map[string]bool {
	t.Helper()
	_, section, ok := strings.Cut(readme, "\n## What is here\n")
	if !ok {
		t.Fatal("README.md has no \"What is here\" section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	pathColumn := -1
	named := map[string]bool{}
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if pathColumn < 0 {
			for i, c := range cells {
				if strings.TrimSpace(c) == "path" {
					pathColumn = i
				}
			}
			continue
		}
		if pathColumn >= len(cells) {
			continue
		}
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(cells[pathColumn], -1) {
			top, _, _ := strings.Cut(m[1], "/")
			named[top] = true
		}
	}
	if pathColumn < 0 {
		t.Fatal("the \"What is here\" table has no \"path\" column")
	}
	return named
}

// goFolders returns the top-level folders of root that hold Go code
// anywhere below them (hidden folders left out).
func goFolders(t *testing.T, root string) []string {
	t.Helper()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		found := false
		_ = filepath.WalkDir(filepath.Join(root, e.Name()), func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(path, ".go") {
				found = true
				return filepath.SkipAll
			}
			return nil
		})
		if found {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestReadmeNamesEveryFolder: the README's "What is here" table has a row
// for every top-level folder that holds Go code, so a newcomer finds every
// package from it. Rows for other folders are allowed.
func TestReadmeNamesEveryFolder(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	named := readmeTableFolders(t, string(data))
	folders := goFolders(t, repoRoot)
	if len(folders) < 10 {
		t.Fatalf("found only %d top-level Go folders (%v): is repoRoot right?", len(folders), folders)
	}
	for _, f := range folders {
		if !named[f] {
			t.Errorf("README.md \"What is here\" names no path under %s/", f)
		}
	}
}

// TestReadmeTableCheckCanFail: the check sees a folder missing from a
// table, and reads paths from the path column only.
func TestReadmeTableCheckCanFail(t *testing.T) {
	readme := "# x\n\n## What is here\n\n| floor | path | what it owns |\n| --- | --- | --- |\n" +
		"| 1 | `fsm/`, `commands/logpb` | uses `raftnode/` |\n\n## Next\n\n| path |\n| --- |\n| `cmd/` |\n"
	named := readmeTableFolders(t, readme)
	for f, want := range map[string]bool{"fsm": true, "commands": true, "raftnode": false, "cmd": false, "floor": false} {
		if named[f] != want {
			t.Errorf("named[%q] = %v, want %v", f, named[f], want)
		}
	}
}
