package inspect

import (
	"context"
	"slices"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
)

// Lister is implemented by a [driver.Store] that lists the tasks of every
// principal, newest first: the operator's view (mcptasks tasks, mcptasks
// dashboard). It is never served to clients, whose tasks/list goes through
// driver.Lister and sees its own tasks only.
//
// Contract (storetest checks it for a store that implements it):
//
//   - Every task Create persisted is listed, whoever owns it and whatever
//     NewTask.Listed says, as Peek would show it now, until it expires at
//     now or the store's bound drops it: the index keeps at least the
//     newest tasks up to a bound the store documents, and expires with
//     them.
//   - Order is CreatedAt descending; tasks created in the same millisecond
//     come in an order of the store's choosing (by id descending on
//     PostgreSQL, the later creation first on Redis), the same on every
//     page. A page starts after the task its cursor names, so a task
//     created since a page was read does not shift the pages after it.
//   - A cursor the store did not issue answers [driver.ErrBadCursor].
//   - The filter is applied before the limit: a page holds up to limit
//     tasks that match it. Which tasks a page examines to find them is the
//     store's business (an index on Redis reads the tasks in turn), so the
//     cost of a selective filter may grow with the number of tasks listed.
type Lister interface {
	// ListAll returns up to limit tasks (limit <= 0: driver.ListPageSize) that
	// match f (nil: every task) and have not expired at now, newest first,
	// starting after cursor ("" for the first page), and the cursor of the
	// next page: "" when no task is left to examine (a non-empty cursor
	// may still lead to an empty page when f is selective).
	ListAll(ctx context.Context, f *Filter, cursor string, limit int, now time.Time) (ts []*driver.Task, next string, err error)
}

// Filter selects tasks for [Lister.ListAll]. Its zero value selects
// every task; each set field narrows the selection.
type Filter struct {
	// Statuses, when not empty, selects tasks in one of these states.
	Statuses []driver.Status
	// Tool, when set, selects the tasks of this tool.
	Tool string
	// Owner, when set, selects the tasks of this principal.
	Owner string
	// Since and Until, when not zero, select tasks created at or after
	// Since and before Until.
	Since, Until time.Time
}

// Match reports whether t passes f (a nil f passes everything).
func (f *Filter) Match(t *driver.Task) bool {
	if f == nil {
		return true
	}
	switch {
	case len(f.Statuses) > 0 && !slices.Contains(f.Statuses, t.Status),
		f.Tool != "" && t.Tool != f.Tool,
		f.Owner != "" && t.Owner != f.Owner,
		!f.Since.IsZero() && t.CreatedAt.Before(f.Since),
		!f.Until.IsZero() && !t.CreatedAt.Before(f.Until):
		return false
	}
	return true
}
