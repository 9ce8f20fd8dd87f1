package stockguard_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/stockguard/stockguard"

// floors gives every package of the module its floor, by path: a package
// may import packages on its own floor or below, never above, so a reader
// knows from a path what a package may import (docs/design.md, "Floors").
// The strategies sit on one floor but import none of each other.
var floors = []struct {
	prefix string // a package path relative to the module, or a tree ending in "/"
	floor  int
	name   string
}{
	{"", 0, "root"},
	{"strategy", 1, "strategy"},
	{"internal/", 2, "internal"},
	{"redislock/lock", 3, "libraries"},
	{"mysqllock", strategies, "strategies"},
	{"pglock", strategies, "strategies"},
	{"redislock", strategies, "strategies"},
	{"watchtx", strategies, "strategies"},
	{"stocktest", strategies, "strategies"},
	{"stockotel", strategies, "strategies"},
	{"tiered", 5, "composites"},
	{"bench", 6, "bench"},
	{"bench/", 6, "bench"},
	{"cmd/", 7, "cmd"},
}

// strategies is the strategies' floor: they import none of each other.
const strategies = 4

// floorOf returns the floor of a package path relative to the module, and
// false for a package no floor names.
func floorOf(rel string) (floor int, name string, ok bool) {
	for _, f := range floors {
		if rel == f.prefix || strings.HasSuffix(f.prefix, "/") && strings.HasPrefix(rel, f.prefix) {
			return f.floor, f.name, true
		}
	}
	return 0, "", false
}

// imports reads the module's own imports of every package from source
// (build tags ignored, so that -tags docker files are held to the floors
// too). Tests are left out: an external test package may import a higher
// floor without a cycle (internal/counterexample's tests run stocktest).
// Directories with a go.mod of their own are other modules.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	pkgs := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			base := d.Name()
			if p != "." && (strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_") || base == "testdata") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); p != "." && err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(filepath.Dir(p))
		if rel == "." {
			rel = ""
		}
		if _, ok := pkgs[rel]; !ok {
			pkgs[rel] = nil
		}
		for _, spec := range f.Imports {
			imp, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return err
			}
			if imp == module || strings.HasPrefix(imp, module+"/") {
				dep := strings.TrimPrefix(strings.TrimPrefix(imp, module), "/")
				if !slices.Contains(pkgs[rel], dep) {
					pkgs[rel] = append(pkgs[rel], dep)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

func TestFloors_importsGoNoHigher(t *testing.T) {
	pkgs := imports(t)
	for _, must := range []string{"", "strategy", "internal/combine", "redislock/lock", "mysqllock", "redislock", "bench", "bench/faults", "cmd/stockbench"} {
		if _, ok := pkgs[must]; !ok {
			t.Fatalf("package %q not found: the walk is broken, not the floors", path.Join(module, must))
		}
	}
	for pkg, deps := range pkgs {
		floor, name, ok := floorOf(pkg)
		if !ok {
			t.Errorf("%s has no floor: give it one in floors (and docs/design.md)", path.Join(module, pkg))
			continue
		}
		for _, dep := range deps {
			depFloor, depName, ok := floorOf(dep)
			switch {
			case !ok:
				t.Errorf("%s imports %s, which has no floor", pkg, dep)
			case depFloor > floor:
				t.Errorf("%s (%s) imports %s (%s): an arrow up the floors", path.Join(module, pkg), name, dep, depName)
			case floor == strategies && depFloor == strategies:
				t.Errorf("strategy %s imports strategy %s: share code through internal/ instead", pkg, dep)
			}
		}
	}
}

func TestFloorOf(t *testing.T) {
	for _, tc := range []struct {
		pkg   string
		floor int
		ok    bool
	}{
		{"", 0, true},
		{"strategy", 1, true},
		{"strategyx", 0, false},
		{"internal/combine", 2, true},
		{"internal/backends/backendstest", 2, true},
		{"redislock/lock", 3, true},
		{"redislock", strategies, true},
		{"redislock/other", 0, false},
		{"tiered", 5, true},
		{"bench", 6, true},
		{"bench/faults", 6, true},
		{"benchmarks", 0, false},
		{"cmd/stockbench", 7, true},
		{"examples", 0, false},
	} {
		floor, _, ok := floorOf(tc.pkg)
		if floor != tc.floor || ok != tc.ok {
			t.Errorf("floorOf(%q) = %d, %v; want %d, %v", tc.pkg, floor, ok, tc.floor, tc.ok)
		}
	}
}
