package tasks_test

import (
	"fmt"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
)

// timedStore wraps a store whose client honours its context's deadline
// (every call sets it on the connection), and says so.
type timedStore struct{ driver.Store }

// HonoursDeadline implements driver.DeadlineHonourer.
func (timedStore) HonoursDeadline() bool { return true }

// A store that returns by its context's deadline declares it: the server
// then calls it directly on a request's path. Without the declaration
// (a wrapper hides its inner store's methods but those of driver.Store),
// every call runs on a goroutine of its own, so that a store ignoring its
// context cannot hold a request past Options.StoreTimeout.
func ExampleDeadlineHonourer() {
	var s driver.Store = timedStore{}
	d, ok := s.(driver.DeadlineHonourer)
	fmt.Println(ok && d.HonoursDeadline())
	// Output: true
}
