package testredis

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// Publications counts the messages published on one channel, for a test
// that asserts how many a code path publishes. Count publishes a sentinel
// and waits for it: a channel delivers in order, so every message
// published before the call is counted when it returns. On a Redis
// Cluster the order holds for messages published on one node: the
// sentinel goes to the node of the channel's hash slot, where the scripts
// of the keys that share its hash tag publish.
type Publications struct {
	c       rueidis.Client
	channel string
	n, sync atomic.Int64
}

// sentinel is the message Count publishes (never counted).
const sentinel = "testredis-sync"

// Listen subscribes to channel on a connection of its own (the embedded
// Redis takes no other command on a subscribed one) until the test ends,
// and returns once the subscription is live.
func Listen(t testing.TB, c rueidis.Client, channel string) *Publications {
	t.Helper()
	p := &Publications{c: c, channel: channel}
	dc, release := c.Dedicate()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = dc.Receive(ctx, dc.B().Subscribe().Channel(channel).Build(), func(m rueidis.PubSubMessage) {
			if m.Message == sentinel {
				p.sync.Add(1)
			} else {
				p.n.Add(1)
			}
		})
	}()
	t.Cleanup(func() { stop(); <-done; release() })
	// The first sentinel that arrives proves the subscription live.
	for deadline := time.Now().Add(5 * time.Second); p.sync.Load() == 0; time.Sleep(10 * time.Millisecond) {
		p.publish(t)
		if time.Now().After(deadline) {
			t.Fatalf("no subscription to %s in 5s", channel)
		}
	}
	return p
}

// Count returns how many messages were published on the channel since
// Listen, every one published before the call included.
func (p *Publications) Count(t testing.TB) int64 {
	t.Helper()
	want := p.sync.Load() + 1
	p.publish(t)
	for deadline := time.Now().Add(5 * time.Second); p.sync.Load() < want; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the sentinel published on %s did not arrive in 5s", p.channel)
		}
	}
	return p.n.Load()
}

// publish sends the sentinel, to the node of the channel's slot.
func (p *Publications) publish(t testing.TB) {
	p.c.Do(t.Context(), p.c.B().Publish().Channel(p.channel).Message(sentinel).Build().SetSlot(p.channel))
}
