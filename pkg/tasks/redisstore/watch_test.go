package redisstore

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/redis/rueidis"
)

// TestWatchAnnouncesTransitions: every transition a client can see is
// announced on the task's channel, in the round trip of the transition, to
// a Watch of that task alone (on a real redis-server and on the embedded
// Redis).
func TestWatchAnnouncesTransitions(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			s := New(b.client(t), &Options{Prefix: uniquePrefix()})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			now := time.Now()
			mk := func() *driver.Task {
				tk, err := s.Create(ctx, &driver.NewTask{ID: driver.NewID(), Owner: "alice", Tool: "t", TTL: time.Hour, Now: now})
				if err != nil {
					t.Fatal(err)
				}
				return tk
			}
			watched, other := mk(), mk()
			got := make(chan string, 16)
			sub, err := s.Watch(ctx, []string{watched.ID, "not an id"}, func(id string) { got <- id })
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-sub.Ready:
			case err := <-sub.Done:
				t.Fatalf("subscription ended: %v", err)
			case <-ctx.Done():
				t.Fatal("subscription never confirmed")
			}
			expect := func(what string) {
				t.Helper()
				select {
				case id := <-got:
					if id != watched.ID {
						t.Fatalf("%s: announced %s, want %s", what, id, watched.ID)
					}
				case <-ctx.Done():
					t.Fatalf("%s: not announced", what)
				}
			}
			// The other task's transitions are not this watch's business.
			if _, _, err := s.Cancel(ctx, "alice", other.ID, now); err != nil {
				t.Fatal(err)
			}
			c, err := s.Claim(ctx, watched.ID, now, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Commit(ctx, c, &driver.Change{Now: now, Park: map[string]json.RawMessage{"k": json.RawMessage(`{"method":"elicitation/create"}`)}}); err != nil {
				t.Fatal(err)
			}
			expect("park")
			if _, err := s.Update(ctx, "alice", watched.ID, map[string]json.RawMessage{"k": json.RawMessage(`{"action":"decline"}`)}, now); err != nil {
				t.Fatal(err)
			}
			expect("update")
			if _, _, err := s.Cancel(ctx, "alice", watched.ID, now); err != nil {
				t.Fatal(err)
			}
			expect("cancel")
			select {
			case id := <-got:
				t.Fatalf("unexpected announcement of %s", id)
			default:
			}
			cancel()
			if err := <-sub.Done; err != nil && err != context.Canceled {
				t.Fatalf("subscription ended with %v", err)
			}
		})
	}
}

