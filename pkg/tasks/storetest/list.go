package storetest

import (
	"errors"
	"slices"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
)

// testList checks driver.Lister, for a store that implements it: a
// principal lists its own tasks only, newest first, a page at a time with
// an opaque cursor; expired tasks are not listed; a cursor the store did
// not issue is refused; an empty principal owns nothing; a task created
// without NewTask.Listed is not listed.
func testList(f *fixture) {
	l, ok := f.s.(driver.Lister)
	if !ok {
		f.t.Skip("the store does not implement driver.Lister")
	}
	var mine []string // oldest first
	for i := range 5 {
		nt := f.newTask()
		nt.Listed = true
		nt.Now = f.at(time.Duration(i) * time.Millisecond)
		if _, err := f.s.Create(f.ctx, nt); err != nil {
			f.t.Fatalf("Create: %v", err)
		}
		mine = append(mine, nt.ID)
	}
	other := f.newTask()
	other.Owner = stranger
	other.Listed = true
	if _, err := f.s.Create(f.ctx, other); err != nil {
		f.t.Fatalf("Create: %v", err)
	}
	now := f.at(time.Second)
	// A task created without Listed is never listed.
	unlisted := f.newTask()
	if _, err := f.s.Create(f.ctx, unlisted); err != nil {
		f.t.Fatalf("Create: %v", err)
	}
	var got []string
	cursor, pages := "", 0
	for {
		ts, next, err := l.List(f.ctx, owner, cursor, 2, now)
		if err != nil {
			f.t.Fatalf("List(cursor %q): %v", cursor, err)
		}
		if len(ts) > 2 {
			f.t.Fatalf("List returned %d tasks, more than the limit 2", len(ts))
		}
		for _, tk := range ts {
			if tk.Owner != owner {
				f.t.Fatalf("List(%s) returned a task of %s", owner, tk.Owner)
			}
			got = append(got, tk.ID)
		}
		pages++
		if next == "" {
			break
		}
		if pages > 5 {
			f.t.Fatalf("List did not end after %d pages", pages)
		}
		cursor = next
	}
	want := slices.Clone(mine)
	slices.Reverse(want)
	if !slices.Equal(got, want) {
		f.t.Fatalf("List pages = %v, want newest first %v", got, want)
	}
	ts, _, err := l.List(f.ctx, stranger, "", 10, now)
	if err != nil || len(ts) != 1 || ts[0].ID != other.ID {
		f.t.Fatalf("List(stranger) = %v, %v; want only its own task %s", ids(ts), err, other.ID)
	}
	if ts, _, err := l.List(f.ctx, "", "", 10, now); err != nil || len(ts) != 0 {
		f.t.Fatalf("List(empty principal) = %v, %v; want nothing", ids(ts), err)
	}
	if ts, _, err := l.List(f.ctx, owner, "", 10, f.at(ttl+time.Minute)); err != nil || len(ts) != 0 {
		f.t.Fatalf("List after the TTL = %v, %v; want nothing", ids(ts), err)
	}
	if _, _, err := l.List(f.ctx, owner, "not-a-cursor", 10, now); !errors.Is(err, driver.ErrBadCursor) {
		f.t.Fatalf("List(bad cursor) error = %v, want ErrBadCursor", err)
	}
	// A task's state shows in the listing as Get shows it.
	if _, ended := f.cancelEnded(mine[4], now); !ended {
		f.t.Fatalf("Cancel did not end the unleased task")
	}
	ts, _, err = l.List(f.ctx, owner, "", 1, now)
	if err != nil || len(ts) != 1 || ts[0].ID != mine[4] || ts[0].Status != driver.StatusCancelled {
		f.t.Fatalf("List after cancel = %v, %v; want %s cancelled first", ids(ts), err, mine[4])
	}
}

func ids(ts []*driver.Task) []string {
	out := make([]string, 0, len(ts))
	for _, t := range ts {
		out = append(out, t.ID+"("+string(t.Status)+")")
	}
	return out
}
