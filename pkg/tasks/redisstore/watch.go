package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/redis/rueidis"
)

// Transition announcements: every script that may change what a client sees
// of a task (Update, Cancel, Claim when it cancels a task or takes it out of
// input_required, Commit) publishes, in its own round trip, an empty
// message on the task's channel
//
//	<prefix>{<id>}:ev
//
// which shares the task's hash tag. Pub/sub is at most once: a message
// published while no one listens, or lost with a connection, is gone, so a
// watcher re-reads the task record (the truth) after each message, and now
// and then anyway.
//
// The watches of a Store share one subscriber connection (a hub), whatever
// their number: the hub subscribes to a channel when its first watch
// starts and unsubscribes when its last one ends, hands each message to
// every watch of the channel, and gives its connection back to rueidis's
// pool of dedicated connections when no watch is left (the pool closes an
// idle connection after ClientOption.BlockingPoolCleanup). Subscribing and
// unsubscribing go through one goroutine in the order the watches came and
// went, so the server's subscriptions always end as the watches say; a
// watch is Ready once the server has confirmed the subscription of each of
// its channels. When the connection fails, every watch on it ends with the
// error (a task stream then ends with its result, and its client listens
// again); the next watch opens a new connection.
//
// On Redis Cluster, PUBLISH from a script reaches subscribers on every node
// (the cluster bus carries it), so the hub's connection may be to any
// node, at the cost of the bus broadcast; because the channel is in the
// task's slot, the scripts can move to sharded SPUBLISH (and the hub to
// SSUBSCRIBE, one connection per shard) without a change of names, which
// keeps the message on the task's shard.

var _ driver.Watcher = (*Store)(nil)

// eventChannel is the channel the transitions of task id are announced on.
func (s *Store) eventChannel(id string) string { return s.prefix + "{" + id + "}:ev" }

// Watch subscribes to the transitions of the tasks ids (see
// [driver.Watcher]) on the Store's shared subscriber connection. It never
// blocks: the subscription is made in the background, and Ready is closed
// once the server confirmed it. Everything the watch holds is given back
// when ctx ends.
func (s *Store) Watch(ctx context.Context, ids []string, fn func(id string)) (*driver.Subscription, error) {
	w := &watch{fn: fn, ready: make(chan struct{}), done: make(chan error, 1)}
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if ch := s.eventChannel(id); driver.ValidID(id) && !seen[ch] {
			seen[ch] = true
			w.channels = append(w.channels, ch)
			w.ids = append(w.ids, id)
		}
	}
	sub := &driver.Subscription{Ready: w.ready, Done: w.done}
	if len(w.channels) == 0 {
		close(w.ready)
		context.AfterFunc(ctx, func() { w.end(ctx.Err()) })
		return sub, nil
	}
	s.hub.join(ctx, s.c, w)
	return sub, nil
}

// hub multiplexes a Store's watches over one subscriber connection.
type hub struct {
	mu sync.Mutex
	// conn is the current connection, nil when no watch is open.
	conn *hubConn
}

// hubConn is one subscriber connection and what is subscribed on it.
type hubConn struct {
	// channels are the subscribed (or being subscribed) channels, each
	// with the watches that want it.
	channels map[string]*channel
	// ops are the subscriptions and unsubscriptions to send, in order;
	// kick has a token when there are some.
	ops  []op
	kick chan struct{}
	// dead: the connection failed or was given back; nothing joins it.
	dead bool
}

// channel is one subscribed channel of a connection.
type channel struct {
	id        string
	watches   map[*watch]struct{}
	confirmed bool
}

// op is a SUBSCRIBE (ch set) or an UNSUBSCRIBE of name.
type op struct {
	name string
	ch   *channel
}

// watch is one Watch in place.
type watch struct {
	fn       func(id string)
	channels []string
	ids      []string
	// pending counts the channels whose subscription is not confirmed yet;
	// ready is closed when it reaches 0.
	pending int
	ready   chan struct{}
	done    chan error
	once    sync.Once
	// conn is the connection the watch is on (under hub.mu); stop undoes
	// the context.AfterFunc that ends it.
	conn *hubConn
	stop func() bool
}

// end ends w with err, once.
func (w *watch) end(err error) {
	w.once.Do(func() {
		w.done <- err
		close(w.done)
	})
}

