package redisstore

import (
	"context"
	"fmt"
	"sync"

	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/redis/rueidis"
)

// Transition announcements: every script that may change what a client sees
// of a task (Update, Cancel, Claim when it cancels a task or takes it out of
// input_required, Commit) publishes, in its own round trip, an empty
// message on the task's channel
//
//	<prefix>{<id>}:ev
//
// which shares the task's hash tag. Watch subscribes to these channels on a
// dedicated connection. Pub/sub is at most once: a message published while
// no one listens, or lost with a connection, is gone, so a watcher re-reads
// the task record (the truth) after each message, and now and then anyway.
//
// On Redis Cluster, PUBLISH from a script reaches subscribers on every node
// (the cluster bus carries it), so Watch works as it is, at the cost of the
// bus broadcast; because the channel is in the task's slot, the scripts can
// move to sharded SPUBLISH (and Watch to SSUBSCRIBE) without a change of
// names, which keeps the message on the task's shard.

var _ tasks.Watcher = (*Store)(nil)

// eventChannel is the channel the transitions of task id are announced on.
func (s *Store) eventChannel(id string) string { return s.prefix + "{" + id + "}:ev" }

// Watch subscribes to the transitions of the tasks ids (see
// [tasks.Watcher]) on a connection of its own, which it gives back when
// ctx ends: each open watch holds one Redis connection (rueidis's dedicated
// pool, BlockingPoolSize, bounds them per process).
func (s *Store) Watch(ctx context.Context, ids []string, fn func(id string)) (*tasks.Subscription, error) {
	byChannel := make(map[string]string, len(ids))
	var channels []string
	for _, id := range ids {
		if !tasks.ValidID(id) {
			continue
		}
		ch := s.eventChannel(id)
		if _, dup := byChannel[ch]; !dup {
			byChannel[ch] = id
			channels = append(channels, ch)
		}
	}
	ready, done := make(chan struct{}), make(chan error, 1)
	sub := &tasks.Subscription{Ready: ready, Done: done}
	if len(channels) == 0 {
		close(ready)
		go func() { <-ctx.Done(); done <- ctx.Err(); close(done) }()
		return sub, nil
	}
	var once sync.Once
	confirmed := 0
	var mu sync.Mutex
	hctx := rueidis.WithOnSubscriptionHook(ctx, func(ps rueidis.PubSubSubscription) {
		if ps.Kind != "subscribe" {
			return
		}
		mu.Lock()
		confirmed++
		all := confirmed == len(channels)
		mu.Unlock()
		if all {
			once.Do(func() { close(ready) })
		}
	})
	go func() {
		// A connection of its own (from rueidis's pool of dedicated
		// connections, which may make it wait: the caller bounds its wait
		// for Ready), so that ending the watch unsubscribes exactly its
		// channels and nothing of another watch of the same task.
		dc, release := s.c.Dedicate()
		err := dc.Receive(hctx, dc.B().Subscribe().Channel(channels...).Build(), func(m rueidis.PubSubMessage) {
			if id, ok := byChannel[m.Channel]; ok {
				fn(id)
			}
		})
		release()
		if err != nil && ctx.Err() == nil {
			err = fmt.Errorf("redisstore: watching tasks: %w", err)
		}
		done <- err
		close(done)
	}()
	return sub, nil
}
