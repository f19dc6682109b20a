package pgstore

import (
	"context"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/inspect"
)

// The operator's listing (inspect.Lister: mcptasks tasks, the dashboard)
// reads the tasks table through the tasks_created index (schema version
// 2): every task, whoever owns it and whether or not it was created
// listed, newest first by creation, then by id in byte order (COLLATE
// "C", whatever the database's collation). A page is one statement, the
// filter applied in it before the limit; the cursor is the creation time
// and id of the page's last task. Unlike the Redis store's index of all
// tasks it is not capped: every unexpired task is listed, a page at a
// time, and a creation costs no statement for it, only the index's entry.
// A selective filter (an owner, a tool, a status) is applied to the rows
// the index yields in turn, so a page that finds few matches may read
// many rows; a time range narrows the index scan itself.

var _ inspect.Lister = (*Store)(nil)

// ListAll implements inspect.Lister: the tasks of every principal that f
// selects and that have not expired at now (nor on the database's clock),
// newest first, a page of up to limit at a time, in one statement.
func (s *Store) ListAll(ctx context.Context, f *inspect.Filter, cursor string, limit int, now time.Time) ([]*driver.Task, string, error) {
	limit, afterCreated, afterID, err := pageStart(cursor, limit)
	if err != nil {
		return nil, "", err
	}
	// A task lives at most tasks.MaxTTL: one created earlier has expired,
	// and the index scan stops there.
	lo := now.Add(-tasks.MaxTTL).UnixMilli()
	var hi, statuses any
	var tool, owner string
	if f != nil {
		if !f.Since.IsZero() {
			lo = max(lo, ceilMs(f.Since))
		}
		if !f.Until.IsZero() {
			hi = ceilMs(f.Until) // created before Until: before its next whole ms
		}
		if len(f.Statuses) > 0 {
			st := make([]string, 0, len(f.Statuses))
			for _, v := range f.Statuses {
				if storable(string(v)) {
					st = append(st, string(v))
				}
			}
			statuses = st
		}
		tool, owner = f.Tool, f.Owner
		if !storable(tool) || !storable(owner) {
			return nil, "", nil // no task has it
		}
	}
	return s.page(ctx, "list_all", s.sql.listAll, limit,
		now.UnixMilli(), lo, hi, afterCreated, afterID, statuses, tool, owner, int64(limit+1))
}

// ceilMs is t in Unix ms, rounded up: a time stored to the millisecond is
// at or after t exactly when it is at or after ceilMs(t).
func ceilMs(t time.Time) int64 {
	m := t.UnixMilli()
	if t.After(time.UnixMilli(m)) {
		m++
	}
	return m
}
