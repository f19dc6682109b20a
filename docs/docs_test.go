// Package docs holds the reference documentation (the Markdown files
// beside this one) and its test: every command README.md and docs/*.md
// show is run by a test.
package docs

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// root is the repository, from this package's directory.
const root = ".."

// shellLanguages are the info strings of fenced blocks that hold commands
// a reader runs.
var shellLanguages = map[string]bool{"sh": true, "shell": true, "bash": true, "console": true, "zsh": true}

// marker is the comment that names what runs the block below it: a test
// (`<!-- test: e2e/cli_readme_test.go TestReadmeCallIt -->`), or a script
// that runs the block's commands itself (`<!-- test: .ci/run -->`, the CI
// entry point that runs the README's test command).
var marker = regexp.MustCompile(`^<!-- test: (\S+)(?: (\S+))? -->$`)

// block is one fenced block of commands in a Markdown file.
type block struct {
	file    string // relative to the repository
	line    int    // of the opening fence, from 1
	lang    string
	body    string
	markers []string // the marker lines right above it, in order
}

func (b block) String() string { return fmt.Sprintf("%s:%d (```%s)", b.file, b.line, b.lang) }

// commandBlocks returns the fenced blocks of commands (shellLanguages) of
// README.md and docs/*.md, each with the marker lines right above its
// opening fence (blank lines between them allowed).
func commandBlocks(t *testing.T) []block {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{filepath.Join(root, "README.md")}, files...)
	var blocks []block
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		lines := strings.Split(string(raw), "\n")
		for i := 0; i < len(lines); i++ {
			fence := strings.TrimSpace(lines[i])
			if !strings.HasPrefix(fence, "```") {
				continue
			}
			lang := strings.Fields(strings.TrimPrefix(fence, "```") + " ")
			end := i + 1
			for end < len(lines) && strings.TrimSpace(lines[end]) != "```" {
				end++
			}
			if end == len(lines) {
				t.Fatalf("%s:%d: a fenced block that does not end", rel, i+1)
			}
			if len(lang) > 0 && shellLanguages[lang[0]] {
				b := block{file: filepath.ToSlash(rel), line: i + 1, lang: lang[0], body: strings.Join(lines[i+1:end], "\n")}
				for j := i - 1; j >= 0; j-- {
					l := strings.TrimSpace(lines[j])
					if l == "" && len(b.markers) == 0 {
						continue
					}
					if !strings.HasPrefix(l, "<!-- test:") {
						break
					}
					b.markers = append([]string{l}, b.markers...)
				}
				blocks = append(blocks, b)
			}
			i = end
		}
	}
	return blocks
}

// commands returns the block's command lines: without comments, blank
// lines and line continuations' breaks.
func commands(body string) []string {
	var out []string
	for _, l := range strings.Split(strings.ReplaceAll(body, "\\\n", " "), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// TestDocsCommandsAreTested: every block of commands (```sh, ```shell,
// ```bash, ```console, ```zsh) in README.md and docs/*.md is preceded by
// one or more markers naming what runs it: a test file of this repository
// that declares the test (`<!-- test: path/x_test.go TestName -->`), or an
// executable script of the repository that contains each of the block's
// commands (`<!-- test: .ci/run -->`). A command the tests do not run is
// written as prose, not as a block a reader would paste.
func TestDocsCommandsAreTested(t *testing.T) {
	blocks := commandBlocks(t)
	if len(blocks) < 10 {
		t.Fatalf("found %d blocks of commands in README.md and docs/*.md; the docs show more", len(blocks))
	}
	for _, b := range blocks {
		if len(b.markers) == 0 {
			t.Errorf("%s has no <!-- test: path/to/file_test.go TestName --> marker naming the test that runs it", b)
			continue
		}
		for _, m := range b.markers {
			sub := marker.FindStringSubmatch(m)
			if sub == nil {
				t.Errorf("%s: malformed marker %q", b, m)
				continue
			}
			path, name := sub[1], sub[2]
			src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(path)))
			if err != nil {
				t.Errorf("%s: the marker names %s: %v", b, path, err)
				continue
			}
			switch {
			case strings.HasSuffix(path, "_test.go"):
				if name == "" || !regexp.MustCompile(`(?m)^func `+regexp.QuoteMeta(name)+`\(t \*testing\.T\) \{`).Match(src) {
					t.Errorf("%s: %s declares no test %q", b, path, name)
				}
			case name != "":
				t.Errorf("%s: the marker names %s %s, but only a _test.go file holds tests", b, path, name)
			default:
				if st, err := os.Stat(filepath.Join(root, filepath.FromSlash(path))); err != nil || st.Mode()&0o111 == 0 {
					t.Errorf("%s: the marker names %s, which is not an executable script", b, path)
				}
				for _, c := range commands(b.body) {
					if !regexp.MustCompile(`(?m)^(exec )?` + regexp.QuoteMeta(c) + `$`).Match(src) {
						t.Errorf("%s: the script %s does not run %q", b, path, c)
					}
				}
			}
		}
	}
	t.Logf("%d blocks of commands, each run by the test its marker names", len(blocks))
}

