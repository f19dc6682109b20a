package tasks

import (
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
)

func TestPollAdvice(t *testing.T) {
	now := time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)
	lo, base, hi := 500*time.Millisecond, time.Second, 60*time.Second
	for _, c := range []struct {
		name string
		task driver.Task
		want time.Duration
	}{
		{"just created", driver.Task{Status: driver.StatusWorking, UpdatedAt: now}, lo},
		{"working for 700ms", driver.Task{Status: driver.StatusWorking, UpdatedAt: now.Add(-700 * time.Millisecond)}, 700 * time.Millisecond},
		{"working for a minute", driver.Task{Status: driver.StatusWorking, UpdatedAt: now.Add(-time.Minute)}, base},
		{"clock skew", driver.Task{Status: driver.StatusWorking, UpdatedAt: now.Add(time.Minute)}, lo},
		{"sleeping 30s more", driver.Task{Status: driver.StatusWorking, UpdatedAt: now, WakeAt: now.Add(30 * time.Second)}, 31 * time.Second},
		{"sleeping an hour more", driver.Task{Status: driver.StatusWorking, UpdatedAt: now, WakeAt: now.Add(time.Hour)}, hi},
		{"wake time passed", driver.Task{Status: driver.StatusWorking, UpdatedAt: now.Add(-time.Hour), WakeAt: now.Add(-time.Second)}, base},
		{"just parked", driver.Task{Status: driver.StatusInputRequired, UpdatedAt: now}, base},
		{"parked 10s ago", driver.Task{Status: driver.StatusInputRequired, UpdatedAt: now.Add(-10 * time.Second)}, 5 * time.Second},
		{"parked an hour ago", driver.Task{Status: driver.StatusInputRequired, UpdatedAt: now.Add(-time.Hour)}, hi},
		{"parked, deadline in 10s", driver.Task{Status: driver.StatusInputRequired, UpdatedAt: now.Add(-time.Hour), WakeAt: now.Add(10 * time.Second)}, 11 * time.Second},
		{"parked 4s ago, deadline in 10s", driver.Task{Status: driver.StatusInputRequired, UpdatedAt: now.Add(-4 * time.Second), WakeAt: now.Add(10 * time.Second)}, 2 * time.Second},
		{"parked long ago, deadline passed", driver.Task{Status: driver.StatusInputRequired, UpdatedAt: now.Add(-time.Hour), WakeAt: now.Add(-time.Second)}, hi},
		{"completed", driver.Task{Status: driver.StatusCompleted, UpdatedAt: now}, base},
	} {
		if got := pollAdvice(&c.task, now, lo, base, hi); got != c.want {
			t.Errorf("%s: advice %v, want %v", c.name, got, c.want)
		}
	}
}

func TestPollBoundsDefaults(t *testing.T) {
	for _, c := range []struct {
		in      Options
		lo, hi  time.Duration
		comment string
	}{
		{Options{}, 500 * time.Millisecond, time.Minute, "defaults"},
		{Options{PollInterval: 100 * time.Millisecond}, 100 * time.Millisecond, time.Minute, "min follows a short interval"},
		{Options{PollInterval: 2 * time.Minute}, 500 * time.Millisecond, 2 * time.Minute, "max follows a long interval"},
		{Options{PollMin: 5 * time.Second, PollMax: time.Second}, 5 * time.Second, 5 * time.Second, "max below min"},
	} {
		o := c.in
		o.fill()
		if o.PollMin != c.lo || o.PollMax != c.hi {
			t.Errorf("%s: bounds [%v, %v], want [%v, %v]", c.comment, o.PollMin, o.PollMax, c.lo, c.hi)
		}
	}
}

// TestPollAdviceWhileWaitingForInput follows the advice as a client does
// that keeps reading a task left unanswered in input_required: it reads
// the task within a PollInterval of its parking, then after each advice.
// It sends at most 15 reads in the first minute, and the advice it holds
// when its user answers (it then waits that long before it reads the
// outcome) is short at first.
func TestPollAdviceWhileWaitingForInput(t *testing.T) {
	o := Options{}
	o.fill()
	parked := time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)
	task := driver.Task{Status: driver.StatusInputRequired, UpdatedAt: parked}
	at := parked.Add(o.PollInterval) // the first read, a working poll after the parking
	var reads []time.Duration
	for at.Sub(parked) <= time.Minute {
		reads = append(reads, at.Sub(parked))
		at = at.Add(pollAdvice(&task, at, o.PollMin, o.PollInterval, o.PollMax))
	}
	if len(reads) > 15 {
		t.Errorf("%d reads in the first minute of input_required (%v), want at most 15", len(reads), reads)
	}
	if first := pollAdvice(&task, parked.Add(o.PollInterval), o.PollMin, o.PollInterval, o.PollMax); first > 2*time.Second {
		t.Errorf("advice at the first read of input_required %v: an answer's outcome would be seen that late", first)
	}
	t.Logf("reads in the first minute: %d at %v", len(reads), reads)
}
