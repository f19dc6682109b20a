package redisqueue

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"
)

// MaxHandBacks is how many handed-back messages (see [HandBack]) a
// consumer of [Queue.Consume] on a sharded queue handles in a row before
// it receives through the group again, taking the shards in turn: a shard
// that keeps a consumer busy with its own messages thus delays another
// shard's due message by at most this many handlings. Eight keeps most of
// the saving (one receive in nine instead of every one) while bounding
// that delay to a few milliseconds of no-op steps. With one shard there is
// no bound: a receive would take the message the hand-back takes, the
// shard's earliest due one.
const MaxHandBacks = 8

// HandBack is a consumer's offer, carried in its handler's context, to
// take the next due message of the shard of the message it handles in the
// same script as the handler's write that settles that message: a store
// on the same Redis that enqueues through the queue in its own scripts
// (see [LuaEnqueue]) then saves the consumer its next receive, so that a
// busy consumer sends one script per message less. Only the script of the
// write that settles the handled message (a worker's last commit of an
// invocation: it requeues or removes the message) may take it, once:
//
//	hb := q.HandBackFor(ctx, taskID) // nil: no offer, do as before
//	now, receipt := hb.Args()        // passed to the script, which runs
//	                                 // receive(shard of taskID, now, receipt)
//	                                 // (LuaReceive) after settling
//	hb.Reply(reply)                  // what receive() returned
//
// The consumer handles the message taken next, without a receive (on a
// sharded queue at most MaxHandBacks in a row). A message taken is leased like a received one:
// if the reply is lost, or the consumer stops before handling it, it is
// due again when its receipt runs out (a stopping consumer makes it due at
// once). A HandBack is used by one goroutine at a time: the handler's.
type HandBack struct {
	q      *Queue
	taskID string
	shard  int
	// asked: Args was called (the offer is taken); replied: Reply decoded
	// the script's answer.
	asked, replied bool
	lookedAt       int64
	receipt        string
	d              Delivery
	ok             bool
	next           int64
}

type handBackKey struct{}

// withHandBack returns ctx carrying hb.
func withHandBack(ctx context.Context, hb *HandBack) context.Context {
	return context.WithValue(ctx, handBackKey{}, hb)
}

// HandBackFor returns the offer ctx carries to take, for the consumer of
// q that handles taskID's message, the next due message of that message's
// shard (q.KeysFor(taskID)); nil when there is none: ctx is not a handler's
// of this queue's Consume, or for another task, or its offer was taken
// already.
func (q *Queue) HandBackFor(ctx context.Context, taskID string) *HandBack {
	hb, _ := ctx.Value(handBackKey{}).(*HandBack)
	if hb == nil || hb.q != q || hb.taskID != taskID || hb.asked {
		return nil
	}
	return hb
}

// Args takes the offer and returns the now and receipt arguments of the
// script's receive() call (see [LuaReceive]), from the clock of this call.
func (hb *HandBack) Args() (now, receipt string) {
	hb.asked = true
	hb.lookedAt = hb.q.nowMs()
	hb.receipt = hb.q.receipt(hb.lookedAt)
	return strconv.FormatInt(hb.lookedAt, 10), hb.receipt
}

// Reply records the reply of the script's receive() call. An error
// (a reply of another shape) leaves the consumer to receive as if no
// offer had been made.
func (hb *HandBack) Reply(m rueidis.RedisMessage) error {
	arr, err := m.ToArray()
	if err != nil {
		return fmt.Errorf("queue: hand-back reply: %w", err)
	}
	if len(arr) < 2 {
		return fmt.Errorf("queue: hand-back reply of %d elements, want 2 or 3", len(arr))
	}
	hb.d, hb.ok, hb.next = received(arr, hb.receipt, hb.shard)
	hb.replied = true
	return nil
}
