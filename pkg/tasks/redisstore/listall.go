package redisstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcptasks/mcptasks/internal/slots"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/inspect"
	"github.com/redis/rueidis"
)

// The index of all tasks (inspect.Lister, the operator's view): a sorted
// set <prefix>all (with Options.Shards n > 1, one per due-index shard,
// <prefix>all{<tag>}, in the slot of that shard of the due index) holds
// every task's id scored by its creation time (Unix ms), whoever owns it.
//
// What it costs a creation: one ZADD, in the create script itself on a
// standalone Redis (the set's key is one more KEY of the script, as the
// due index and the queue are when the store dispatches), so no round trip
// and no command is added besides it. On a Redis Cluster the set is in
// another slot than the task: the ZADD then runs in a small script (EVAL,
// sent with the body so that no NOSCRIPT can lose it) pipelined after the
// create script, in the same round trip; its failure loses the task's
// entry, never the task (the index is the operator's view, not the
// engine's).
//
// Bounded and expiring, with no command of its own per creation: the set
// holds a marker member "~" whose score is minus the current hour (Unix ms
// / indexWindow). The ZADD of a creation also sets the marker's score with
// LT, so its reply counts 2 (CH: the marker changed) exactly when the set
// is new or the hour turned since the last upkeep; the script then does
// the upkeep: it drops members created more than driver.MaxTTL ago and the
// oldest beyond Options.MaxIndexed, and sets the set's expiry to
// driver.MaxTTL plus an hour from now (past the end of every task it
// holds: a task was added after the last upkeep, within the hour before
// it). Besides, about one creation in 64 (those whose id starts with
// trimMark: ids are random) counts the set (ZCARD, O(1)) and drops the
// oldest members beyond MaxIndexed. So a creation costs one command, one
// in 64 one or two more, and one creation an hour per shard three more;
// the set exceeds MaxIndexed by the creations since the last trim, about
// 64, whatever the rate of creations. (Trimmed only hourly, a burst of
// creations within an hour stayed in the set until the hour turned: a
// million tasks created in minutes kept a million members, about 120
// bytes of Redis memory each; see BENCHMARKS.md, "Scale".)
//
// ListAll reads the set newest first and then the tasks (as Peek, owner
// unchecked), skipping those that are gone (expired before the upkeep
// dropped their member) and those the filter rejects.

// DefaultMaxIndexed is the default of Options.MaxIndexed.
const DefaultMaxIndexed = 10000

// indexWindow is how often (at most) a creation also upkeeps the index of
// all tasks, per shard.
const indexWindow = time.Hour

// trimMark is the first character of the ids whose creation also trims
// the index of all tasks to Options.MaxIndexed (one id in 64).
const trimMark = 'A'

// errNoIndex is ListAll's answer when the index of all tasks is off.
var errNoIndex = errors.New("redisstore: the index of all tasks is off (Options.MaxIndexed < 0)")

var _ inspect.Lister = (*Store)(nil)

// allIndexLua defines indexAll(key, now, id): the ZADD of a new task to the
// index of all tasks, with the hourly upkeep (see the top of this file).
func (s *Store) allIndexLua() string {
	n := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	return `
local function indexAll(key, now, id)
  if redis.call('ZADD', key, 'LT', 'CH', -math.floor(now / ` + n(indexWindow) + `), '~', now, id) == 2 then
    redis.call('ZREMRANGEBYSCORE', key, 0, now - ` + n(driver.MaxTTL) + `)
    redis.call('ZREMRANGEBYRANK', key, 1, -` + strconv.Itoa(s.maxIndexed+1) + `)
    redis.call('PEXPIRE', key, ` + n(driver.MaxTTL+indexWindow) + `)
  elseif string.byte(id, 1) == ` + strconv.Itoa(trimMark) + ` and redis.call('ZCARD', key) > ` + strconv.Itoa(s.maxIndexed+1) + ` then
    redis.call('ZREMRANGEBYRANK', key, 1, -` + strconv.Itoa(s.maxIndexed+1) + `)
  end
end
`
}

// indexingLua is what the create script runs to index the new task:
// indexed(now) adds it to the index of all tasks, KEYS[5], when the store
// indexes inline (a standalone Redis), and does nothing otherwise.
func (s *Store) indexingLua() string {
	if !s.indexInline {
		return "\nlocal function indexed(now) end\n"
	}
	return s.allIndexLua() + `
local function indexed(now) indexAll(KEYS[5], now, string.match(KEYS[1], '{([^{}]*)}$')) end
`
}

// allKey is the index shard of task id.
func (s *Store) allKey(id string) string { return s.allKeys[slots.ShardOf(id, len(s.allKeys))] }

// withIndex appends the index key to the create script's keys when the
// script indexes the task itself.
func (s *Store) withIndex(id string, keys ...string) []string {
	if !s.indexInline {
		return keys
	}
	return append(keys, s.allKey(id))
}

// indexAfter returns the command that indexes a new task after its create
// script, for a store that cannot index inside it (a Redis Cluster).
func (s *Store) indexAfter(nt *driver.NewTask, now time.Time) []rueidis.Completed {
	if s.allKeys == nil || s.indexInline {
		return nil
	}
	src := s.allIndexLua() + "indexAll(KEYS[1], tonumber(ARGV[1]), ARGV[2])\nreturn 1\n"
	return []rueidis.Completed{s.c.B().Eval().Script(src).Numkeys(1).Key(s.allKey(nt.ID)).Arg(ms(now), nt.ID).Build()}
}

