package testredis

import (
	"strconv"
	"strings"
	"testing"

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
