package stockguard_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// quotable collects, from every example file of the repository (nested
// modules included), the text a document may quote: the body of each
// Example function, dedented, each whole top-level function of an
// example_*_test.go file (the helpers an example calls), and each example
// file of one Example function as the main.go it shows (asMain).
func quotable(t *testing.T) map[string]string {
	t.Helper()
	texts := map[string]string{}
	fset := token.NewFileSet()
	err := repoFiles("_test.go", func(p string, src []byte) error {
		f, err := parser.ParseFile(fset, p, src, parser.ParseComments)
		if err != nil {
			return err
		}
		exampleFile := strings.HasPrefix(filepath.Base(p), "example")
		if exampleFile {
			if main, ok := asMain(fset, f, src); ok {
				texts[main] = p + " as main.go"
			}
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			where := p + ": " + fn.Name.Name
			if strings.HasPrefix(fn.Name.Name, "Example") {
				body := string(src[fset.Position(fn.Body.Lbrace).Offset+1 : fset.Position(fn.Body.Rbrace).Offset])
				texts[dedent(body)] = where
			}
			if exampleFile {
				texts[string(src[fset.Position(fn.Pos()).Offset:fset.Position(fn.End()).Offset])] = where
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return texts
}

// repoFiles calls fn with the path and contents of every file of the
// repository (nested modules included) whose name ends in suffix, skipping
// hidden directories and testdata.
func repoFiles(suffix string, fn func(path string, src []byte) error) error {
	return filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, suffix) {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return fn(p, src)
	})
}

// asMain returns an example file holding one Example function as the
// complete program it shows: package main, the file's imports, and the
// Example renamed main. A document may quote that whole.
func asMain(fset *token.FileSet, f *ast.File, src []byte) (string, bool) {
	var example *ast.FuncDecl
	for _, decl := range f.Decls {
		if fn, ok := decl.(*ast.FuncDecl); ok {
			if example != nil || !strings.HasPrefix(fn.Name.Name, "Example") {
				return "", false
			}
			example = fn
		}
	}
	if example == nil {
		return "", false
	}
	off := func(p token.Pos) int { return fset.Position(p).Offset }
	return "package main" + string(src[off(f.Name.End()):off(example.Name.Pos())]) + "main" +
		strings.TrimRight(string(src[off(example.Name.End()):]), "\n"), true
}

// dedent drops the body's outer newlines and one tab from each line.
func dedent(body string) string {
	lines := strings.Split(strings.Trim(body, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, "\t")
	}
	return strings.Join(lines, "\n")
}

var goBlock = regexp.MustCompile("(?ms)^```go\n(.*?)\n```")

// goBlocks returns the ```go blocks of a Markdown file.
func goBlocks(t *testing.T, path string) []string {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for _, m := range goBlock.FindAllStringSubmatch(string(src), -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// declaresOnly reports whether a block is a listing of declarations (types,
// interfaces), not code to run; such a block names the API, and each type
// it declares must exist in the root package.
func declaresOnly(block string) ([]string, bool) {
	f, err := parser.ParseFile(token.NewFileSet(), "", "package p\n"+block, 0)
	if err != nil {
		return nil, false
	}
	var names []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.TYPE {
			return nil, false
		}
		for _, s := range g.Specs {
			names = append(names, s.(*ast.TypeSpec).Name.Name)
		}
	}
	return names, true
}

// rootTypes lists the types the root package declares.
func rootTypes(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.TYPE {
				for _, s := range g.Specs {
					types[s.(*ast.TypeSpec).Name.Name] = true
				}
			}
		}
	}
	return types
}

// Every Go snippet of README.md and docs/ is the text of an example the
// tests compile (and, for the examples that need a server, run: each
// package's TestExamples_run), so a snippet cannot drift from code that
// works.
func TestSnippets_quoteExamples(t *testing.T) {
	texts := quotable(t)
	types := rootTypes(t)
	docs, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := 0
	for _, path := range append([]string{"README.md"}, docs...) {
		for i, block := range goBlocks(t, path) {
			if path == "README.md" {
				readme++
			}
			if _, ok := texts[block]; ok {
				continue
			}
			if names, ok := declaresOnly(block); ok {
				for _, n := range names {
					if !types[n] {
						t.Errorf("%s, Go block %d declares %s, which the root package does not", path, i+1, n)
					}
				}
				continue
			}
			t.Errorf("%s, Go block %d is not the body of an Example, a function of an example file, or an example file as main.go:\n%s", path, i+1, block)
		}
	}
	if readme == 0 {
		t.Error("README.md has no Go example")
	}
}

func TestDedent(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"\n\tx := 1\n\tif x > 0 {\n\t\tprintln(x)\n\t}\n", "x := 1\nif x > 0 {\n\tprintln(x)\n}"},
		{"\n\tdo()\n\n\tdone()\n", "do()\n\ndone()"},
	} {
		if got := dedent(tc.in); got != tc.want {
			t.Errorf("dedent(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestAsMain(t *testing.T) {
	for _, tc := range []struct {
		src, want string
		ok        bool
	}{
		{"package x_test\n\nimport \"fmt\"\n\n// Shows.\nfunc Example() {\n\tfmt.Println()\n}\n",
			"package main\n\nimport \"fmt\"\n\n// Shows.\nfunc main() {\n\tfmt.Println()\n}", true},
		{"package x_test\n\nfunc ExampleA() {}\n\nfunc ExampleB() {}\n", "", false},
		{"package x_test\n\nfunc Example() {}\n\nfunc helper() {}\n", "", false},
	} {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "", tc.src, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := asMain(fset, f, []byte(tc.src)); got != tc.want || ok != tc.ok {
			t.Errorf("asMain(%q) = %q, %v; want %q, %v", tc.src, got, ok, tc.want, tc.ok)
		}
	}
}
