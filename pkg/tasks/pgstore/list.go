package pgstore

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
)

// The list index (driver.Lister) is the tasks_listed index over the tasks a
// creation marked listed (driver.NewTask.Listed): per owner, newest expiry
// first, then id. A page is one statement; the cursor is the expiry and id
// of the page's last task. Unlike the Redis store's per-principal index,
// it is not capped: a principal lists all its unexpired tasks, a page at a
// time.

var _ driver.Lister = (*Store)(nil)

// List implements driver.Lister: newest first (by expiry, then id), a page
// at a time.
func (s *Store) List(ctx context.Context, owner, cursor string, limit int, now time.Time) ([]*driver.Task, string, error) {
	limit, afterExp, afterID, err := pageStart(cursor, limit)
	if err != nil {
		return nil, "", err
	}
	if owner == "" || !storable(owner) {
		return nil, "", nil
	}
	return s.page(ctx, "list", s.sql.list, limit, owner, now.UnixMilli(), afterExp, afterID, int64(limit+1))
}

// pageStart returns the page size of a listing's page (limit, or
// driver.ListPageSize for none) and the sort key and id of the task it
// starts after (SQL NULLs for the first page), or driver.ErrBadCursor.
func pageStart(cursor string, limit int) (size int, afterKey, afterID any, err error) {
	if limit <= 0 {
		limit = driver.ListPageSize
	}
	if cursor == "" {
		return limit, nil, nil, nil
	}
	key, id, ok := decodeCursor(cursor)
	if !ok {
		return 0, nil, nil, driver.ErrBadCursor
	}
	return limit, key, id, nil
}

// page runs sql, the statement (named name for its span) of one page of a
// listing, whose rows are a task's id, its sort key in Unix ms and
// taskColumns, in the listing's order, up to limit+1 of them; it returns
// the first limit tasks and the cursor after the last of them when there
// is one more.
func (s *Store) page(ctx context.Context, name, sql string, limit int, args ...any) ([]*driver.Task, string, error) {
	if err := s.ensure(ctx); err != nil {
		return nil, "", err
	}
	ctx, span := s.span(ctx, name)
	rows, err := s.pool.Query(ctx, sql, args...)
	var out []*driver.Task
	var keys []int64
	if err == nil {
		var id string
		var key int64
		var r taskRow
		_, err = pgx.ForEachRow(rows, append([]any{&id, &key}, r.dest()...), func() error {
			t, err := r.task(id)
			if err != nil {
				return err
			}
			out, keys = append(out, t), append(keys, key)
			r = taskRow{}
			return nil
		})
	}
	endSpan(span, err)
	if err != nil {
		return nil, "", fmt.Errorf("pgstore: %s: %w", name, err)
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		next = encodeCursor(keys[limit-1], out[limit-1].ID)
	}
	return out, next, nil
}

// encodeCursor is the cursor after the task id whose sort key (its
// expiry for List, its creation for ListAll) is key, in Unix ms.
func encodeCursor(key int64, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(key, 10) + ":" + id))
}

// decodeCursor is encodeCursor reversed; ok is false for a string it did
// not make.
func decodeCursor(c string) (key int64, id string, ok bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, "", false
	}
	k, id, ok := strings.Cut(string(b), ":")
	if !ok || !driver.ValidID(id) {
		return 0, "", false
	}
	n, err := strconv.ParseInt(k, 10, 64)
	return n, id, err == nil
}
