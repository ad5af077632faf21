package buzz_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestNoSettingsGlobals fails when code in internal/ (tests and the TEST
// ONLY *test packages apart, whose process-wide caches such as dbtest's
// shared cluster are what they are for) writes a
// package-level variable: an assignment, ++/--, or a Store, Add, Swap or
// CompareAndSwap on it. A setting kept that way (a process-wide default set
// once at start) is shared by every part of the process, tests included,
// and hides from the constructor that uses it: a setting reaches a part
// through its constructor's Config (docs/ARCHITECTURE.md "Composition
// root"). Variables written only by
// their declaration (sentinel errors, tables, compiled regexps, metric
// descriptions) are fine.
func TestNoSettingsGlobals(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	byDir := map[string][]*ast.File{}
	err := filepath.WalkDir("internal", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasSuffix(d.Name(), "test") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			return err
		}
		byDir[filepath.Dir(path)] = append(byDir[filepath.Dir(path)], f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for dir, files := range byDir {
		found = append(found, writtenInPackage(fset, dir, files)...)
	}
	slices.Sort(found)
	for _, f := range found {
		t.Errorf("%s: a package-level variable written by code; pass the value through a constructor instead", f)
	}
}

// writtenInPackage returns "dir.name (file:line)" for each package-level
// variable of files written by a statement in a function body.
func writtenInPackage(fset *token.FileSet, dir string, files []*ast.File) []string {
	globals := map[string]bool{}
	for _, f := range files {
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				for _, n := range spec.(*ast.ValueSpec).Names {
					if n.Name != "_" {
						globals[n.Name] = true
					}
				}
			}
		}
	}
	var out []string
	for _, f := range files {
		// isGlobal is true when id names a package-level variable: resolved
		// to a declaration of this file's top level, or unresolved in the
		// file (declared in another file of the package) and a global's name.
		isGlobal := func(e ast.Expr) (string, bool) {
			id, ok := e.(*ast.Ident)
			if !ok || !globals[id.Name] {
				return "", false
			}
			if id.Obj == nil {
				return id.Name, true
			}
			if f.Scope.Lookup(id.Name) == id.Obj {
				return id.Name, true
			}
			return "", false
		}
		report := func(name string, pos token.Pos) {
			out = append(out, filepath.ToSlash(dir)+"."+name+" ("+fset.Position(pos).String()+")")
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				switch s := n.(type) {
				case *ast.AssignStmt:
					if s.Tok == token.DEFINE {
						return true
					}
					for _, l := range s.Lhs {
						if name, ok := isGlobal(l); ok {
							report(name, l.Pos())
						}
					}
				case *ast.IncDecStmt:
					if name, ok := isGlobal(s.X); ok {
						report(name, s.Pos())
					}
				case *ast.CallExpr:
					sel, ok := s.Fun.(*ast.SelectorExpr)
					if !ok || !slices.Contains([]string{"Store", "Add", "Swap", "CompareAndSwap"}, sel.Sel.Name) {
						return true
					}
					if name, ok := isGlobal(sel.X); ok {
						report(name, s.Pos())
					}
				}
				return true
			})
		}
	}
	return out
}
