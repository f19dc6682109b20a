// Package scaffold writes a new Go module that serves its own tools with
// mcptasks on every platform (mcptasks init): a tools package with one
// example task tool and its test, one-statement entry points for the local
// server, Vercel and AWS Lambda, vercel.json, template.yaml, a Makefile and
// a README. The files are templates embedded in the binary.
//
// A module made from a local checkout of mcptasks (Options.Replace) gets a
// copy of the library's packages it uses in [VendorDir], which its go.mod
// replaces the library with: it builds wherever it is copied (Vercel's
// builder, sam build, CI), where the checkout is not.
package scaffold

import (
	"embed"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

//go:embed all:template
var files embed.FS

// Options says what to generate.
type Options struct {
	// Dir is the directory to write the module into; it is created if
	// missing, and no existing file in it is overwritten.
	Dir string
	// Module is the module path, e.g. example.com/transcode.
	Module string
	// Name is the command name (cmd/NAME) and the server name (default:
	// the last element of Module).
	Name string
	// Version is the mcptasks version to require (e.g. v0.2.0).
	Version string
	// Replace, when set, is a local mcptasks checkout: the packages of
	// the library that the module uses are copied from it into
	// [VendorDir], and go.mod replaces the library with that copy.
	Replace string
	// GoVersion is the go directive, with a patch version, as Vercel's
	// builder requires (e.g. 1.26.0).
	GoVersion string
}

var (
	nameRE    = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)
	moduleRE  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._~/-]*[A-Za-z0-9]$`)
	versionRE = regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)
	goRE      = regexp.MustCompile(`^\d+\.\d+\.\d+$`)
)

// IsVersion reports whether v is a version a module can require: a
// semantic version tag or a pseudo-version (no +build suffix).
func IsVersion(v string) bool { return versionRE.MatchString(v) }

// LibraryModule is the module path of the mcptasks library.
const LibraryModule = "github.com/mcptasks/mcptasks"

// VendorDir is where a module made from a checkout (Options.Replace) holds
// its copy of the library, relative to the module's root (slash-separated).
const VendorDir = "third_party/mcptasks"

// ErrExists is returned (wrapped, naming the files) when a file to be
// written already exists; nothing is written then.
var ErrExists = errors.New("file exists")

// Write generates the module and returns the paths it wrote, relative to
// Dir, sorted.
func Write(o Options) ([]string, error) {
	if o.Name == "" {
		o.Name = path.Base(o.Module)
	}
	switch {
	case o.Dir == "":
		return nil, errors.New("no directory given")
	case !moduleRE.MatchString(o.Module) || strings.Contains(o.Module, "//") || strings.Contains(o.Module, ".."):
		return nil, fmt.Errorf("module path %q is not valid (want something like example.com/transcode)", o.Module)
	case !nameRE.MatchString(o.Name):
		return nil, fmt.Errorf("name %q is not valid: lower-case letters, digits, - and _, starting with a letter", o.Name)
	case !IsVersion(o.Version):
		return nil, fmt.Errorf("mcptasks version %q is not a semantic version such as v0.2.0", o.Version)
	case !goRE.MatchString(o.GoVersion):
		return nil, fmt.Errorf("go version %q must have a patch version, such as 1.26.0", o.GoVersion)
	}
	type out = libFile
	// Plain placeholders rather than text/template, whose use of
	// reflection keeps every exported method of every type in the binary
	// (about 9 MB more in mcptasks).
	library := ""
	if o.Replace != "" {
		library = strings.ReplaceAll(vendoredLibrary, "[[.VendorDir]]", VendorDir)
	}
	vars := strings.NewReplacer("[[.Module]]", o.Module, "[[.Name]]", o.Name, "[[.Version]]", o.Version, "[[.GoVersion]]", o.GoVersion,
		"[[.Library]]\n", library)
	var outs []out
	err := fs.WalkDir(files, "template", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		src, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		rel := strings.TrimSuffix(strings.TrimPrefix(p, "template/"), ".tmpl")
		rel = strings.ReplaceAll(rel, "__NAME__", o.Name)
		if rel == "gitignore" {
			rel = ".gitignore" // go:embed skips dot files unless all:, and module zips drop them
		}
		text := vars.Replace(string(src))
		if i := strings.Index(text, "[["); i >= 0 {
			return fmt.Errorf("template %s: unknown placeholder at %q", p, text[i:min(len(text), i+20)])
		}
		if rel == "go.mod" && o.Replace != "" {
			text += "\nreplace " + LibraryModule + " => ./" + VendorDir + "\n"
		}
		outs = append(outs, out{rel, []byte(text)})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if o.Replace != "" {
		lib, err := vendorLibrary(o.Replace, outs)
		if err != nil {
			return nil, err
		}
		for _, f := range lib {
			outs = append(outs, out{VendorDir + "/" + f.rel, f.data})
		}
	}
	var exist []string
	for _, f := range outs {
		if _, err := os.Lstat(filepath.Join(o.Dir, filepath.FromSlash(f.rel))); err == nil {
			exist = append(exist, f.rel)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	if len(exist) > 0 {
		return nil, fmt.Errorf("%w in %s, not overwriting: %s", ErrExists, o.Dir, strings.Join(exist, ", "))
	}
	var wrote []string
	for _, f := range outs {
		dst := filepath.Join(o.Dir, filepath.FromSlash(f.rel))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return wrote, err
		}
		// O_EXCL: a file that appeared since the check is not overwritten.
		w, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return wrote, err
		}
		_, err = w.Write(f.data)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return wrote, err
		}
		wrote = append(wrote, f.rel)
	}
	slices.Sort(wrote)
	return wrote, nil
}

// vendoredLibrary is the README's section on the copy of the library.
const vendoredLibrary = `## The mcptasks library

