package stockguard_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

var (
	// linkTarget matches the target of an inline link or image, "](target".
	linkTarget = regexp.MustCompile(`\]\(<?([^)\s>]+)>?(?:\s+"[^"]*")?\)`)
	// refTarget matches a reference definition, "[name]: target".
	refTarget  = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s+<?([^\s>]+)>?`)
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
	atxHeading = regexp.MustCompile(`^\s{0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	mdLink     = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	hasScheme  = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
)

// markdown is one Markdown file: its links and the anchors its headings make.
type markdown struct {
	links   []string
	anchors map[string]bool
}

// parseMarkdown reads the links (outside code) and the anchors of src.
func parseMarkdown(src string) markdown {
	md := markdown{anchors: map[string]bool{}}
	seen := map[string]int{}
	fence := ""
	for _, line := range strings.Split(src, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]+" ") == "" {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			for _, c := range trimmed[3:] {
				if string(c) != fence[:1] {
					break
				}
				fence += string(c)
			}
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			md.anchors[m[1]] = true
		}
		if m := atxHeading.FindStringSubmatch(line); m != nil {
			slug := anchor(m[1])
			if n := seen[slug]; n > 0 {
				md.anchors[fmt.Sprintf("%s-%d", slug, n)] = true
			} else {
				md.anchors[slug] = true
			}
			seen[slug]++
		}
		if m := refTarget.FindStringSubmatch(line); m != nil {
			md.links = append(md.links, m[1])
			continue
		}
		for _, m := range linkTarget.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			md.links = append(md.links, m[1])
		}
	}
	return md
}

// anchor is the fragment GitHub gives a heading: its text without markup,
// lowercased, every character but letters, digits, spaces, '-' and '_'
// dropped, and spaces made '-'.
func anchor(heading string) string {
	heading = mdLink.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Every relative link of every Markdown file in the repository names a file
// that exists, and every #fragment a heading (or an <a name>) of its target.
func TestDocs_linksResolve(t *testing.T) {
	files := map[string]markdown{}
	err := repoFiles(".md", func(p string, src []byte) error {
		files[p] = parseMarkdown(string(src))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no Markdown files found")
	}
	var dead []string
	for path, md := range files {
		for _, link := range md.links {
			if hasScheme.MatchString(link) || strings.HasPrefix(link, "//") {
				continue // a URL, not a file of the repository
			}
			target, frag, _ := strings.Cut(link, "#")
			resolved := path
			if target != "" {
				resolved = filepath.Clean(filepath.Join(filepath.Dir(path), target))
				if _, err := os.Stat(resolved); err != nil {
					dead = append(dead, fmt.Sprintf("%s: %s: no such file", path, link))
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(resolved, ".md") {
				continue
			}
			if !files[resolved].anchors[frag] {
				dead = append(dead, fmt.Sprintf("%s: %s: no heading makes #%s", path, link, frag))
			}
		}
	}
	if len(dead) > 0 {
		t.Errorf("%d dead links:\n%s", len(dead), strings.Join(dead, "\n"))
	}
}

func TestAnchor(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"4. The strategies, and why each exists", "4-the-strategies-and-why-each-exists"},
		{"Where the tests' servers come from", "where-the-tests-servers-come-from"},
		{"`WithReplicaAck` and `WithAOFAck`", "withreplicaack-and-withaofack"},
		{"Redis in front, MySQL behind: the [stream](x.md)", "redis-in-front-mysql-behind-the-stream"},
		{"snake_case — and dashes", "snake_case--and-dashes"},
	} {
		if got := anchor(tc.heading); got != tc.want {
			t.Errorf("anchor(%q) = %q, want %q", tc.heading, got, tc.want)
		}
	}
}

func TestParseMarkdown(t *testing.T) {
	md := parseMarkdown("# Top\n\nSee [a](a.md#x) and `[b](b.md)`.\n\n```\n[c](c.md)\n# not a heading\n```\n\n## Top\n[r]: r.md\n<a name=\"here\"></a>\n")
	if got := strings.Join(md.links, " "); got != "a.md#x r.md" {
		t.Errorf("links %q, want \"a.md#x r.md\"", got)
	}
	for _, a := range []string{"top", "top-1", "here"} {
		if !md.anchors[a] {
			t.Errorf("no anchor %q in %v", a, md.anchors)
		}
	}
	if md.anchors["not-a-heading"] {
		t.Error("a line in a code block made an anchor")
	}
}
