package tasks

// Admission: the endpoint serves at most Options.MaxRequests requests at
// once, and the long-lived ones (task streams, listen.go; held 2025-11-25
// tasks/result, legacy.go) in a pool of their own, Options.MaxStreams at
// once and Options.MaxStreamsPerPrincipal per principal. A request takes a
// request slot when it arrives; once a stream knows its principal and is
// admitted, it gives its request slot back and holds a stream slot
// instead, so that however many streams one principal opens, the requests
// of the others (tasks/get, tools/call) find their slots. Every bound is
// per process; a refusal is answered at once, with a retry hint.
//
// The outermost layer also notes when the request arrived: streams and
// holds end within the platform's budget counted from then (setup and
// store reads included), not from when they started to stream.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// streamRetry is the retry hint of a refused stream.
const streamRetry = time.Second

// limits are an endpoint's bounds and what is open under them.
type limits struct {
	// requests and streams hold a token per open request and stream; nil
	// means no bound.
	requests, streams chan struct{}
	perPrincipal      int
	mu                sync.Mutex
	// open counts each principal's open streams; a principal with none
	// has no entry.
	open map[string]int
}

func newLimits(o *HandlerOptions) *limits {
	pool := func(n, def int) chan struct{} {
		switch {
		case n < 0:
			return nil
		case n == 0:
			n = def
		}
		return make(chan struct{}, n)
	}
	l := &limits{requests: pool(o.MaxRequests, DefaultMaxRequests), streams: pool(o.MaxStreams, DefaultMaxStreams),
		perPrincipal: o.MaxStreamsPerPrincipal, open: map[string]int{}}
	if l.perPrincipal == 0 {
		l.perPrincipal = DefaultMaxStreamsPerPrincipal
	}
	return l
}

// arrival is what the outermost layer knows of a request: the request's
// context is one (a single allocation on the hot path), where
// arrivalOf finds it.
type arrival struct {
	context.Context
	at time.Time
	// slot: the request holds a request slot (given back by the outermost
	// layer when the request ends, or by a stream when admitted).
	slot bool
}

type arrivalKey struct{}

// Value answers the arrival itself for arrivalKey.
func (a *arrival) Value(key any) any {
	if key == (arrivalKey{}) {
		return a
	}
	return a.Context.Value(key)
}

// arrivalOf is r's arrival, or nil for a request that did not pass admit.
func arrivalOf(r *http.Request) *arrival {
	a, _ := r.Context().Value(arrivalKey{}).(*arrival)
	return a
}

// admit is the outermost layer: it notes the request's arrival and takes a
// request slot, or answers HTTP 503 at once when none is free.
func (l *limits) admit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := &arrival{Context: r.Context(), at: time.Now()}
		if l.requests != nil {
			select {
			case l.requests <- struct{}{}:
				a.slot = true
			default:
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"server busy: too many requests at once; retry","data":{"retryAfterMs":1000}}}`+"\n")
				return
			}
			defer func() {
				if a.slot {
					<-l.requests
				}
			}()
		}
		next.ServeHTTP(w, r.WithContext(a))
	})
}

// arrivedAt is when r arrived at the endpoint (now, for a request that did
// not pass admit).
func arrivedAt(r *http.Request) time.Time {
	if a := arrivalOf(r); a != nil {
		return a.at
	}
	return time.Now()
}

// budget returns r's context bounded by the platform's budget counted from
// r's arrival.
func budget(r *http.Request, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithDeadline(r.Context(), arrivedAt(r).Add(d))
}

// stream admits r, a long-lived request of principal, into the stream
// pool, giving its request slot back; release ends its stream slot. Past a
// bound it returns the CodeTooManyStreams error to answer.
func (l *limits) stream(r *http.Request, principal string) (release func(), err error) {
	l.mu.Lock()
	if l.perPrincipal > 0 && l.open[principal] >= l.perPrincipal {
		l.mu.Unlock()
		return nil, tooManyStreams(fmt.Sprintf("too many open streams for this principal (at most %d at once)", l.perPrincipal), l.perPrincipal)
	}
	if l.streams != nil {
		select {
		case l.streams <- struct{}{}:
		default:
			l.mu.Unlock()
			return nil, tooManyStreams(fmt.Sprintf("server busy: too many open streams (at most %d at once)", cap(l.streams)), cap(l.streams))
		}
	}
	l.open[principal]++
	l.mu.Unlock()
	if a := arrivalOf(r); a != nil && a.slot {
		a.slot = false
		<-l.requests
	}
	return func() {
		l.mu.Lock()
		if l.open[principal]--; l.open[principal] <= 0 {
			delete(l.open, principal)
		}
		l.mu.Unlock()
		if l.streams != nil {
			<-l.streams
		}
	}, nil
}

func tooManyStreams(why string, limit int) error {
	data, _ := json.Marshal(map[string]int{"retryAfterMs": int(streamRetry.Milliseconds()), "maxStreams": limit})
	return &jsonrpc.Error{Code: CodeTooManyStreams, Data: data,
		Message: why + "; close one, poll tasks/get meanwhile, or retry after " + streamRetry.String()}
}

// retryAfter sets the Retry-After header of a refused stream.
func retryAfter(w http.ResponseWriter) {
	w.Header().Set("Retry-After", fmt.Sprint(int(streamRetry.Seconds())))
}
