package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/inspect"
)

var _ inspect.Store = (*Store)(nil)

// Record is everything the store holds of one task (see package inspect).
type Record = inspect.Record

// Inspect returns the whole Record of the task id, whoever owns it, or
// driver.ErrNotFound: one statement, one consistent snapshot.
func (s *Store) Inspect(ctx context.Context, id string) (*Record, error) {
	if !driver.ValidID(id) {
		return nil, driver.ErrNotFound
	}
	var (
		r                   taskRow
		attempts            int
		gen                 int64
		cancelAt            *int64
		responses, answered *string
		journal             []string
	)
	err := s.queryRow(ctx, "inspect", s.sql.inspect, []any{id},
		append(r.dest(), &attempts, &gen, &cancelAt, &responses, &answered, &journal)...)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, driver.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: inspect %s: %w", id, err)
	}
	task, err := r.task(id)
	if err != nil {
		return nil, err
	}
	rec := &Record{Task: task, Journal: make([]driver.Entry, len(journal)), AnsweredAt: map[string]time.Time{},
		CancelRequestedAt: fromMs(cancelAt), Attempts: attempts, Claims: gen}
	for i, e := range journal {
		if err := json.Unmarshal([]byte(e), &rec.Journal[i]); err != nil {
			return nil, fmt.Errorf("pgstore: inspect %s: journal entry %d: %w", id, i, err)
		}
	}
	for _, m := range []struct {
		col  *string
		into *map[string]json.RawMessage
	}{{responses, &rec.Responses}, {r.waiting, &rec.Waiting}, {r.offers, &rec.Offers}} {
		if *m.into, err = decodeObject(m.col, map[string]json.RawMessage{}); err != nil {
			return nil, fmt.Errorf("pgstore: inspect %s: %w", id, err)
		}
	}
	if answered != nil {
		var at map[string]int64
		if err := json.Unmarshal([]byte(*answered), &at); err != nil {
			return nil, fmt.Errorf("pgstore: inspect %s: answered_at: %w", id, err)
		}
		for k, v := range at {
			rec.AnsweredAt[k] = time.UnixMilli(v).UTC()
		}
	}
	return rec, nil
}