// TestWatchesShareOneConnection: 200 watches (four on each of 50 tasks)
// cost the process one Redis connection, not one each; every watch of a
// task hears its transitions; a task's channel stays subscribed while any
// of its watches is open and is unsubscribed on the server when the last
// one ends; and once no watch is left, the connection is given back (on a
// real redis-server, the embedded Redis and a Redis Cluster; connections
// are counted on the redis-server).
func TestWatchesShareOneConnection(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			var c, admin rueidis.Client
			if b.name == "redis-server" {
				// A server of the test's own, whose clients it counts.
				url := testredis.StartServer(t).URL
				c, admin = testredis.Connect(t, url), testredis.Connect(t, url)
			} else {
				c = b.client(t)
			}
			s := New(c, &Options{Prefix: uniquePrefix()})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			now := time.Now()
			const nTasks, perTask = 50, 4
			ids := make([]string, nTasks)
			for i := range ids {
				tk, err := s.Create(ctx, &driver.NewTask{ID: driver.NewID(), Owner: "alice", Tool: "t", TTL: time.Hour, Now: now})
				if err != nil {
					t.Fatal(err)
				}
				ids[i] = tk.ID
			}
			connected := func() int { return testredis.ConnectedClients(t, admin) }
			var before int
			if admin != nil {
				before = connected()
			}
			type open struct {
				sub    *driver.Subscription
				cancel context.CancelFunc
				got    chan string
			}
			watches := make([][]open, nTasks)
			for i, id := range ids {
				for range perTask {
					wctx, wcancel := context.WithCancel(ctx)
					got := make(chan string, 16)
					sub, err := s.Watch(wctx, []string{id}, func(id string) { got <- id })
					if err != nil {
						t.Fatal(err)
					}
					watches[i] = append(watches[i], open{sub, wcancel, got})
				}
			}
			for _, ws := range watches {
				for _, w := range ws {
					select {
					case <-w.sub.Ready:
					case err := <-w.sub.Done:
						t.Fatalf("a watch ended before it was confirmed: %v", err)
					case <-ctx.Done():
						t.Fatal("a watch was never confirmed")
					}
				}
			}
			if admin != nil {
				if during := connected(); during > before+1 {
					t.Errorf("%d watches hold %d Redis connections (%d before, %d with them open), want at most 1", nTasks*perTask, during-before, before, during)
				}
			}
			heard := func(w open, id, what string) {
				t.Helper()
				select {
				case got := <-w.got:
					if got != id {
						t.Fatalf("%s: announced %s, want %s", what, got, id)
					}
				case <-ctx.Done():
					t.Fatalf("%s: not announced", what)
				}
			}
			// Every watch of task 0 hears its transition.
			if _, _, err := s.Cancel(ctx, "alice", ids[0], now); err != nil {
				t.Fatal(err)
			}
			for _, w := range watches[0] {
				heard(w, ids[0], "cancel")
			}
			// Task 1 keeps its channel while one of its watches is open.
			for _, w := range watches[1][1:] {
				w.cancel()
				if err := <-w.sub.Done; err != context.Canceled {
					t.Fatalf("an ended watch: %v", err)
				}
			}
			if _, _, err := s.Cancel(ctx, "alice", ids[1], now); err != nil {
				t.Fatal(err)
			}
			heard(watches[1][0], ids[1], "cancel after the other watches ended")
			for _, ws := range watches {
				for _, w := range ws {
					w.cancel()
				}
			}
			for _, ws := range watches {
				for _, w := range ws {
					<-w.sub.Done
				}
			}
			// Given back: no connection of the hub's, no channel subscribed.
			deadline := time.Now().Add(10 * time.Second)
			for {
				s.hub.mu.Lock()
				idle := s.hub.conn == nil
				s.hub.mu.Unlock()
				if idle {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the hub kept its connection after every watch ended")
				}
				time.Sleep(10 * time.Millisecond)
			}
			if admin != nil {
				n, err := admin.Do(ctx, admin.B().PubsubNumpat().Build()).AsInt64()
				chans, err2 := admin.Do(ctx, admin.B().PubsubChannels().Build()).AsStrSlice()
				if err != nil || err2 != nil || n != 0 || len(chans) != 0 {
					t.Errorf("subscribed after every watch ended: %d patterns, channels %v (%v %v)", n, chans, err, err2)
				}
			}
		})
	}
}

// TestWatchesEndWithTheirConnection: when the shared subscriber connection
// is lost, every watch on it ends with an error (its stream ends, and its
// client listens again), and the next watch gets a new connection that
// works.
func TestWatchesEndWithTheirConnection(t *testing.T) {
	url := testredis.StartServer(t).URL
	c, admin := testredis.Connect(t, url), testredis.Connect(t, url)
	s := New(c, &Options{Prefix: uniquePrefix()})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	now := time.Now()
	tk, err := s.Create(ctx, &driver.NewTask{ID: driver.NewID(), Owner: "alice", Tool: "t", TTL: time.Hour, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	ready := func(sub *driver.Subscription) {
		t.Helper()
		select {
		case <-sub.Ready:
		case err := <-sub.Done:
			t.Fatalf("a watch ended before it was confirmed: %v", err)
		case <-ctx.Done():
			t.Fatal("a watch was never confirmed")
		}
	}
	var subs []*driver.Subscription
	for range 3 {
		sub, err := s.Watch(ctx, []string{tk.ID}, func(string) {})
		if err != nil {
			t.Fatal(err)
		}
		ready(sub)
		subs = append(subs, sub)
	}
	if err := admin.Do(ctx, admin.B().ClientKill().TypePubsub().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	for _, sub := range subs {
		select {
		case err := <-sub.Done:
			if err == nil || ctx.Err() != nil {
				t.Fatalf("a watch whose connection was lost ended with %v, want an error", err)
			}
		case <-ctx.Done():
			t.Fatal("a watch outlived its connection")
		}
	}
	got := make(chan string, 1)
	sub, err := s.Watch(ctx, []string{tk.ID}, func(id string) { got <- id })
	if err != nil {
		t.Fatal(err)
	}
	ready(sub)
	if _, _, err := s.Cancel(ctx, "alice", tk.ID, now); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got:
	case <-ctx.Done():
		t.Fatal("a watch after the connection was lost heard nothing")
	}
}
