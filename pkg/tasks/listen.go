package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// maxListenTasks bounds the task ids of one subscriptions/listen.
const maxListenTasks = 100

// Methods and _meta keys of a subscriptions/listen stream (SEP-2575) that
// carries task notifications (SEP-2663).
const (
	methodListen          = "subscriptions/listen"
	methodAcknowledged    = "notifications/subscriptions/acknowledged"
	methodTaskStatus      = "notifications/tasks"
	metaKeySubscriptionID = "io.modelcontextprotocol/subscriptionId"
)

// listenResync is how often a stream re-reads its live tasks whatever it
// was told: announcements are at most once.
const listenResync = 10 * time.Second

// taskListen is a subscriptions/listen for task ids, from Server.listen:
// subscribed, with the first state of each accepted task read.
type taskListen struct {
	s     *Server
	owner string
	// Accepted are the requested ids of tasks the caller owns, in request
	// order; the stream is about them only.
	Accepted []string
	sub      *driver.Subscription
	stop     context.CancelFunc
	// state: the latest state read of each accepted task, and what was
	// sent of it (sent[id] is the key of the last notification).
	state map[string]*driver.Task
	sent  map[string]string
	// pending holds ids announced since the stream last looked; wake has a
	// token when it is not empty.
	mu      sync.Mutex
	pending map[string]bool
	wake    chan struct{}
}