` + "`[[.VendorDir]]/`" + ` is a copy of the mcptasks packages this module uses, taken from the checkout
` + "`mcptasks init`" + ` ran in; ` + "`go.mod`" + ` replaces the library with it, so the module builds wherever it
is copied (Vercel's builder, ` + "`sam build`" + `, CI), without the checkout. To move to a published
version of mcptasks, drop the copy and the replace and require directives, and require the release:

` + "```sh" + `
rm -rf [[.VendorDir]]
go mod edit -dropreplace=github.com/mcptasks/mcptasks -droprequire=github.com/mcptasks/mcptasks
go get github.com/mcptasks/mcptasks@latest
go mod tidy
` + "```" + `

`

// libFile is a file of a module: its slash-separated path and contents.
type libFile struct {
	rel  string
	data []byte
}

// vendorLibrary returns the files of the library in checkout that the
// generated files gen need: the go.mod, go.sum and licence of the module,
// and every package gen imports, directly or through another one (each
// package's files but its tests), with paths relative to the checkout.
func vendorLibrary(checkout string, gen []libFile) ([]libFile, error) {
	root := os.DirFS(checkout)
	var files []libFile
	for _, name := range []string{"go.mod", "go.sum", "LICENSE"} {
		b, err := fs.ReadFile(root, name)
		if errors.Is(err, fs.ErrNotExist) && name != "go.mod" {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("copying the library from %s: %w", checkout, err)
		}
		files = append(files, libFile{name, b})
	}
	seen := map[string]bool{}
	var queue []string
	need := func(src []byte, from string) error {
		f, err := parser.ParseFile(token.NewFileSet(), from, src, parser.ImportsOnly)
		if err != nil {
			return fmt.Errorf("copying the library: %w", err)
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			rel, ok := strings.CutPrefix(p, LibraryModule+"/")
			if ok && !seen[rel] {
				seen[rel] = true
				queue = append(queue, rel)
			}
		}
		return nil
	}
	for _, f := range gen {
		if strings.HasSuffix(f.rel, ".go") {
			if err := need(f.data, f.rel); err != nil {
				return nil, err
			}
		}
	}
	for len(queue) > 0 {
		dir := queue[0]
		queue = queue[1:]
		entries, err := fs.ReadDir(root, dir)
		if err != nil {
			return nil, fmt.Errorf("copying the library from %s: package %s: %w", checkout, dir, err)
		}
		n := len(files)
		for _, e := range entries {
			name := e.Name()
			if !e.Type().IsRegular() || strings.HasSuffix(name, "_test.go") || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				continue
			}
			b, err := fs.ReadFile(root, dir+"/"+name)
			if err != nil {
				return nil, fmt.Errorf("copying the library from %s: %w", checkout, err)
			}
			files = append(files, libFile{dir + "/" + name, b})
			if strings.HasSuffix(name, ".go") {
				if err := need(b, dir+"/"+name); err != nil {
					return nil, err
				}
			}
		}
		if !slices.ContainsFunc(files[n:], func(f libFile) bool { return strings.HasSuffix(f.rel, ".go") }) {
			return nil, fmt.Errorf("copying the library from %s: package %s has no Go files", checkout, dir)
		}
	}
	slices.SortFunc(files, func(a, b libFile) int { return strings.Compare(a.rel, b.rel) })
	return files, nil
}
