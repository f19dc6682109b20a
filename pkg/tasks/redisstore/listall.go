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

// The index of all tasks (inspect.Lister, the operator's view): a stream
// (streamindex.go; the successor of the sorted set <prefix>all, or with
// Options.Shards n > 1 one per due-index shard, <prefix>all{<tag>}, in the
// slot of that shard of the due index) holds every task's id at its
// creation time (Unix ms), whoever owns it.
//
// What it costs a creation: an XADD (trimming the stream to about
// Options.MaxIndexed entries: only whole listpacks go, so it holds up to a
// hundred more) and a PEXPIRE that keeps the stream until driver.MaxTTL
// plus an hour from now, past the end of every task it holds, in the
// create script itself on a standalone Redis (the stream's key is one more
// KEY of the script, as the due index and the queue are when the store
// dispatches), so no round trip is added. On a Redis Cluster the stream is
// in another slot than the task: the commands then run in a small script
// (EVAL, sent with the body so that no NOSCRIPT can lose it) pipelined
// after the create script, in the same round trip; its failure loses the
// task's entry, never the task (the index is the operator's view, not the
// engine's). About one creation in 64 (those whose id starts with
// trimMark: ids are random) also drops the entries created more than
// driver.MaxTTL ago (XTRIM MINID).
//
// ListAll reads the streams newest first and then the tasks (as Peek,
// owner unchecked), skipping those that are gone (expired before a trim
// dropped their entry) and those the filter rejects.

// DefaultMaxIndexed is the default of Options.MaxIndexed.
const DefaultMaxIndexed = 10000

// indexWindow is how long the index of all tasks outlives the longest a
// task it holds can live.
const indexWindow = time.Hour

// trimMark is the first character of the ids whose creation also drops
// the entries older than driver.MaxTTL from the index of all tasks (one id
// in 64).
const trimMark = 'A'

// errNoIndex is ListAll's answer when the index of all tasks is off.
var errNoIndex = errors.New("redisstore: the index of all tasks is off (Options.MaxIndexed < 0)")

var _ inspect.Lister = (*Store)(nil)

// allIndexLua defines indexAll(key, old, now, id): the addition of a new
// task to the index of all tasks, the stream key, which succeeds the
// sorted set old (see the top of this file).
func (s *Store) allIndexLua() string {
	n := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	return streamLua + `
local function indexAll(key, old, now, id)
  xadd(key, old, now, id, ` + strconv.Itoa(s.maxIndexed) + `)
  redis.call('PEXPIRE', key, ` + n(driver.MaxTTL+indexWindow) + `)
  if string.byte(id, 1) == ` + strconv.Itoa(trimMark) + ` then
    redis.call('XTRIM', key, 'MINID', '~', string.format('%.0f', now - ` + n(driver.MaxTTL) + `))
  end
end
`
}

// indexingLua is what the create script runs to index the new task:
// indexed(now) adds it to the index of all tasks, KEYS[5] (the sorted set
// it succeeds KEYS[6]), when the store indexes inline (a standalone
// Redis), and does nothing otherwise.
func (s *Store) indexingLua() string {
	if !s.indexInline {
		return "\nlocal function indexed(now) end\n"
	}
	return s.allIndexLua() + `
local function indexed(now) indexAll(KEYS[5], KEYS[6], now, string.match(KEYS[1], '{([^{}]*)}$')) end
`
}

// allKey is the sorted set that was the index shard of task id before
// 2026-12-03; its stream is streamOf(allKey(id)).
func (s *Store) allKey(id string) string { return s.allKeys[slots.ShardOf(id, len(s.allKeys))] }

// withIndex appends the index keys (the stream and the sorted set it
// succeeds) to the create script's keys when the script indexes the task
// itself.
func (s *Store) withIndex(id string, keys ...string) []string {
	if !s.indexInline {
		return keys
	}
	old := s.allKey(id)
	return append(keys, streamOf(old), old)
}

// indexAfter returns the command that indexes a new task after its create
// script, for a store that cannot index inside it (a Redis Cluster).
func (s *Store) indexAfter(nt *driver.NewTask, now time.Time) []rueidis.Completed {
	if s.allKeys == nil || s.indexInline {
		return nil
	}
	src := s.allIndexLua() + "indexAll(KEYS[1], KEYS[2], tonumber(ARGV[1]), ARGV[2])\nreturn 1\n"
	old := s.allKey(nt.ID)
	return []rueidis.Completed{s.c.B().Eval().Script(src).Numkeys(2).Key(streamOf(old), old).Arg(ms(now), nt.ID).Build()}
}

// indexed is one entry of the index of all tasks: a task id, its entry ID
// and its shard.
type indexed struct {
	streamEntry
	shard int
}

// newer orders the entries of the index of all tasks as ListAll lists
// them: by entry ID, then shard, descending.
func newer(a, b indexed) int {
	if c := cmp.Compare(b.at.ms, a.at.ms); c != 0 {
		return c
	}
	if c := cmp.Compare(b.at.seq, a.at.seq); c != 0 {
		return c
	}
	return cmp.Compare(b.shard, a.shard)
}

