package localtest_test

import (
	"fmt"
	"time"

	"github.com/mcptasks/mcptasks/pkg/platform/local/localtest"
)

// A Clock runs from its start time at the real clock's pace; Advance moves
// it forward at once, and the apps served on it with it.
func ExampleClock() {
	clock := localtest.NewClock(time.Date(2026, 7, 28, 9, 0, 0, 0, time.UTC))
	clock.Advance(time.Hour) // e.g. while a task sleeps an hour
	fmt.Println(clock.Now().Format("15:04"))
	clock.Advance(24 * time.Hour) // e.g. past an input deadline of a day
	fmt.Println(clock.Now().Format("Jan 2 15:04"))
	// Output:
	// 10:00
	// Jul 29 10:00
}
