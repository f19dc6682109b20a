// Package pglisten keeps one PostgreSQL connection LISTENing on one
// channel for the subscribers of a process: the task store's watches
// (notifications/tasks on listen streams) and the queue's idle consumers.
//
// LISTEN belongs to a session, so the connection must reach the server
// directly: through a transaction-mode pooler (PgBouncer, Neon's pooled
// URL, RDS Proxy) a session outlives no transaction. NOTIFY, sent inside a
// transaction and delivered when it commits, works through any pooler.
//
// Notifications are at most once: one sent while the connection is down
// is lost. So a failed connection ends every subscription with its error
// (subscribers re-read what they watch and subscribe again), and the
// connection is checked with a ping whenever it has been quiet for a
// while, so that a connection that died silently does not leave
// subscribers deaf.
package pglisten

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Options configures a Listener. The zero value is a sane default.
type Options struct {
	// Linger is how long the connection stays open after its last
	// subscriber left, for the next one (default 30s).
	Linger time.Duration
	// Quiet is how long the connection may go without a notification
	// before it is pinged (default 30s).
	Quiet time.Duration
	// Timeout bounds a connection's setup (dial, LISTEN) and each ping
	// (default 10s).
	Timeout time.Duration
}

// Listener is one LISTENing connection shared by subscribers. It is safe
// for concurrent use.
type Listener struct {
	connect func(ctx context.Context) (*pgx.Conn, error)
	channel string
	o       Options

	mu      sync.Mutex
	subs    map[*sub]struct{}
	up      bool // LISTEN is in place on the current connection
	running bool // the connection's goroutine runs
	left    time.Time
	closed  bool
	stop    context.CancelFunc
	ctx     context.Context
	wg      sync.WaitGroup
}

type sub struct {
	fn        func(payload string)
	ready     chan struct{}
	readyOnce sync.Once
	done      chan error
	ended     chan struct{}
	once      sync.Once
}

// confirm closes s.ready, once.
func (s *sub) confirm() { s.readyOnce.Do(func() { close(s.ready) }) }

// end ends s with err, once.
func (s *sub) end(err error) {
	s.once.Do(func() {
		s.done <- err
		close(s.done)
		close(s.ended)
	})
}

// New returns a Listener on channel whose connections connect makes; it
// connects when the first subscriber comes.
func New(connect func(ctx context.Context) (*pgx.Conn, error), channel string, opts *Options) *Listener {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Linger <= 0 {
		o.Linger = 30 * time.Second
	}
	if o.Quiet <= 0 {
		o.Quiet = 30 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	ctx, stop := context.WithCancel(context.Background())
	return &Listener{connect: connect, channel: channel, o: o, subs: map[*sub]struct{}{}, ctx: ctx, stop: stop}
}

// ErrClosed ends the subscriptions of a closed Listener.
var ErrClosed = errors.New("pglisten: listener closed")

// Subscribe calls fn with the payload of every notification on the
// channel (fn must not block) until ctx ends or the connection fails.
// ready is closed once LISTEN is in place, so that every notification
// committed from then on reaches fn; done yields why the subscription
// ended (ctx's error, or the connection's), then is closed.
func (l *Listener) Subscribe(ctx context.Context, fn func(payload string)) (ready <-chan struct{}, done <-chan error) {
	s := &sub{fn: fn, ready: make(chan struct{}), done: make(chan error, 1), ended: make(chan struct{})}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		s.end(ErrClosed)
		return s.ready, s.done
	}
	l.subs[s] = struct{}{}
	if l.up {
		s.confirm()
	}
	if !l.running {
		l.running = true
		l.wg.Add(1)
		go l.run()
	}
	l.mu.Unlock()
	go func() {
		select {
		case <-ctx.Done():
			l.remove(s)
			s.end(ctx.Err())
		case <-s.ended:
		}
	}()
	return s.ready, s.done
}

// remove drops s from the subscribers.
func (l *Listener) remove(s *sub) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.subs, s)
	if len(l.subs) == 0 {
		l.left = time.Now()
	}
}

// Close ends every subscription and closes the connection; it waits for
// the connection's goroutine.
func (l *Listener) Close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.stop()
	l.wg.Wait()
	l.fail(ErrClosed)
}

// fail ends every subscription with err.
func (l *Listener) fail(err error) {
	l.mu.Lock()
	subs := l.subs
	l.subs = map[*sub]struct{}{}
	l.up = false
	l.left = time.Now()
	l.mu.Unlock()
	for s := range subs {
		s.end(err)
	}
}

// run holds a connection while there are subscribers (and Linger after
// the last one left).
func (l *Listener) run() {
	defer l.wg.Done()
	for {
		err := l.session()
		if err != nil {
			l.fail(fmt.Errorf("pglisten: %s: %w", l.channel, err))
		}
		l.mu.Lock()
		if len(l.subs) == 0 || l.closed {
			l.running, l.up = false, false
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
	}
}

// session connects, LISTENs and delivers notifications until the
// connection fails (the error) or nobody has listened for Linger (nil).
func (l *Listener) session() error {
	ctx, cancel := context.WithTimeout(l.ctx, l.o.Timeout)
	conn, err := l.connect(ctx)
	if err == nil {
		_, err = conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize())
	}
	cancel()
	if err != nil {
		if conn != nil {
			closeConn(conn)
		}
		return err
	}
	defer closeConn(conn)
	l.mu.Lock()
	l.up = true
	for s := range l.subs {
		s.confirm()
	}
	l.mu.Unlock()
	for {
		ctx, cancel := context.WithTimeout(l.ctx, l.o.Quiet)
		n, err := conn.WaitForNotification(ctx)
		cancel()
		switch {
		case err == nil:
			l.mu.Lock()
			subs := make([]*sub, 0, len(l.subs))
			for s := range l.subs {
				subs = append(subs, s)
			}
			l.mu.Unlock()
			for _, s := range subs {
				s.fn(n.Payload)
			}
			continue
		case l.ctx.Err() != nil:
			return ErrClosed
		case !errors.Is(err, context.DeadlineExceeded):
			return err
		}
		// Quiet for a while: leave if nobody listens, else check the
		// connection is alive.
		l.mu.Lock()
		idle := len(l.subs) == 0 && time.Since(l.left) >= l.o.Linger
		if idle {
			l.up = false
		}
		l.mu.Unlock()
		if idle {
			return nil
		}
		ctx, cancel = context.WithTimeout(l.ctx, l.o.Timeout)
		err = conn.Ping(ctx)
		cancel()
		if err != nil {
			return fmt.Errorf("ping: %w", err)
		}
	}
}

// closeTimeout bounds the goodbye of a closed connection.
const closeTimeout = 2 * time.Second

func closeConn(c *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	_ = c.Close(ctx)
}

// Dialer returns the connect function of a Listener: connections
// configured by cfg (a direct URL's), or, when cfg is nil, as pool's.
func Dialer(cfg *pgx.ConnConfig, pool *pgxpool.Pool) func(ctx context.Context) (*pgx.Conn, error) {
	if cfg == nil {
		cfg = pool.Config().ConnConfig
	}
	cfg = cfg.Copy()
	return func(ctx context.Context) (*pgx.Conn, error) { return pgx.ConnectConfig(ctx, cfg) }
}
