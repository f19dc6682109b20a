package endpoint_test

import (
	"net/http"
	"testing"

	"github.com/mcptasks/mcptasks/pkg/tasks"
)

// BenchmarkLeanPathGet measures the endpoint's own cost of a tasks/get, in
// process (the store answers from memory, no network): on the lean path and
// through the go-sdk. BenchmarkTasksGetHTTP (package tasks) measures it
// over loopback HTTP on a real redis-server.
func BenchmarkLeanPathGet(b *testing.B) {
	d := newDiffServer(b, nil, tasks.Options{})
	x := envelope("tasks/get", 1, map[string]any{"taskId": idInput}, withExt)
	for _, c := range []struct {
		name string
		h    http.Handler
	}{{"lean", d.lean[0]}, {"go-sdk", d.sdk[0]}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if a := x.send(c.h); a.status != http.StatusOK {
					b.Fatal(a)
				}
			}
		})
	}
}
