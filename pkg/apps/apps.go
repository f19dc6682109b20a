// Package apps lists the apps this repository's own entry points serve
// (cmd/mcptasks, api/*, cmd/lambda/*), selected by MCPTASKS_APP or --app:
// "examples" (the default) and "conformance" (the fixtures of the official
// conformance suite).
//
// It is a leaf: only this repository's entry points import it, and the
// platform adapters never do. A user's module has its own tools package
// and passes its App to the adapters directly.
package apps

import (
	"github.com/mcptasks/mcptasks/pkg/examples"
	"github.com/mcptasks/mcptasks/pkg/examples/conformance"
	"github.com/mcptasks/mcptasks/pkg/tasks"
)

// All returns the apps, the default first.
func All() []*tasks.App { return []*tasks.App{examples.App, conformance.App} }
