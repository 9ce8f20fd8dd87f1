package stockguard_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A reader finishes what they start: the README stays within 150 lines and
// every page of docs/ within 250, and the pages a reader consults rather
// than reads through open by saying what the reader does with them.
func TestDocs_short(t *testing.T) {
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	limits := map[string]int{"README.md": 150}
	for _, p := range pages {
		limits[p] = 250
	}
	for path, limit := range limits {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(src), "\n"); n > limit {
			t.Errorf("%s is %d lines, more than %d", path, n, limit)
		}
	}
	for _, page := range []string{"design", "checkout", "faults", "results", "benchmarking"} {
		src, err := os.ReadFile("docs/" + page + ".md")
		if err != nil {
			t.Fatal(err)
		}
		// The paragraph under the title.
		if _, body, _ := strings.Cut(string(src), "\n\n"); !strings.HasPrefix(body, "Read this page to") && !strings.HasPrefix(body, "Read this page before") {
			t.Errorf("docs/%s.md does not open with what a reader does with it (\"Read this page to …\")", page)
		}
	}
}
