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
	if limit <= 0 {
		limit = driver.ListPageSize
	}
	var afterExp, afterID any
	if cursor != "" {
		exp, id, ok := decodeCursor(cursor)
		if !ok {
			return nil, "", driver.ErrBadCursor
		}
		afterExp, afterID = exp, id
	}
	if owner == "" || !storable(owner) {
		return nil, "", nil
	}
	if err := s.ensure(ctx); err != nil {
		return nil, "", err
	}
	ctx, span := s.span(ctx, "list")
	rows, err := s.pool.Query(ctx, s.sql.list, owner, now.UnixMilli(), afterExp, afterID, int64(limit+1))
	var out []*driver.Task
	var exps []int64
	if err == nil {
		var id string
		var exp int64
		var r taskRow
		_, err = pgx.ForEachRow(rows, append([]any{&id, &exp}, r.dest()...), func() error {
			t, err := r.task(id)
			if err != nil {
				return err
			}
			out, exps = append(out, t), append(exps, exp)
			r = taskRow{}
			return nil
		})
	}
	endSpan(span, err)
	if err != nil {
		return nil, "", fmt.Errorf("pgstore: list: %w", err)
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		next = encodeCursor(exps[limit-1], out[limit-1].ID)
	}
	return out, next, nil
}

func encodeCursor(exp int64, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(exp, 10) + ":" + id))
}

func decodeCursor(c string) (int64, string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, "", false
	}
	exp, id, ok := strings.Cut(string(b), ":")
	if !ok || !driver.ValidID(id) {
		return 0, "", false
	}
	n, err := strconv.ParseInt(exp, 10, 64)
	return n, id, err == nil
}
