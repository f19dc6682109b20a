// Package embedredis runs the in-process Redis of the local default
// (github.com/alicebob/miniredis/v2), so that a local run executes exactly
// the production store and queue code with nothing installed.
//
// Keys expire on the wall clock, like on a real server, through a ticker
// that moves miniredis's TTLs forward. (miniredis's ClockTTL option does the
// same on every command, which costs time proportional to the number of
// keys per command: at 20,000 keys it made each command about 200 times
// slower.)
//
// A tick charges every key the whole interval since the previous tick, so
// a key set within the interval is charged for time before it existed. To
// keep absolute expiries (PEXPIREAT, which the task store uses: a task is
// readable for its whole TTL) from ever firing early, the server's clock
// runs one tick behind the wall clock: an absolute expiry then becomes a
// TTL one tick longer, which absorbs that over-charge. Such keys expire
// between their time and two ticks after it. Relative expiries (PEXPIRE)
// may fire up to one tick early; only the long-lived index and queue keys
// use them.
//
// The clock need not be the wall clock: [Start] takes the clock of a
// test (pkg/platform/local/localtest), and [Server.Sync] applies its jumps
// at once.
package embedredis

import (
	"fmt"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// Tick is how often expiry is applied (keys may outlive their TTL by up to
// this much).
const Tick = 100 * time.Millisecond

// Server is a running embedded Redis.
type Server struct {
	*miniredis.Miniredis
	now  func() time.Time
	stop chan struct{}
	done chan struct{}

	mu   sync.Mutex
	last time.Time // the clock's time at the last Sync
}

// Options configures [Start]. The zero value (or nil) is the default.
type Options struct {
	// Now is the clock keys expire on (default time.Now).
	Now func() time.Time
}

// Start runs an embedded Redis on a free loopback port with opts (nil
// means the defaults).
func Start(opts *Options) (*Server, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	m := miniredis.NewMiniRedis()
	last := o.Now()
	m.SetTime(last.Add(-Tick))
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("starting the embedded Redis: %w", err)
	}
	s := &Server{Miniredis: m, now: o.Now, stop: make(chan struct{}), done: make(chan struct{}), last: last}
	go s.expire()
	return s, nil
}

func (s *Server) expire() {
	defer close(s.done)
	t := time.NewTicker(Tick)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.Sync()
		}
	}
}

// Sync moves the server's time to its clock's now (one tick behind, see
// the package comment), expiring the keys whose time has come. It runs
// every Tick; call it after a test clock's jump to apply the jump at once.
func (s *Server) Sync() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if !now.After(s.last) {
		return
	}
	s.SetTime(now.Add(-Tick))
	s.FastForward(now.Sub(s.last))
	s.last = now
}

// Close stops the server.
func (s *Server) Close() {
	close(s.stop)
	<-s.done
	s.Miniredis.Close()
}
