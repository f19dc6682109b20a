package storetest

import (
	"cmp"
	"errors"
	"slices"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/inspect"
)

// testListAll checks inspect.Lister, for a store that implements it: the
// tasks of every principal (listed for tasks/list or not), newest first
// (ties, created in the same millisecond, in any order but each once), a
// page at a time with an opaque cursor; a
// filter applied before the limit; expired tasks not listed; a cursor the
// store did not issue refused; a task's state as Get shows it.
func testListAll(f *fixture) {
	l, ok := f.s.(inspect.Lister)
	if !ok {
		f.t.Skip("the store does not implement inspect.Lister")
	}
	type made struct {
		id, owner, tool string
		at              time.Time
	}
	var all []made
	mk := func(who, tl string, d time.Duration, listed bool) string {
		f.t.Helper()
		nt := f.newTask()
		nt.Owner, nt.Tool, nt.Now, nt.Listed = who, tl, f.at(d), listed
		if _, err := f.s.Create(f.ctx, nt); err != nil {
			f.t.Fatalf("Create: %v", err)
		}
		all = append(all, made{nt.ID, who, tl, nt.Now})
		return nt.ID
	}
	for i := range 5 {
		tl := tool
		if i%2 == 1 {
			tl = "transcode"
		}
		mk(owner, tl, time.Duration(i)*time.Millisecond, i == 0)
	}
	// Two at the same millisecond: in the store's order, the same on every
	// page.
	mk(stranger, tool, 5*time.Millisecond, false)
	mk(stranger, tool, 5*time.Millisecond, false)
	slices.SortFunc(all, func(a, b made) int {
		if c := b.at.Compare(a.at); c != 0 {
			return c
		}
		return cmp.Compare(b.id, a.id)
	})
	now := f.at(time.Second)
	// pages lists every page of limit tasks that match flt.
	pages := func(flt *inspect.Filter, limit int) []string {
		f.t.Helper()
		var got []string
		cursor := ""
		for n := 0; ; n++ {
			ts, next, err := l.ListAll(f.ctx, flt, cursor, limit, now)
			if err != nil {
				f.t.Fatalf("ListAll(%+v, cursor %q): %v", flt, cursor, err)
			}
			if len(ts) > limit {
				f.t.Fatalf("ListAll returned %d tasks, more than the limit %d", len(ts), limit)
			}
			for _, tk := range ts {
				if !flt.Match(tk) {
					f.t.Fatalf("ListAll(%+v) returned %s (%s, %s, %s), which the filter rejects", flt, tk.ID, tk.Owner, tk.Tool, tk.Status)
				}
				got = append(got, tk.ID)
			}
			if next == "" {
				return got
			}
			if n > len(all)+2 {
				f.t.Fatalf("ListAll(%+v) did not end after %d pages", flt, n)
			}
			cursor = next
		}
	}
	want := func(keep func(m made) bool) []string {
		var out []string
		for _, m := range all {
			if keep(m) {
				out = append(out, m.id)
			}
		}
		return out
	}
	// tiesByID is got with each run of tasks created in the same
	// millisecond sorted by id, descending (the order of want), after
	// checking that got is newest first.
	at := map[string]time.Time{}
	for _, m := range all {
		at[m.id] = m.at
	}
	tiesByID := func(got []string) []string {
		f.t.Helper()
		out := slices.Clone(got)
		for i := 1; i < len(out); i++ {
			if at[out[i]].After(at[out[i-1]]) {
				f.t.Errorf("ListAll listed %s (created %v) after %s (created %v): not newest first", out[i], at[out[i]], out[i-1], at[out[i-1]])
			}
		}
		slices.SortStableFunc(out, func(a, b string) int {
			if c := at[b].Compare(at[a]); c != 0 {
				return c
			}
			return cmp.Compare(b, a)
		})
		return out
	}
	check := func(what string, flt *inspect.Filter, limit int, w []string) {
		f.t.Helper()
		if got := pages(flt, limit); !slices.Equal(tiesByID(got), w) {
			f.t.Errorf("ListAll %s, pages of %d = %v, want %v", what, limit, got, w)
		}
	}
	everything := want(func(made) bool { return true })
	check("of everything", nil, 3, everything)
	check("of everything", &inspect.Filter{}, 100, everything)
	if one, whole := pages(nil, 1), pages(nil, 100); !slices.Equal(one, whole) {
		f.t.Errorf("ListAll in pages of 1 = %v, in one page = %v: the order changed with the pages", one, whole)
	}
	check("by owner", &inspect.Filter{Owner: stranger}, 1, want(func(m made) bool { return m.owner == stranger }))
	check("by tool", &inspect.Filter{Tool: "transcode"}, 1, want(func(m made) bool { return m.tool == "transcode" }))
	since, until := f.at(time.Millisecond), f.at(4*time.Millisecond)
	check("by creation time", &inspect.Filter{Since: since, Until: until}, 2,
		want(func(m made) bool { return !m.at.Before(since) && m.at.Before(until) }))

	// A task's state shows as Get shows it, and filters by status see it.
	cancelled := all[3].id
	if _, ended := f.cancelEnded(cancelled, now); !ended {
		f.t.Fatalf("Cancel did not end the unleased task")
	}
	check("by status", &inspect.Filter{Statuses: []driver.Status{driver.StatusCancelled}}, 1, []string{cancelled})
	check("by status", &inspect.Filter{Statuses: []driver.Status{driver.StatusWorking, driver.StatusInputRequired}}, 2,
		want(func(m made) bool { return m.id != cancelled }))
	ts, _, err := l.ListAll(f.ctx, nil, "", 10, now)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, tk := range ts {
		if tk.ID == cancelled && tk.Status != driver.StatusCancelled {
			f.t.Errorf("ListAll shows the cancelled task %s as %s", tk.ID, tk.Status)
		}
		if tk.Owner == "" || tk.Tool == "" || tk.CreatedAt.IsZero() {
			f.t.Errorf("ListAll task %+v lacks its record", tk)
		}
	}

	if ts, next, err := l.ListAll(f.ctx, nil, "", 10, f.at(ttl+time.Minute)); err != nil || len(ts) != 0 || next != "" {
		f.t.Errorf("ListAll after the TTL = %v, %q, %v; want nothing", ids(ts), next, err)
	}
	if _, _, err := l.ListAll(f.ctx, nil, "not-a-cursor", 10, now); !errors.Is(err, driver.ErrBadCursor) {
		f.t.Errorf("ListAll(bad cursor) error = %v, want ErrBadCursor", err)
	}
}
