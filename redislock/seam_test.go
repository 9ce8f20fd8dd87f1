package redislock

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strings"
	"testing"
)

// lockFiles are the lock library: the inventories (every other non-test
// file but options.go, which both share, and doc.go) may use only what
// these export.
var lockFiles = []string{"client.go", "lock.go", "reentrant.go", "wait.go", "watchdog.go", "redlock.go", "pipeline.go"}

// TestSeam_inventoriesUseOnlyExportedLockAPI parses the package and fails
// when an inventory file names an unexported function, type, variable,
// constant, method or field of the lock library (one the inventories do
// not declare themselves, as hold.valid or Segmented.keys).
func TestSeam_inventoriesUseOnlyExportedLockAPI(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	lockTop, lockMembers := map[string]bool{}, map[string]bool{}
	invTop, invMembers := map[string]bool{}, map[string]bool{}
	invFiles := map[string]*ast.File{}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || name == "doc.go" {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		top, members := invTop, invMembers
		switch {
		case slices.Contains(lockFiles, name):
			top, members = lockTop, lockMembers
		case name != "options.go":
			invFiles[name] = f
		}
		declared(f, top, members)
	}
	if len(lockTop) == 0 || len(invFiles) == 0 {
		t.Fatal("found no lock or no inventory files: the check would prove nothing")
	}
	for _, f := range invFiles {
		sels := map[*ast.Ident]bool{} // names after a dot: members, checked as such
		ast.Inspect(f, func(n ast.Node) bool {
			if n, ok := n.(*ast.SelectorExpr); ok {
				sels[n.Sel] = true
				if sel := n.Sel.Name; !ast.IsExported(sel) && lockMembers[sel] && !invMembers[sel] {
					t.Errorf("%s: .%s reaches into the lock library", fset.Position(n.Sel.Pos()), sel)
				}
			}
			if id, ok := n.(*ast.Ident); ok && !sels[id] && !ast.IsExported(id.Name) && lockTop[id.Name] && !invTop[id.Name] {
				t.Errorf("%s: %s is the lock library's", fset.Position(id.Pos()), id.Name)
			}
			return true
		})
	}
}

// declared records the unexported top-level names of f, and the names of
// its methods, struct fields and interface methods.
func declared(f *ast.File, top, members map[string]bool) {
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv != nil {
				members[d.Name.Name] = true
			} else {
				top[d.Name.Name] = true
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					top[s.Name.Name] = true
				case *ast.ValueSpec:
					for _, n := range s.Names {
						top[n.Name] = true
					}
				}
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		var fields *ast.FieldList
		switch n := n.(type) {
		case *ast.StructType:
			fields = n.Fields
		case *ast.InterfaceType:
			fields = n.Methods
		}
		if fields != nil {
			for _, fl := range fields.List {
				for _, id := range fl.Names {
					members[id.Name] = true
				}
			}
		}
		return true
	})
}