// TestDocsPackageMap: architecture.md's package map names every package
// of the module (as `path` or `path/`), so that a new one is placed there.
func TestDocsPackageMap(t *testing.T) {
	const module = "github.com/mcptasks/mcptasks"
	cmd := exec.Command("go", "list", module+"/...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	doc, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	pkgs := strings.Fields(string(out))
	if len(pkgs) < 40 {
		t.Fatalf("go list reported %d packages; the module has more", len(pkgs))
	}
	for _, p := range pkgs {
		rel, ok := strings.CutPrefix(p, module+"/")
		if !ok {
			t.Errorf("%s: a package outside a directory of the module", p)
			continue
		}
		if !strings.Contains(string(doc), "`"+rel+"`") && !strings.Contains(string(doc), "`"+rel+"/`") {
			t.Errorf("docs/architecture.md's package map does not name %s", rel)
		}
	}
}

// headingAnchor is GitHub's anchor of a Markdown heading: lower case,
// punctuation dropped, spaces as hyphens.
func headingAnchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

var (
	fencedRE  = regexp.MustCompile("(?s)```.*?```")
	headingRE = regexp.MustCompile(`(?m)^#+ (.*)$`)
	linkRE    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
)

// TestDocsLinks: every relative link of README.md, BENCHMARKS.md and
// docs/*.md names a
// file of the repository, and every #anchor into a Markdown file one
// of its headings, so that moving text between pages breaks no link.
func TestDocsLinks(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]map[string]bool{} // by cleaned path
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		a := map[string]bool{}
		for _, m := range headingRE.FindAllStringSubmatch(fencedRE.ReplaceAllString(string(raw), ""), -1) {
			a[headingAnchor(m[1])] = true
		}
		anchors[path] = a
		return a
	}
	n := 0
	for _, f := range append([]string{filepath.Join(root, "README.md"), filepath.Join(root, "BENCHMARKS.md")}, files...) {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range linkRE.FindAllStringSubmatch(fencedRE.ReplaceAllString(string(raw), ""), -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			n++
			path, anchor, _ := strings.Cut(link, "#")
			target := filepath.Clean(f)
			if path != "" {
				target = filepath.Join(filepath.Dir(f), filepath.FromSlash(path))
			}
			if _, err := os.Stat(target); err != nil {
				t.Errorf("%s links to %s, which does not exist", f, link)
				continue
			}
			if anchor != "" && strings.HasSuffix(target, ".md") && !anchorsOf(target)[anchor] {
				t.Errorf("%s links to %s: %s has no heading #%s", f, link, target, anchor)
			}
		}
	}
	t.Logf("%d relative links", n)
}

// TestDocsConfiguration: configuration.md names every MCPTASKS_*
// variable the code of pkg/ and cmd/ reads (its tests aside).
func TestDocsConfiguration(t *testing.T) {
	doc, err := os.ReadFile("configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`"(MCPTASKS_[A-Z0-9_]*[A-Z0-9])"`)
	seen := map[string]string{}
	for _, dir := range []string{"pkg", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range name.FindAllStringSubmatch(string(src), -1) {
				seen[m[1]] = path
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) < 30 {
		t.Fatalf("found %d MCPTASKS_* variables in the code; it reads more", len(seen))
	}
	for v, path := range seen {
		if !strings.Contains(string(doc), "`"+v+"`") {
			t.Errorf("%s reads %s, which docs/configuration.md does not name", path, v)
		}
	}
}
