package testredis

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// StartReplica starts a redis-server of the test's own that replicates
// primary (REPLICAOF), waits until it is in sync, and stops it when the
// test ends.
func StartReplica(tb testing.TB, primary *Server) *Server {
	tb.Helper()
	replica := StartServer(tb)
	rc := Connect(tb, replica.URL)
	host, portStr, _ := strings.Cut(strings.TrimPrefix(primary.URL, "redis://"), ":")
	port, err := strconv.ParseInt(portStr, 10, 64)
	if err != nil {
		tb.Fatalf("testredis: primary URL %s: %v", primary.URL, err)
	}
	ctx, cancel := context.WithTimeout(tb.Context(), 10*time.Second)
	defer cancel()
	if err := rc.Do(ctx, rc.B().Replicaof().Host(host).Port(port).Build()).Error(); err != nil {
		tb.Fatalf("testredis: REPLICAOF: %v", err)
	}
	for {
		info, _ := rc.Do(ctx, rc.B().Info().Section("replication").Build()).ToString()
		if strings.Contains(info, "master_link_status:up") {
			return replica
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("testredis: the replica did not sync in 10s:\n%s", info)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Connect returns a client of the Redis at url (a redis:// URL, one server
// or a cluster's nodes), client-side caching off, closed when tb ends.
func Connect(tb testing.TB, url string) rueidis.Client {
	tb.Helper()
	opt, err := rueidis.ParseURL(url)
	if err != nil {
		tb.Fatalf("testredis: parsing %s: %v", url, err)
	}
	opt.DisableCache = true
	c, err := rueidis.NewClient(opt)
	if err != nil {
		tb.Fatalf("testredis: connecting to %s: %v", url, err)
	}
	tb.Cleanup(c.Close)
	return c
}
