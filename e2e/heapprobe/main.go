// Command heapprobe is `mcptasks serve` (this repository's apps on
// pkg/platform/local, the same code path) with one addition for the e2e
// tests that measure what a burst of task streams leaves behind in a
// process: when HEAPPROBE_ADDR is set (a loopback address), GET / there
// forces two garbage collections and answers the live heap and the
// goroutine count as JSON ({"heapBytes": n, "goroutines": m}).
package main

import (
	"encoding/json"
	"log"
	"net/http"
	"os"
	"runtime"

	"github.com/mcptasks/mcptasks/pkg/apps"
	"github.com/mcptasks/mcptasks/pkg/platform/local"
)

func main() {
	if addr := os.Getenv("HEAPPROBE_ADDR"); addr != "" {
		go func() {
			err := http.ListenAndServe(addr, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				runtime.GC()
				runtime.GC() // what the first one's finalizers freed
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(map[string]uint64{"heapBytes": m.HeapAlloc, "goroutines": uint64(runtime.NumGoroutine())})
			}))
			log.Fatalf("heapprobe: %v", err)
		}()
	}
	(&local.Program{Name: "mcptasks", Apps: apps.All()}).Main()
}
