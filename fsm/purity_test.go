package fsm

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The FSM must be pure (see doc.go): no clock, randomness, I/O, goroutines or
// locks, and no raft. These rules are checked on the source.

var bannedImports = map[string]bool{
	"os":                        true,
	"net":                       true,
	"net/http":                  true,
	"math/rand":                 true,
	"math/rand/v2":              true,
	"crypto/rand":               true,
	"sync":                      true,
	"sync/atomic":               true,
	"time":                      true,
	"log":                       true,
	"github.com/hashicorp/raft": true,
}

// bannedImportPrefix covers every raft package (raft-boltdb, raft/...).
const bannedImportPrefix = "github.com/hashicorp/raft"

var bannedSelectorCalls = map[string]bool{"Now": true, "Since": true, "Sleep": true}

// purityViolations lists every rule file breaks, as "file:line: reason".
func purityViolations(fset *token.FileSet, file *ast.File) []string {
	var out []string
	report := func(pos token.Pos, format string, args ...any) {
		out = append(out, fmt.Sprintf("%s: %s", fset.Position(pos), fmt.Sprintf(format, args...)))
	}
	for _, imp := range file.Imports {
		path, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			report(imp.Pos(), "unreadable import %s", imp.Path.Value)
			continue
		}
		if bannedImports[path] || strings.HasPrefix(path, bannedImportPrefix) {
			report(imp.Pos(), "imports %q", path)
		}
	}
	ast.Inspect(file, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			report(n.Pos(), "starts a goroutine")
		case *ast.CallExpr:
			if sel, ok := ast.Unparen(n.Fun).(*ast.SelectorExpr); ok && bannedSelectorCalls[sel.Sel.Name] {
				report(n.Pos(), "calls %s", sel.Sel.Name)
			}
		}
		return true
	})
	return out
}

func TestFSMIsPure(t *testing.T) {
	paths, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := map[string]bool{}
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		file, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parse %s: %v", path, err)
		}
		checked[path] = true
		for _, v := range purityViolations(fset, file) {
			t.Errorf("fsm is not pure: %s", v)
		}
	}
	// Guard against checking nothing (a moved package, a wrong glob).
	for _, must := range []string{"apply.go", "snapshot.go", "state.go"} {
		if !checked[must] {
			names := make([]string, 0, len(checked))
			for n := range checked {
				names = append(names, n)
			}
			sort.Strings(names)
			t.Fatalf("purity check did not see %s (saw %v)", must, names)
		}
	}
}

// TestPurityDetector proves the detector can fail: each sample breaks one
// rule and must be flagged for it; the clean sample must pass.
func TestPurityDetector(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string // substring of the violation; "" means clean
	}{
		{"clean", `package fsm
import (
	"bufio"
	"fmt"
	"io"
	"github.com/benbjohnson/immutable"
)
func f(w io.Writer) { _ = bufio.NewWriter(w); fmt.Println(immutable.NewList[int]()) }
type clock struct{ Nowish int }
func g(c clock) int { return c.Nowish }`, ""},
		{"os", `package fsm; import "os"; var _ = os.Args`, `imports "os"`},
		{"net", `package fsm; import "net"; var _ net.IP`, `imports "net"`},
		{"net/http", `package fsm; import "net/http"; var _ = http.Get`, `imports "net/http"`},
		{"math/rand", `package fsm; import "math/rand"; var _ = rand.Int`, `imports "math/rand"`},
		{"math/rand/v2 renamed", `package fsm; import r "math/rand/v2"; var _ = r.Int`, `imports "math/rand/v2"`},
		{"crypto/rand", `package fsm; import "crypto/rand"; var _ = rand.Reader`, `imports "crypto/rand"`},
		{"sync", `package fsm; import "sync"; var mu sync.Mutex`, `imports "sync"`},
		{"sync/atomic", `package fsm; import "sync/atomic"; var n atomic.Int64`, `imports "sync/atomic"`},
		{"time", `package fsm; import "time"; var _ time.Duration`, `imports "time"`},
		{"log", `package fsm; import "log"; var _ = log.Printf`, `imports "log"`},
		{"raft", `package fsm; import "github.com/hashicorp/raft"; var _ raft.FSM`, `imports "github.com/hashicorp/raft"`},
		{"raft subpackage", `package fsm; import _ "github.com/hashicorp/raft-boltdb/v2"`, `imports "github.com/hashicorp/raft-boltdb/v2"`},
		{"blank import", `package fsm; import _ "time"`, `imports "time"`},
		{"go statement", `package fsm; func f() { go func() {}() }`, "starts a goroutine"},
		{"Now", `package fsm; type c struct{}; func (c) Now() int { return 0 }; func f(x c) int { return x.Now() }`, "calls Now"},
		{"Since", `package fsm; func f(clock interface{ Since(int) int }) int { return clock.Since(1) }`, "calls Since"},
		{"Sleep in parens", `package fsm; func f(c interface{ Sleep() }) { (c.Sleep)() }`, "calls Sleep"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fset := token.NewFileSet()
			file, err := parser.ParseFile(fset, "sample.go", tt.src, parser.SkipObjectResolution)
			if err != nil {
				t.Fatalf("sample does not parse: %v", err)
			}
			got := purityViolations(fset, file)
			if tt.want == "" {
				if len(got) != 0 {
					t.Fatalf("clean sample flagged: %v", got)
				}
				return
			}
			if len(got) != 1 || !strings.Contains(got[0], tt.want) {
				t.Fatalf("violations %v, want exactly one containing %q", got, tt.want)
			}
		})
	}
}
