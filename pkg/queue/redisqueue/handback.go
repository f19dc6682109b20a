package redisqueue

import (
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

// HandBack is a consumer's offer to take the next due message of the
// shard of the message it handles in the same script as the handler's
// write that settles that message: a store on the same Redis that enqueues
// through the queue in its own scripts (see [LuaEnqueue]; the Redis store
// with redisstore.Options.Queue) then saves the consumer its next receive,
// so that a busy consumer sends one script per message less. While a
// consumer of [Queue.Consume] handles a message, its offer stands on the
// Queue under the message's task id; only the script of the write that
// settles the handled message (a worker's last commit of an invocation: it
// requeues or removes the message) may take it, once:
//
//	hb := q.TakeHandBack(taskID)     // nil: no offer, do as before
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

// TakeHandBack takes the offer of the consumer of q that handles taskID's
// message now, in this process: the next due message of that message's
// shard (q.KeysFor(taskID)). It returns nil when there is none (no
// consumer of q handles the task here, it made no offer, or the offer was
// taken already); a second call for the same handling returns nil. If two
// consumers handle deliveries of the same task at once (a duplicate), the
// one whose offer is taken handles the message taken: each message is
// still handled once.
func (q *Queue) TakeHandBack(taskID string) *HandBack {
	v, ok := q.offers.LoadAndDelete(taskID)
	if !ok {
		return nil
	}
	return v.(*HandBack)
}

// offer puts hb up on q for the duration of its handling, unless another
// consumer's offer for the same task stands; the returned func takes it
// down if it was not taken.
func (q *Queue) offer(hb *HandBack) (withdraw func()) {
	if _, taken := q.offers.LoadOrStore(hb.taskID, hb); taken {
		return func() {}
	}
	return func() { q.offers.CompareAndDelete(hb.taskID, hb) }
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
