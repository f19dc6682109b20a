package redisqueue

import (
	"testing"
	"time"
)

// settledGroup is a group over n shards, subscribed, that has looked at
// every shard at now and found each empty.
func settledGroup(t *testing.T, n int, now int64) *group {
	t.Helper()
	q := &Queue{o: Options{Poll: time.Hour, Now: time.Now}}
	for range n {
		q.keys, q.wakes = append(q.keys, "k"), append(q.wakes, "w")
	}
	g := newGroup(q)
	g.subscribed = true
	for range n {
		k, gen, ok := g.pick(now)
		if !ok {
			t.Fatal("a fresh group has shards to look at")
		}
		g.learn(k, gen, now, never, false)
	}
	if k, _, ok := g.pick(now); ok {
		t.Fatalf("pick after every shard was found empty = %d", k)
	}
	return g
}

// A wake that arrives while a receive on its shard is under way survives
// the receive's reply, which may predate the enqueue it announced.
func TestWakeDuringReceiveIsKept(t *testing.T) {
	now := time.Now().UnixMilli()
	g := settledGroup(t, 2, now)
	g.markAt(1, now)
	k, gen, ok := g.pick(now)
	if !ok || k != 1 {
		t.Fatalf("pick = %d, %v; want the woken shard 1", k, ok)
	}
	g.markAt(1, now) // a second enqueue, announced during the receive
	g.learn(1, gen, now, never, false)
	if k, _, ok := g.pick(now); !ok || k != 1 {
		t.Errorf("pick after a reply that crossed a wake = %d, %v; want shard 1 again", k, ok)
	}
}

// An idle shard is looked at by one receive at a time; a busy one (its
// last receive took a message and saw another due) by several.
func TestOneReceiveAtATimeUnlessBusy(t *testing.T) {
	now := time.Now().UnixMilli()
	g := settledGroup(t, 1, now)
	g.markAt(0, now)
	_, gen, ok := g.pick(now)
	if !ok {
		t.Fatal("woken shard not picked")
	}
	if _, _, ok := g.pick(now); ok {
		t.Error("a second consumer picked a shard whose receive is under way")
	}
	g.learn(0, gen, now, now, true) // took one, another is due
	_, _, ok1 := g.pick(now)
	_, _, ok2 := g.pick(now)
	if !ok1 || !ok2 {
		t.Errorf("busy shard picked %v, %v; want two consumers on it", ok1, ok2)
	}
}

// Consumers take due shards in turn.
func TestPickTakesShardsInTurn(t *testing.T) {
	now := time.Now().UnixMilli()
	g := settledGroup(t, 3, now)
	var order []int
	for range 6 {
		for k := range 3 {
			g.markAt(k, now)
		}
		k, gen, _ := g.pick(now)
		order = append(order, k)
		g.learn(k, gen, now, now, true)
		for j := range 3 { // settle the others
			if j != k {
				g.shards[j].due = never
			}
		}
	}
	for i := 1; i < len(order); i++ {
		if order[i] == order[i-1] {
			t.Fatalf("picks %v: a shard picked twice running while others were due", order)
		}
	}
}

// A known delayed message sets the scheduler's next wake-up.
func TestEarliestFollowsDueTimes(t *testing.T) {
	now := time.Now().UnixMilli()
	g := settledGroup(t, 2, now)
	g.markAt(1, now+500)
	if e := g.earliest(now); e != now+500 {
		t.Errorf("earliest = now%+d, want now+500", e-now)
	}
}
