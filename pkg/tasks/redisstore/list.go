package redisstore

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/redis/rueidis"
)

// The list index (driver.Lister): a stream per principal (streamindex.go;
// the successor of the sorted set <prefix>list:<h>, h a hash of the
// principal) holds the ids of the principal's tasks at their expiry.
// Create adds to it in the round trip that creates the task; each addition
// drops the expired entries (whole listpacks of them) and the oldest
// beyond Options.MaxListed, and the stream expires with its last entry. It
// has its own Cluster slot, so it is never in a script with task keys.
// Listing reads the index and then the tasks (owner-checked, as Get): an
// entry whose task is gone is skipped.

// DefaultMaxListed is the default of Options.MaxListed.
const DefaultMaxListed = 10000

// listScanExtra is how many entries past a page List reads after a cursor
// of the earlier format, to skip over those that share its score.
const listScanExtra = 16

// indexScript: KEYS list (the sorted set of the earlier format) and its
// stream; ARGV now exp id max. Adds id at its expiry (xadd: a new stream
// first takes in the sorted set), drops the expired entries and the oldest
// beyond about max, and keeps the stream expiring with its last entry. One
// slot: Cluster-safe.
var indexScript = newScript(streamLua+`
local at = xadd(KEYS[2], KEYS[1], tonumber(ARGV[2]), ARGV[3], ARGV[4])
redis.call('XTRIM', KEYS[2], 'MINID', '~', ARGV[1])
redis.call('PEXPIREAT', KEYS[2], at)
return 1
`, false)

// listKey is the sorted set that was the list index of owner before
// 2026-12-03; its stream is streamOf(listKey(owner)).
func (s *Store) listKey(owner string) string {
	h := sha256.Sum256([]byte(owner))
	return s.prefix + "list:" + hex.EncodeToString(h[:16])
}

// indexCmd is the command that adds a new task to its owner's list index.
func (s *Store) indexCmd(nt *driver.NewTask, now, exp time.Time) rueidis.Completed {
	old := s.listKey(nt.Owner)
	return s.c.B().Evalsha().Sha1(indexScript.sha).Numkeys(2).Key(old, streamOf(old)).
		Arg(ms(now), ms(exp), nt.ID, strconv.Itoa(s.maxListed)).Build()
}

// indexAgain runs the index script through rueidis (which loads it) after
// its EVALSHA in a pipeline found the server without it.
func (s *Store) indexAgain(ctx context.Context, nt *driver.NewTask, now, exp time.Time) error {
	old := s.listKey(nt.Owner)
	return indexScript.lua.Exec(ctx, s.c, []string{old, streamOf(old)},
		[]string{ms(now), ms(exp), nt.ID, strconv.Itoa(s.maxListed)}).Error()
}

var _ driver.Lister = (*Store)(nil)

// List implements driver.Lister: newest first (by expiry), a page at a
// time. The cursor is the entry ID of the page's last task.
func (s *Store) List(ctx context.Context, owner, cursor string, limit int, now time.Time) ([]*driver.Task, string, error) {
	if limit <= 0 {
		limit = driver.ListPageSize
	}
	read := indexRead{old: s.listKey(owner), max: "+", min: entryID{uint64(now.UnixMilli()) + 1, 0}.String(), n: limit + 1, maxlen: s.maxListed}
	var pos cursorPos
	if cursor != "" {
		var ok bool
		if pos, ok = decodeCursor(cursor); !ok || pos.shard >= 0 {
			return nil, "", driver.ErrBadCursor
		}
		read.max = "(" + pos.at.String()
		if pos.afterID != "" {
			read.max, read.n = pos.at.String(), read.n+listScanExtra
		}
	}
	if owner == "" {
		return nil, "", nil
	}
	got, err := s.readIndexes(ctx, read)
	if err != nil {
		return nil, "", fmt.Errorf("redisstore: list: %w", err)
	}
	var page []streamEntry
	more := false
	for _, e := range got[0] {
		if pos.afterID != "" && e.at.ms == pos.at.ms && e.id >= pos.afterID {
			continue // on or before a cursor of the earlier format (ties went by id, descending)
		}
		if len(page) == limit {
			more = true
			break
		}
		page = append(page, e)
	}
	if pos.afterID != "" && !more && len(got[0]) == read.n {
		more = len(page) > 0 // a read of ties only: go on from its last entry
	}
	ids := make([]string, len(page))
	for i, e := range page {
		ids[i] = e.id
	}
	ts, err := s.readMany(ctx, ids, owner)
	if err != nil {
		return nil, "", fmt.Errorf("redisstore: list: %w", err)
	}
	out := make([]*driver.Task, 0, len(ts))
	for _, t := range ts {
		if t != nil {
			out = append(out, t)
		}
	}
	next := ""
	if more && len(page) > 0 {
		next = encodeCursor(page[len(page)-1].at, -1)
	}
	return out, next, nil
}

// cursorPos is where a cursor of List or ListAll points: at the entry ID
// of the last task it listed and, for ListAll over several shards, that
// entry's shard (-1: none). A cursor of the format before 2026-12-03
// (the score and id of the last member listed) decodes with afterID set:
// at is its score with any sequence number, and the tasks there with ids
// from afterID on were listed.
type cursorPos struct {
	at      entryID
	shard   int
	afterID string
}

// encodeCursor is base64url text: "<ms>-<seq>", with "/<shard>" when
// shard >= 0.
func encodeCursor(at entryID, shard int) string {
	c := at.String()
	if shard >= 0 {
		c += "/" + strconv.Itoa(shard)
	}
	return base64.RawURLEncoding.EncodeToString([]byte(c))
}

func decodeCursor(c string) (cursorPos, bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return cursorPos{}, false
	}
	if sc, id, ok := strings.Cut(string(b), ":"); ok {
		n, err := strconv.ParseUint(sc, 10, 64)
		if err != nil || !driver.ValidID(id) {
			return cursorPos{}, false
		}
		return cursorPos{at: entryID{n, maxSeq}, shard: -1, afterID: id}, true
	}
	at, shard, hasShard := strings.Cut(string(b), "/")
	pos := cursorPos{shard: -1}
	var ok bool
	if pos.at, ok = parseEntryID(at); !ok {
		return cursorPos{}, false
	}
	if hasShard {
		if pos.shard, err = strconv.Atoi(shard); err != nil || pos.shard < 0 {
			return cursorPos{}, false
		}
	}
	return pos, true
}
