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

// The list index (driver.Lister): a sorted set <prefix>list:<h> per
// principal (h: a hash of the principal) holds the ids of the principal's
// tasks, scored by their expiry. Create adds to it in the round trip that
// creates the task; expired members are dropped at every addition, the
// oldest beyond Options.MaxListed too, and the set expires with its last member.
// It has its own Cluster slot, so it is never in a script with task keys.
// Listing reads the index and then the tasks (owner-checked, as Get): a
// member whose task is gone is skipped.

// DefaultMaxListed is the default of Options.MaxListed.
const DefaultMaxListed = 10000

// listScanExtra is how many members past a page List reads, to skip over
// members that share the cursor's score.
const listScanExtra = 16

// indexScript: KEYS list; ARGV now exp id max. Adds id scored by its
// expiry, drops expired members and the oldest beyond max, and keeps the
// set expiring with its last member. One key: Cluster-safe.
var indexScript = newScript(`
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -(tonumber(ARGV[4]) + 1))
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], last[2])
return 1
`, true)

// listKey is the list index of owner.
func (s *Store) listKey(owner string) string {
	h := sha256.Sum256([]byte(owner))
	return s.prefix + "list:" + hex.EncodeToString(h[:16])
}

// indexCmd is the command that adds a new task to its owner's list index.
func (s *Store) indexCmd(nt *driver.NewTask, now, exp time.Time) rueidis.Completed {
	return s.c.B().Evalsha().Sha1(indexScript.sha).Numkeys(1).Key(s.listKey(nt.Owner)).
		Arg(ms(now), ms(exp), nt.ID, strconv.Itoa(s.maxListed)).Build()
}

// indexAgain runs the index script through rueidis (which loads it) after
// its EVALSHA in a pipeline found the server without it.
func (s *Store) indexAgain(ctx context.Context, nt *driver.NewTask, now, exp time.Time) error {
	return indexScript.lua.Exec(ctx, s.c, []string{s.listKey(nt.Owner)},
		[]string{ms(now), ms(exp), nt.ID, strconv.Itoa(s.maxListed)}).Error()
}

var _ driver.Lister = (*Store)(nil)

// List implements driver.Lister: newest first (by expiry, then id), a page
// at a time. The cursor is the score and id of the page's last member.
func (s *Store) List(ctx context.Context, owner, cursor string, limit int, now time.Time) ([]*driver.Task, string, error) {
	if limit <= 0 {
		limit = driver.ListPageSize
	}
	max, afterID := "+inf", ""
	if cursor != "" {
		score, id, ok := decodeCursor(cursor)
		if !ok {
			return nil, "", driver.ErrBadCursor
		}
		max, afterID = strconv.FormatInt(score, 10), id
	}
	if owner == "" {
		return nil, "", nil
	}
	members, err := s.c.Do(ctx, s.c.B().Zrange().Key(s.listKey(owner)).Min(max).Max("("+ms(now)).
		Byscore().Rev().Limit(0, int64(limit+listScanExtra+1)).Withscores().Build()).AsZScores()
	if err != nil {
		return nil, "", fmt.Errorf("redisstore: list: %w", err)
	}
	type entry struct {
		id    string
		score int64
	}
	var page []entry
	more := false
	for _, m := range members {
		sc := int64(m.Score)
		if afterID != "" && strconv.FormatInt(sc, 10) == max && m.Member >= afterID {
			continue // on or before the cursor (ties go by id, descending)
		}
		if len(page) == limit {
			more = true
			break
		}
		page = append(page, entry{m.Member, sc})
	}
	if !more && len(members) == limit+listScanExtra+1 {
		more = len(page) > 0 // a page of ties only: go on from its last member
	}
	out := make([]*driver.Task, 0, len(page))
	cmds := make([]rueidis.Completed, 0, len(page))
	for _, e := range page {
		if !driver.ValidID(e.id) {
			continue
		}
		keys := s.readKeys(e.id)
		cmds = append(cmds, s.c.B().Evalsha().Sha1(getScript.sha).Numkeys(int64(len(keys))).Key(keys...).Arg(owner).Build())
	}
	for i, r := range s.c.DoMulti(ctx, cmds...) {
		id := page[i].id
		if err := r.Error(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			t, err := s.read(ctx, id, owner)
			if err == nil {
				out = append(out, t)
			} else if err != driver.ErrNotFound {
				return nil, "", err
			}
			continue
		}
		arr, err := r.ToArray()
		if rueidis.IsRedisNil(err) {
			continue // gone (expired, or its creation failed)
		}
		if err != nil {
			return nil, "", fmt.Errorf("redisstore: list: %w", err)
		}
		t, err := decodeRead(id, arr)
		if err == driver.ErrNotFound {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		out = append(out, t)
	}
	next := ""
	if more && len(page) > 0 {
		last := page[len(page)-1]
		next = encodeCursor(last.score, last.id)
	}
	return out, next, nil
}

func encodeCursor(score int64, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(score, 10) + ":" + id))
}

func decodeCursor(c string) (int64, string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, "", false
	}
	sc, id, ok := strings.Cut(string(b), ":")
	if !ok || !driver.ValidID(id) {
		return 0, "", false
	}
	n, err := strconv.ParseInt(sc, 10, 64)
	return n, id, err == nil
}
