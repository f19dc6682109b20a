package layers

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/mcptasks/mcptasks/"

// rank returns the layer of the module's package path (relative to the
// module), as the package doc lists them, or -1 for one it does not place.
func rank(p string) int {
	prefixed := func(prefixes ...string) bool {
		for _, x := range prefixes {
			if p == x || strings.HasPrefix(p, x+"/") {
				return true
			}
		}
		return false
	}
	switch {
	case p == "internal/slots" || p == "internal/pgschema" || p == "internal/pglisten" || p == "pkg/tasks/internal/jsonscan":
		return 0
	case p == "pkg/tasks/driver":
		return 1
	case p == "pkg/tasks":
		return 2
	case p == "pkg/client/internal/faketasks" || prefixed("internal/testkit", "e2e"):
		return 10
	case p == "pkg/tasks/inspect" || p == "pkg/queue" || prefixed("pkg/auth", "pkg/embedredis", "pkg/otelexport", "pkg/client"):
		return 3
	case p == "pkg/tasks/redisstore" || p == "pkg/tasks/pgstore" || p == "pkg/queue/redisqueue" || p == "pkg/queue/sqsqueue" ||
		p == "pkg/queue/qstash" || p == "pkg/queue/pgqueue":
		return 4
	case p == "pkg/tasks/storetest" || p == "pkg/queue/queuetest":
		return 5
	case prefixed("pkg/bundle"):
		return 6
	case prefixed("pkg/platform"):
		return 7
	case prefixed("pkg/examples", "pkg/apps"):
		return 8
	case prefixed("api", "cmd"):
		return 9
	case p == "internal/layers" || p == "docs":
		return 10
	}
	return -1
}

// TestLayers checks every import of the module's packages (tests aside)
// against the layers: none runs to a higher layer, and every package has
// a place.
func TestLayers(t *testing.T) {
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	n := 0
	for dec.More() {
		var pkg struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&pkg); err != nil {
			t.Fatal(err)
		}
		n++
		from := strings.TrimPrefix(pkg.ImportPath, module)
		rf := rank(from)
		if rf < 0 {
			t.Errorf("%s has no layer: place it in the package doc and in rank", from)
			continue
		}
		for _, imp := range pkg.Imports {
			to, ok := strings.CutPrefix(imp, module)
			if !ok {
				continue
			}
			if rt := rank(to); rt > rf {
				t.Errorf("%s (layer %d) imports %s (layer %d): an import from a lower layer to a higher one", from, rf, to, rt)
			}
		}
	}
	if n < 40 {
		t.Fatalf("go list reported %d packages; the module has more", n)
	}
}