// listen opens a task subscription for owner, as subscriptions/listen with
// params.notifications.taskIds asks (the capability gate comes first: see
// missingCapability). It subscribes to the tasks' transitions, then
// reads each task: the ones owner owns are Accepted; an unknown id and a
// task of someone else are left out alike. It answers -32602 for more than
// maxListenTasks ids, and -32603 when the store is unavailable or is not a
// [driver.Watcher], or when ctx ends before the subscription is confirmed and the
// tasks read: pass the request's budget, so that a slow store cannot stretch
// the stream past it. Run streams the tasks; Close ends the subscription.
func (s *Server) listen(ctx context.Context, owner string, ids []string) (*taskListen, error) {
	if len(ids) > maxListenTasks {
		return nil, &jsonrpc.Error{Code: CodeInvalidParams, Message: "subscriptions/listen: too many taskIds (at most 100)"}
	}
	w, ok := s.store.(driver.Watcher)
	if !ok {
		return nil, &jsonrpc.Error{Code: CodeInternalError, Message: "subscriptions/listen: the task store does not announce transitions"}
	}
	var want []string
	seen := map[string]bool{}
	for _, id := range ids {
		if driver.ValidID(id) && !seen[id] && owner != "" {
			seen[id] = true
			want = append(want, id)
		}
	}
	l := &taskListen{s: s, owner: owner, state: map[string]*driver.Task{}, sent: map[string]string{},
		pending: map[string]bool{}, wake: make(chan struct{}, 1)}
	if len(want) == 0 {
		l.stop = func() {}
		return l, nil
	}
	// The subscription lives until Close (Run closes it when it returns),
	// not only as long as ctx, which may be the setup's alone.
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	l.stop = stop
	sub, err := w.Watch(sctx, want, l.announce)
	if err == nil {
		l.sub = sub
		setup := time.NewTimer(s.opts.StoreTimeout)
		defer setup.Stop()
		select {
		case <-sub.Ready:
		case err = <-sub.Done:
			err = errors.Join(errors.New("subscription ended before it was confirmed"), err)
		case <-setup.C:
			err = errors.New("subscription not confirmed within the store timeout")
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if err != nil {
		stop()
		s.log.Error("subscriptions/listen: subscribing failed", "err", err)
		return nil, storeUnavailable()
	}
	for _, id := range want {
		t, err := s.read(ctx, owner, id)
		if errors.Is(err, driver.ErrNotFound) {
			continue
		}
		if err != nil {
			stop()
			s.log.Error("subscriptions/listen: reading a task failed", "task", id, "err", err)
			return nil, storeUnavailable()
		}
		l.Accepted = append(l.Accepted, id)
		l.state[id] = t
	}
	if len(l.Accepted) == 0 {
		stop()
	}
	return l, nil
}

// read is tasks/get's store read, bounded by the store timeout.
func (s *Server) read(ctx context.Context, owner, id string) (*driver.Task, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.StoreTimeout)
	defer cancel()
	return await(ctx, s.storeDirect, func(ctx context.Context) (*driver.Task, error) { return s.store.Get(ctx, owner, id) })
}

// announce is the Watch callback: it never blocks.
func (l *taskListen) announce(id string) {
	// The read cache first: the stream's client may ask tasks/get as soon
	// as it hears of the change.
	l.s.forgetRead(id)
	l.mu.Lock()
	l.pending[id] = true
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Close ends the subscription. It is safe to call more than once.
func (l *taskListen) Close() { l.stop() }

// Run sends the state of each accepted task at once (send gets the
// tasks/get view of it, with the server's poll advice), then each change
// of what a client sees of it (status, status message, result, error,
// input requests), until every accepted task is terminal, ctx ends, or the
// subscription fails; it then returns nil, and the stream ends with the
// listen result (a client re-listens for tasks still live). The stream's
// length is the caller's: bound ctx by the platform's time limit
// (Server.listenLimit). It returns send's error if send fails.
func (l *taskListen) Run(ctx context.Context, send func(*detailedTask) error) error {
	defer l.Close()
	for _, id := range l.Accepted {
		if err := l.emit(id, send); err != nil {
			return err
		}
	}
	if len(l.Accepted) == 0 || l.sub == nil {
		return nil
	}
	tick := time.NewTicker(listenResync)
	defer tick.Stop()
	for !l.allTerminal() {
		var ids []string
		select {
		case <-ctx.Done():
			return nil
		case err := <-l.sub.Done:
			if err != nil && ctx.Err() == nil {
				l.s.log.Warn("subscriptions/listen: subscription lost; ending the stream", "err", err)
			}
			return nil
		case <-tick.C:
			ids = l.Accepted
		case <-l.wake:
			l.mu.Lock()
			for id := range l.pending {
				ids = append(ids, id)
			}
			clear(l.pending)
			l.mu.Unlock()
		}
		for _, id := range ids {
			if t := l.state[id]; t == nil || t.Status.Terminal() {
				continue
			}
			t, err := l.s.read(ctx, l.owner, id)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				// Gone (expired) or unreadable for now: a gone task ends its
				// part of the stream; an unreadable one is read again later.
				if errors.Is(err, driver.ErrNotFound) {
					l.state[id] = &driver.Task{Status: driver.StatusCancelled}
				} else {
					l.s.log.Warn("subscriptions/listen: reading a task failed", "task", id, "err", err)
				}
				continue
			}
			l.state[id] = t
			if err := l.emit(id, send); err != nil {
				return err
			}
		}
	}
	return nil
}

// emit sends the state of id unless what a client sees of it was sent
// already.
func (l *taskListen) emit(id string, send func(*detailedTask) error) error {
	d := newDetailedTask(l.s.advised(l.state[id]))
	k := *d
	k.PollIntervalMs, k.LastUpdatedAt = 0, ""
	b, _ := json.Marshal(&k)
	if l.sent[id] == string(b) {
		return nil
	}
	l.sent[id] = string(b)
	return send(d)
}

func (l *taskListen) allTerminal() bool {
	for _, id := range l.Accepted {
		if !l.state[id].Status.Terminal() {
			return false
		}
	}
	return true
}

// listenLimit is how long a task stream lasts at most: the platform's time
// limit (Options.MaxDuration) less the safety margin, so that it ends with
// its result rather than being cut.
func (s *Server) listenLimit() time.Duration {
	return s.opts.MaxDuration - s.opts.SafetyMargin
}