// join adds w to the current connection, opening one if there is none, and
// has its new channels subscribed, until ctx ends.
func (h *hub) join(ctx context.Context, c rueidis.Client, w *watch) {
	h.mu.Lock()
	defer h.mu.Unlock()
	// Registered under the lock: leave runs after join, even for a ctx
	// that has ended already.
	w.stop = context.AfterFunc(ctx, func() {
		h.leave(w)
		w.end(ctx.Err())
	})
	if h.conn == nil {
		h.conn = &hubConn{channels: map[string]*channel{}, kick: make(chan struct{}, 1)}
		go h.run(c, h.conn)
	}
	conn := h.conn
	w.conn = conn
	for i, name := range w.channels {
		ch := conn.channels[name]
		if ch == nil {
			ch = &channel{id: w.ids[i], watches: map[*watch]struct{}{}}
			conn.channels[name] = ch
			conn.ops = append(conn.ops, op{name: name, ch: ch})
		}
		ch.watches[w] = struct{}{}
		if !ch.confirmed {
			w.pending++
		}
	}
	if w.pending == 0 {
		close(w.ready)
	}
	conn.wake()
}

// leave takes w off its connection, unsubscribing the channels no other
// watch wants.
func (h *hub) leave(w *watch) {
	h.mu.Lock()
	defer h.mu.Unlock()
	conn := w.conn
	if conn == nil || conn.dead {
		return
	}
	w.conn = nil
	for _, name := range w.channels {
		ch := conn.channels[name]
		if ch == nil {
			continue
		}
		delete(ch.watches, w)
		if len(ch.watches) == 0 {
			delete(conn.channels, name)
			conn.ops = append(conn.ops, op{name: name})
		}
	}
	conn.wake()
}

func (c *hubConn) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// message hands a message to every watch of its channel. It runs on the
// connection's reading goroutine; the watches' callbacks never block.
func (h *hub) message(conn *hubConn, m rueidis.PubSubMessage) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ch := conn.channels[m.Channel]; ch != nil {
		for w := range ch.watches {
			w.fn(ch.id)
		}
	}
}

// run owns conn's connection: it sends conn's operations in order, and
// gives the connection back once no watch is left, or ends every watch
// when the connection fails.
func (h *hub) run(c rueidis.Client, conn *hubConn) {
	// The connection comes from rueidis's pool of dedicated connections: a
	// subscribed connection takes no other command on some servers (the
	// embedded Redis), and given back it is unsubscribed from everything.
	dc, release := c.Dedicate()
	defer release()
	lost := dc.SetPubSubHooks(rueidis.PubSubHooks{OnMessage: func(m rueidis.PubSubMessage) { h.message(conn, m) }})
	for {
		select {
		case err, ok := <-lost:
			if !ok || err == nil {
				err = errors.New("connection closed")
			}
			h.fail(conn, err)
			return
		case <-conn.kick:
		}
		h.mu.Lock()
		ops := conn.ops
		conn.ops = nil
		if len(ops) == 0 && len(conn.channels) == 0 {
			conn.dead = true
			if h.conn == conn {
				h.conn = nil
			}
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
		if len(ops) == 0 {
			continue
		}
		cmds := make(rueidis.Commands, len(ops))
		for i, o := range ops {
			if o.ch != nil {
				cmds[i] = dc.B().Subscribe().Channel(o.name).Build()
			} else {
				cmds[i] = dc.B().Unsubscribe().Channel(o.name).Build()
			}
		}
		// One command per channel: rueidis answers a SUBSCRIBE at its
		// first channel's confirmation, so each answer here is that
		// channel's. The connection's write timeout bounds the wait.
		res := dc.DoMulti(context.Background(), cmds...)
		h.mu.Lock()
		var err error
		for i, o := range ops {
			if err = res[i].Error(); err != nil {
				break
			}
			if o.ch != nil {
				h.confirm(o.ch)
			}
		}
		h.mu.Unlock()
		if err != nil {
			h.fail(conn, err)
			return
		}
		conn.wake() // look again: done, or more to send
	}
}

// confirm marks ch subscribed and readies the watches that waited for it
// last. It runs under h.mu.
func (h *hub) confirm(ch *channel) {
	ch.confirmed = true
	for w := range ch.watches {
		if w.pending--; w.pending == 0 {
			close(w.ready)
		}
	}
}

// fail ends every watch of conn with err; the next watch opens a new
// connection.
func (h *hub) fail(conn *hubConn, err error) {
	h.mu.Lock()
	conn.dead = true
	if h.conn == conn {
		h.conn = nil
	}
	ended := map[*watch]struct{}{}
	for _, ch := range conn.channels {
		for w := range ch.watches {
			ended[w] = struct{}{}
		}
	}
	clear(conn.channels)
	h.mu.Unlock()
	err = fmt.Errorf("redisstore: watching tasks: %w", err)
	for w := range ended {
		w.stop()
		w.end(err)
	}
}