// ListAll implements inspect.Lister over the index of all tasks (see the
// top of this file). Each round trip reads up to limit+16 entries of each
// shard and then their tasks, until limit tasks matched or the index ends.
func (s *Store) ListAll(ctx context.Context, f *inspect.Filter, cursor string, limit int, now time.Time) ([]*driver.Task, string, error) {
	if s.allKeys == nil {
		return nil, "", errNoIndex
	}
	if limit <= 0 {
		limit = driver.ListPageSize
	}
	// Where the listing goes on from: entries before from (newer() order),
	// and none created before lo.
	from := cursorPos{at: entryID{1 << 53, maxSeq}, shard: len(s.allKeys)}
	if cursor != "" {
		var ok bool
		if from, ok = decodeCursor(cursor); !ok {
			return nil, "", driver.ErrBadCursor
		}
		if from.afterID != "" || from.shard < 0 {
			// A cursor of the earlier format, or of a List: at its time,
			// on (ties may repeat).
			from = cursorPos{at: entryID{from.at.ms, maxSeq}, shard: len(s.allKeys)}
		}
	}
	lo := max(now.Add(-driver.MaxTTL).UnixMilli(), 0)
	if f != nil {
		if !f.Since.IsZero() {
			lo = max(lo, ceilMs(f.Since))
		}
		if !f.Until.IsZero() {
			if u := ceilMs(f.Until) - 1; u < 0 {
				return nil, "", nil
			} else if e := (entryID{uint64(u), maxSeq}); e.less(from.at) {
				from = cursorPos{at: e, shard: len(s.allKeys)}
			}
		}
	}
	batch := limit + listScanExtra
	var out []*driver.Task
	for from.at.ms >= uint64(lo) {
		page, exhausted, err := s.indexPage(ctx, lo, from, batch)
		if err != nil {
			return nil, "", err
		}
		ids := make([]string, len(page))
		for i, e := range page {
			ids[i] = e.id
		}
		ts, err := s.readMany(ctx, ids, "")
		if err != nil {
			return nil, "", fmt.Errorf("redisstore: list all: %w", err)
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
				return out, encodeCursor(page[i].at, page[i].shard), nil
			}
		}
		if exhausted || len(page) == 0 {
			break
		}
		last := page[len(page)-1]
		from = cursorPos{at: last.at, shard: last.shard}
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

// indexPage returns the newest n entries of the index created at lo or
// later and listed after from (newer() order), newest first, and whether
// they are all that is left. Shard k holds them from from.at on, that
// entry itself included when k < from.shard (it comes after from).
func (s *Store) indexPage(ctx context.Context, lo int64, from cursorPos, n int) ([]indexed, bool, error) {
	reads := make([]indexRead, len(s.allKeys))
	for k, old := range s.allKeys {
		max := from.at.String()
		if k >= from.shard {
			max = "(" + max
		}
		reads[k] = indexRead{old: old, max: max, min: entryID{uint64(lo), 0}.String(), n: n, maxlen: s.maxIndexed}
	}
	got, err := s.readIndexes(ctx, reads...)
	if err != nil {
		return nil, false, fmt.Errorf("redisstore: list all: %w", err)
	}
	var all []indexed
	exhausted := true
	for k, es := range got {
		if len(es) == n {
			exhausted = false
		}
		for _, e := range es {
			all = append(all, indexed{e, k})
		}
	}
	slices.SortFunc(all, newer)
	if len(all) > n {
		all, exhausted = all[:n], false
	}
	return all, exhausted, nil
}

// readMany reads the tasks of ids in one round trip, as Get (owner set)
// or Peek (owner empty) does; a task that is gone, or not owner's, is nil.
func (s *Store) readMany(ctx context.Context, ids []string, owner string) ([]*driver.Task, error) {
	out := make([]*driver.Task, len(ids))
	cmds := make([]rueidis.Completed, 0, len(ids))
	at := make([]int, 0, len(ids))
	for i, id := range ids {
		if !driver.ValidID(id) {
			continue
		}
		keys := s.readKeys(id)
		cmds = append(cmds, s.c.B().Evalsha().Sha1(getScript.sha).Numkeys(int64(len(keys))).Key(keys...).Arg(owner).Build())
		at = append(at, i)
	}
	for k, r := range s.c.DoMulti(ctx, cmds...) {
		i := at[k]
		if err := r.Error(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			t, err := s.read(ctx, ids[i], owner)
			if err != nil && err != driver.ErrNotFound {
				return nil, err
			}
			out[i] = t
			continue
		}
		arr, err := r.ToArray()
		if rueidis.IsRedisNil(err) {
			continue // gone (expired, or its creation failed), or not owner's
		}
		if err != nil {
			return nil, fmt.Errorf("redisstore: read %s: %w", ids[i], err)
		}
		t, err := decodeRead(ids[i], arr)
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
