package tasks

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/redisstore"
)

// The read cache's bookkeeping holds under concurrent reads, announcements
// and evictions (run with -race): at the end, the bytes it counts are
// those of the reads it keeps, it holds no more than its bounds, every
// kept read is one that was put after the last announcement of its task,
// and evicting everything gives every subscription back.
func TestReadCacheBookkeeping(t *testing.T) {
	rc := testredis.Client(t, "redis-server")
	store := redisstore.New(rc, nil)
	now := time.Now()
	c := newReadCache(store, 20, func() time.Time { return now })
	ids := make([]string, 40)
	for i := range ids {
		ids[i] = driver.NewID()
	}
	task := func(id string, n int) *driver.Task {
		return &driver.Task{ID: id, Owner: "alice", Tool: "t", Status: driver.StatusInputRequired,
			CreatedAt: now, UpdatedAt: now, TTL: time.Hour,
			StatusMessage: fmt.Sprint("read ", n), Result: []byte(strings.Repeat("x", n%3000)), Args: []byte(`{"a":1}`)}
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for n := range 3000 {
				id := ids[r.IntN(len(ids))]
				switch r.IntN(10) {
				case 0:
					c.forget(id)
				case 1:
					c.mu.Lock()
					if e := c.m[id]; e != nil && e.sub != nil {
						c.drop(id, e)
					}
					c.mu.Unlock()
				default:
					if got, tok := c.get("alice", id); got == nil {
						c.put(tok, task(id, n))
					} else if got.Args != nil || got.ID != id {
						t.Errorf("kept read of %s: %+v", id, got)
					}
				}
			}
		})
	}
	wg.Wait()
	c.mu.Lock()
	bytes, kept := 0, 0
	for id, e := range c.m {
		if e.task != nil {
			kept++
			bytes += e.size
			if e.size != taskBytes(e.task) || e.task.ID != id {
				t.Errorf("entry %s: size %d, its task's %d", id, e.size, taskBytes(e.task))
			}
		}
	}
	if bytes != c.bytes || len(c.m) > c.max || len(c.seen) > c.max {
		t.Errorf("bytes counted %d, of the kept reads %d; %d entries, %d seen (max %d)", c.bytes, bytes, len(c.m), len(c.seen), c.max)
	}
	if kept == 0 {
		t.Error("no read was kept")
	}
	// Everything idle: the eviction drops every entry and gives back the
	// subscriptions (the store's channels unsubscribed).
	for _, e := range c.m {
		e.used = time.Now().Add(-readCacheIdle)
	}
	for id := range c.seen {
		c.seen[id] = time.Now().Add(-readCacheIdle)
	}
	c.mu.Unlock()
	c.evict()
	c.mu.Lock()
	left, b := len(c.m)+len(c.seen), c.bytes
	c.mu.Unlock()
	if left != 0 || b != 0 {
		t.Errorf("after evicting all: %d entries, %d bytes", left, b)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		chans, err := rc.Do(t.Context(), rc.B().PubsubChannels().Pattern("*}:ev").Build()).AsStrSlice()
		if err != nil {
			t.Fatal(err)
		}
		if len(chans) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after evicting all, %d task channels still subscribed", len(chans))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
