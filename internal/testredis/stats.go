package testredis

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// CommandCalls reads INFO commandstats through c (one server: on a cluster
// client, the node the client picks; pass a node's own client, see
// [Node.Client]) and returns the calls of each command, by its name
// without the "cmdstat_" prefix (e.g. "evalsha", "config|resetstat"). A
// script's inner commands count, as Redis counts them.
func CommandCalls(tb testing.TB, c rueidis.Client) map[string]int64 {
	tb.Helper()
	info, err := c.Do(tb.Context(), c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		tb.Fatalf("testredis: INFO commandstats: %v", err)
	}
	m := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		n, _, _ := strings.Cut(rest, ",")
		calls, _ := strconv.ParseInt(n, 10, 64)
		m[strings.TrimPrefix(name, "cmdstat_")] = calls
	}
	return m
}

// Settle waits until the server has processed no command but INFO for
// quiet (the clients under test have done what they do at once), at most
// ten seconds: a fixed sleep instead can end too early on a loaded
// machine. It returns the command counts then (as [CommandCalls]).
func Settle(tb testing.TB, c rueidis.Client, quiet time.Duration) map[string]int64 {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	last, since := CommandCalls(tb, c), time.Now()
	for {
		time.Sleep(quiet / 5)
		now := CommandCalls(tb, c)
		if !sameCalls(last, now) {
			last, since = now, time.Now()
		}
		if time.Since(since) >= quiet || time.Now().After(deadline) {
			return now
		}
	}
}

// sameCalls reports whether a and b count the same calls of each command
// but INFO.
func sameCalls(a, b map[string]int64) bool {
	for name, n := range b {
		if name != "info" && a[name] != n {
			return false
		}
	}
	for name := range a {
		if _, ok := b[name]; !ok && name != "info" {
			return false
		}
	}
	return true
}
