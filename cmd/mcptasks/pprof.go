//go:build pprof

// Profiling for benchmarks: a binary built with -tags pprof serves
// net/http/pprof on MCPTASKS_PPROF_ADDR (e.g. 127.0.0.1:6060) when it is
// set. The default build links none of it.
//
//	go build -tags pprof -o /tmp/mcptasks ./cmd/mcptasks
//	MCPTASKS_PPROF_ADDR=127.0.0.1:6060 REDIS_URL=... /tmp/mcptasks serve --no-worker
//	go tool pprof -top 'http://127.0.0.1:6060/debug/pprof/profile?seconds=10'

package main

import (
	"log"
	"net/http"
	"net/http/pprof"
	"os"
	"time"
)

func init() {
	addr := os.Getenv("MCPTASKS_PPROF_ADDR")
	if addr == "" {
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { log.Print(srv.ListenAndServe()) }()
}
