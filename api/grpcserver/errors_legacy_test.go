package grpcserver

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// legacyErrorFiles are the files that build errors of a class as
// fmt.Errorf("%w: detail", kind), which publicMessage reads off the error
// tree (errors_public.go). The commands package stays so: Apply records
// its refusals' text (with %v), which must not change (fsm's golden log).
var legacyErrorFiles = []string{
	"commands/codec.go",
	"commands/validate.go",
	"commands/broadcast_request.go",
}

// kindNames are the names under which the kinds of a class whose words a
// caller should not see are wrapped (the classes' sentinels, commands',
// and the aliases packages give them).
var kindNames = map[string]bool{
	"ErrInvalid": true, "ErrNotFound": true, "ErrPrecondition": true, "ErrTooLarge": true,
	"errInvalid": true, "errNotFound": true, "errPrecondition": true,
}

// notKinds are packages whose sentinels of those names carry words of their
// own ("objectstore: object not found"), which stay in the message.
var notKinds = map[string]bool{"objectstore": true, "wal": true}

// TestLegacyErrorSites: no file but legacyErrorFiles builds an error of a
// class as fmt.Errorf("%w...", kind) (use vocab.Errorf(kind, ...), whose
// text is the public message), and each of those files still does (so the
// list only shrinks).
func TestLegacyErrorSites(t *testing.T) {
	root := filepath.Join("..", "..")
	found := map[string]int{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if notKinds[f.Name.Name] {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		ast.Inspect(f, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok && isLegacyErrorf(call) {
				found[filepath.ToSlash(rel)]++
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{}
	for _, f := range legacyErrorFiles {
		allowed[f] = true
		if found[f] == 0 {
			t.Errorf("%s builds no error the old way any more: take it off legacyErrorFiles", f)
		}
	}
	var bad []string
	for f, n := range found {
		if !allowed[f] {
			bad = append(bad, f+" ("+strconv.Itoa(n)+")")
		}
	}
	sort.Strings(bad)
	for _, f := range bad {
		t.Errorf("%s builds an error of a class with fmt.Errorf(\"%%w: ...\", kind): use vocab.Errorf(kind, ...), whose text is what the caller sees", f)
	}
}

// isLegacyErrorf: call is fmt.Errorf whose format starts with %w and whose
// first argument is a kind (kindNames, outside notKinds).
func isLegacyErrorf(call *ast.CallExpr) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Errorf" || len(call.Args) < 2 {
		return false
	}
	if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "fmt" {
		return false
	}
	lit, ok := call.Args[0].(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return false
	}
	format, err := strconv.Unquote(lit.Value)
	if err != nil || !strings.HasPrefix(format, "%w") {
		return false
	}
	switch a := call.Args[1].(type) {
	case *ast.Ident:
		return kindNames[a.Name]
	case *ast.SelectorExpr:
		pkg, ok := a.X.(*ast.Ident)
		return kindNames[a.Sel.Name] && !(ok && notKinds[pkg.Name])
	}
	return false
}
