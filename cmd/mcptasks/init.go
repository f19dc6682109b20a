package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"

	"github.com/mcptasks/mcptasks/cmd/mcptasks/internal/scaffold"
	"github.com/mcptasks/mcptasks/pkg/platform/local"
)

// modulePath is mcptasks' own module path.
const modulePath = "github.com/mcptasks/mcptasks"

// goDirective is the go line of generated modules: this module's own (a
// test keeps them equal), with the patch version Vercel's builder needs.
const goDirective = "1.26.0"

// develVersion is what a generated module requires when this binary has no
// released version; a replace directive then points at a checkout.
const develVersion = "v0.0.0-00010101000000-000000000000"

var initCommand = local.Command{
	Name:    "init",
	Summary: "scaffold a module serving your own tools: mcptasks init DIR --module PATH [--name NAME]",
	Run:     runInit,
}

func runInit(_ context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("mcptasks init", flag.ContinueOnError)
	fs.SetOutput(stdout)
	module := fs.String("module", "", "module path of the new module, e.g. example.com/transcode (required)")
	name := fs.String("name", "", "command and server name (default: the module path's last element)")
	replace := fs.String("replace", "", "a local mcptasks checkout to copy the library from into "+scaffold.VendorDir+", which go.mod's replace directive points at (default: the checkout the current directory is in, when this mcptasks has no released version)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: mcptasks init DIR --module PATH [--name NAME] [--replace CHECKOUT]\n\n"+
			"Writes a Go module into DIR that serves its own task tools locally (go run ./cmd/NAME),\n"+
			"on Vercel (api/, vercel.json) and on AWS Lambda (cmd/lambda/, template.yaml, Makefile).\n"+
			"Existing files are never overwritten.\n\n")
		fs.PrintDefaults()
	}
	var dir string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		dir, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return local.Usagef("init: %v", err)
	}
	if dir == "" && fs.NArg() > 0 {
		dir = fs.Arg(0)
	} else if fs.NArg() > 0 {
		return local.Usagef("init: unexpected argument %q", fs.Arg(0))
	}
	if dir == "" || *module == "" {
		return local.Usagef("init needs DIR and --module PATH")
	}
	version, checkout := ownVersion()
	if *replace != "" {
		checkout = *replace
	}
	if checkout != "" {
		abs, err := filepath.Abs(checkout)
		if err != nil {
			return err
		}
		if !isCheckout(abs) {
			return fmt.Errorf("init: --replace %s: no go.mod of %s there", checkout, modulePath)
		}
		checkout = filepath.ToSlash(abs)
	} else if version == develVersion {
		return fmt.Errorf("init: this mcptasks has no released version to require; run it inside an mcptasks checkout or pass --replace PATH-TO-CHECKOUT")
	}
	wrote, err := scaffold.Write(scaffold.Options{
		Dir: dir, Module: *module, Name: *name, Version: version, Replace: checkout, GoVersion: goDirective,
	})
	if err != nil {
		return fmt.Errorf("init: %w", err)
	}
	vendored := 0
	for _, f := range wrote {
		if strings.HasPrefix(f, scaffold.VendorDir+"/") {
			vendored++
			continue
		}
		fmt.Fprintln(stdout, filepath.Join(dir, f))
	}
	if vendored > 0 {
		fmt.Fprintf(stdout, "%s/ (%d files: the mcptasks packages the module uses, copied from %s; see README.md)\n",
			filepath.Join(dir, filepath.FromSlash(scaffold.VendorDir)), vendored, checkout)
	}
	cmd := *name
	if cmd == "" {
		cmd = filepath.Base(*module)
	}
	fmt.Fprintf(stdout, "\nNext:\n  cd %s\n  go mod tidy\n  go run ./cmd/%s      # serves http://127.0.0.1:8080/mcp\n  go test ./...\n", dir, cmd)
	return nil
}

// ownVersion returns the mcptasks version this binary was built from, and,
// when it has none that a module could require, the checkout the current
// directory is in (or "").
func ownVersion() (version, checkout string) {
	if bi, ok := debug.ReadBuildInfo(); ok {
		v := bi.Main.Version
		if bi.Main.Path != modulePath {
			for _, d := range bi.Deps {
				if d.Path == modulePath {
					v = d.Version
				}
			}
		}
		if tagged.MatchString(v) {
			return v, ""
		}
		if scaffold.IsVersion(v) {
			version = v // a pseudo-version: used when no checkout is found
		}
	}
	if version == "" {
		version = develVersion
	}
	dir, err := os.Getwd()
	for err == nil {
		if isCheckout(dir) {
			return develVersion, dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return version, ""
}

// tagged matches a released version; scaffold.IsVersion also accepts a
// pseudo-version, which a module can require if its commit was pushed.
var tagged = regexp.MustCompile(`^v\d+\.\d+\.\d+$`)

// isCheckout reports whether dir holds mcptasks' go.mod.
func isCheckout(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) == 2 && fields[0] == "module" {
			return fields[1] == modulePath
		}
	}
	return false
}