// indexed is one member of the index of all tasks.
type indexed struct {
	id    string
	score int64
}

// ListAll implements inspect.Lister over the index of all tasks (see the
// top of this file). Each round trip reads up to limit+16 members of each
// shard and then their tasks, until limit tasks matched or the index ends.
func (s *Store) ListAll(ctx context.Context, f *inspect.Filter, cursor string, limit int, now time.Time) ([]*driver.Task, string, error) {
	if s.allKeys == nil {
		return nil, "", errNoIndex
	}
	if limit <= 0 {
		limit = driver.ListPageSize
	}
	// The score range: created at or after lo, at or before hi; at hi,
	// only ids below afterID (ties go by id, descending).
	hi, afterID := int64(1<<53), ""
	if cursor != "" {
		score, id, ok := decodeCursor(cursor)
		if !ok {
			return nil, "", driver.ErrBadCursor
		}
		hi, afterID = score, id
	}
	lo := max(now.Add(-driver.MaxTTL).UnixMilli(), 0)
	if f != nil {
		if !f.Since.IsZero() {
			lo = max(lo, ceilMs(f.Since))
		}
		if !f.Until.IsZero() {
			if u := ceilMs(f.Until) - 1; u < hi {
				hi, afterID = u, ""
			}
		}
	}
	batch := limit + listScanExtra
	var out []*driver.Task
	for hi >= lo {
		page, exhausted, err := s.indexPage(ctx, lo, hi, afterID, batch)
		if err != nil {
			return nil, "", err
		}
		ts, err := s.peekMany(ctx, page)
		if err != nil {
			return nil, "", err
		}
		for i, t := range ts {
			if t == nil || !t.ExpiresAt().After(now) || !f.Match(t) {
				continue
			}
			out = append(out, t)
			if len(out) == limit {
				if exhausted && i == len(page)-1 {
					return out, "", nil
				}
				return out, encodeCursor(page[i].score, page[i].id), nil
			}
		}
		if exhausted || len(page) == 0 {
			break
		}
		last := page[len(page)-1]
		hi, afterID = last.score, last.id
	}
	return out, "", nil
}

// ceilMs is t in Unix ms, rounded up.
func ceilMs(t time.Time) int64 {
	m := t.UnixMilli()
	if t.After(time.UnixMilli(m)) {
		m++
	}
	return m
}

// indexPage returns the newest n members of the index scored in [lo, hi]
// (at hi, only ids below afterID when it is set), newest first, and
// whether they are all that is left.
func (s *Store) indexPage(ctx context.Context, lo, hi int64, afterID string, n int) ([]indexed, bool, error) {
	cmds := make([]rueidis.Completed, len(s.allKeys))
	for i, k := range s.allKeys {
		cmds[i] = s.zrangeDesc(k, lo, hi, 0, n)
	}
	var all []indexed
	exhausted := true
	for i, r := range s.c.DoMulti(ctx, cmds...) {
		got, err := r.AsZScores()
		if err != nil {
			return nil, false, fmt.Errorf("redisstore: list all: %w", err)
		}
		// Skip the members at hi on or before the cursor; in the rare case
		// they fill the whole reply, read on past them.
		for off := 0; ; {
			kept := 0
			for _, z := range got {
				sc := int64(z.Score)
				if afterID != "" && sc == hi && z.Member >= afterID {
					continue
				}
				if driver.ValidID(z.Member) {
					all = append(all, indexed{z.Member, sc})
				}
				kept++
			}
			if len(got) < n {
				break
			}
			if kept > 0 {
				exhausted = false
				break
			}
			off += n
			if got, err = s.c.Do(ctx, s.zrangeDesc(s.allKeys[i], lo, hi, off, n)).AsZScores(); err != nil {
				return nil, false, fmt.Errorf("redisstore: list all: %w", err)
			}
		}
	}
	slices.SortFunc(all, func(a, b indexed) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return strings.Compare(b.id, a.id)
	})
	if len(all) > n {
		all, exhausted = all[:n], false
	}
	return all, exhausted, nil
}

// zrangeDesc reads key's members scored in [lo, hi], highest first, from
// offset off, at most n.
func (s *Store) zrangeDesc(key string, lo, hi int64, off, n int) rueidis.Completed {
	return s.c.B().Zrange().Key(key).Min(strconv.FormatInt(hi, 10)).Max(strconv.FormatInt(lo, 10)).
		Byscore().Rev().Limit(int64(off), int64(n)).Withscores().Build()
}

// peekMany reads the tasks of page in one round trip, as Peek does; a task
// that is gone is nil.
func (s *Store) peekMany(ctx context.Context, page []indexed) ([]*driver.Task, error) {
	cmds := make([]rueidis.Completed, len(page))
	for i, e := range page {
		keys := s.readKeys(e.id)
		cmds[i] = s.c.B().Evalsha().Sha1(getScript.sha).Numkeys(int64(len(keys))).Key(keys...).Arg("").Build()
	}
	out := make([]*driver.Task, len(page))
	for i, r := range s.c.DoMulti(ctx, cmds...) {
		id := page[i].id
		if err := r.Error(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			t, err := s.read(ctx, id, "")
			if err != nil && err != driver.ErrNotFound {
				return nil, err
			}
			out[i] = t
			continue
		}
		arr, err := r.ToArray()
		if rueidis.IsRedisNil(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("redisstore: list all: %w", err)
		}
		t, err := decodeRead(id, arr)
		if err == driver.ErrNotFound {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[i] = t
	}
	return out, nil
}
