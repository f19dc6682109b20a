package testredis

import (
	"slices"
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
		if n, _ := Sent(last, now); n > 0 {
			last, since = now, time.Now()
		}
		if time.Since(since) >= quiet || time.Now().After(deadline) {
			return now
		}
	}
}

// Sent compares two [CommandCalls] readings: the commands but INFO (the
// readings' own) whose calls grew from before to after, as sorted
// "name×calls" entries, and their total calls.
func Sent(before, after map[string]int64) (total int64, sent []string) {
	for name, n := range after {
		if d := n - before[name]; d > 0 && name != "info" {
			total += d
			sent = append(sent, name+"×"+strconv.FormatInt(d, 10))
		}
	}
	slices.Sort(sent)
	return total, sent
}

// ConnectedClients reads INFO clients through c and returns the server's
// connected_clients (c's own connections included).
func ConnectedClients(tb testing.TB, c rueidis.Client) int {
	tb.Helper()
	info, err := c.Do(tb.Context(), c.B().Info().Section("clients").Build()).ToString()
	if err != nil {
		tb.Fatalf("testredis: INFO clients: %v", err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "connected_clients:"); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	tb.Fatal("testredis: no connected_clients in INFO clients")
	return 0
}
