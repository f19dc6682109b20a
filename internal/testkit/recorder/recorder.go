// Package recorder keeps what a test fake received, in order, and lets a
// test wait for an entry.
package recorder

import (
	"sync"
	"time"
)

// Log records values of type T; its zero value is ready to use and it is
// safe for concurrent use.
type Log[T any] struct {
	mu     sync.Mutex
	items  []T
	notify chan struct{}
}

// Add records v and wakes waiters.
func (l *Log[T]) Add(v T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.items = append(l.items, v)
	if l.notify != nil {
		close(l.notify)
		l.notify = nil
	}
}

// All returns the recorded values, oldest first.
func (l *Log[T]) All() []T {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]T(nil), l.items...)
}

// WaitFor waits up to within for a recorded value that satisfies match.
func (l *Log[T]) WaitFor(within time.Duration, match func(T) bool) (T, bool) {
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		for _, v := range l.items {
			if match(v) {
				l.mu.Unlock()
				return v, true
			}
		}
		if l.notify == nil {
			l.notify = make(chan struct{})
		}
		ch := l.notify
		l.mu.Unlock()
		select {
		case <-ch:
		case <-deadline.C:
			var zero T
			return zero, false
		}
	}
}
