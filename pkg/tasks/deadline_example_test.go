package tasks_test

import (
	"fmt"

	"github.com/mcptasks/mcptasks/pkg/tasks"
)

// timedStore wraps a store whose client honours its context's deadline
// (every call sets it on the connection), and says so.
type timedStore struct{ tasks.Store }

// HonoursDeadline implements tasks.DeadlineHonourer.
func (timedStore) HonoursDeadline() bool { return true }

// A store that returns by its context's deadline declares it: the server
// then calls it directly on a request's path. Without the declaration
// (a wrapper hides its inner store's methods but those of tasks.Store),
// every call runs on a goroutine of its own, so that a store ignoring its
// context cannot hold a request past Options.StoreTimeout.
func ExampleDeadlineHonourer() {
	var s tasks.Store = timedStore{}
	d, ok := s.(tasks.DeadlineHonourer)
	fmt.Println(ok && d.HonoursDeadline())
	// Output: true
}
