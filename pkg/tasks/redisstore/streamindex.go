package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/rueidis"
)

// The two indexes of tasks — each principal's list (list.go) and the index
// of all tasks (listall.go) — are Redis streams: an entry {i: <task id>}
// per task, at an entry ID whose milliseconds order the index (a list
// entry's the task's expiry, an entry of the index of all tasks its
// creation). A stream keeps its entries in listpacks of about a hundred:
// about 41 bytes of Redis memory per entry, where the sorted sets of the
// format before 2026-12-03 took about 129 (a skiplist node, a hash table
// entry and the member, once a set passes 128 members). Both indexes hold
// up to 10,000 entries by default, which at 1k–100k live tasks is every
// task: see BENCHMARKS.md, "Scale".
//
// A stream's entry IDs only grow. An entry whose milliseconds are behind
// the stream's top (a task created with a shorter TTL than the one before
// it; a creation on an instance whose clock is behind another's) goes just
// after the top instead: it is listed a little out of order, and kept a
// little longer than its task, which the readers skip once it is gone.
//
// Each stream is the successor of its sorted set, under a name in the same
// Cluster slot (streamOf). The first script of this format to touch an
// index — an addition or a read — moves the sorted set's members into the
// stream in the order of their scores, and deletes the set: no task of an
// earlier version drops out of a listing.

// streamOf is the name of the stream that succeeds the sorted-set index
// old, in old's Cluster slot: old with a hash tag that names all of it, or
// with ":s" before the hash tag old already has.
func streamOf(old string) string {
	if i := strings.IndexByte(old, '{'); i >= 0 {
		return old[:i] + ":s" + old[i:]
	}
	return "{" + old + "}"
}

// streamLua defines the scripts' helpers for the stream indexes:
//
//   - put(key, ms, id, maxlen, nomk) appends {i: id} at ms (<ms>-*), or,
//     when the stream's top is past ms (Redis refuses an ID behind the top;
//     and a Redis before 7.0 refuses <ms>-*), right after the top (an
//     explicit ID: XREVRANGE reads the top), trimmed to about maxlen
//     entries (whole listpacks go, so about maxlen to maxlen+100 stay). It
//     returns the entry's ms, or nil when nomk is set and the stream does
//     not exist (XADD NOMKSTREAM). An addition in order costs one XADD, one
//     out of order three commands.
//   - migrate(old, key, maxlen) moves the members of the sorted set old
//     (the index of the format before 2026-12-03, whose marker "~" it
//     leaves out) into the stream key, in the order of their scores, and
//     gives the stream old's expiry (PTTL).
//   - xadd(key, old, ms, id, maxlen) is put on a stream that exists; on one
//     that does not, it first migrates old.
const streamLua = `
local function try(key, nomk, maxlen, at, id)
  if nomk then return redis.pcall('XADD', key, 'NOMKSTREAM', 'MAXLEN', '~', maxlen, at, 'i', id) end
  return redis.pcall('XADD', key, 'MAXLEN', '~', maxlen, at, 'i', id)
end
local function failed(r) return type(r) == 'table' and r.err ~= nil end
local function after(key, ms)
  local top = redis.call('XREVRANGE', key, '+', '-', 'COUNT', 1)[1]
  if top then
    local tms, tseq = string.match(top[1], '^(%d+)-(%d+)$')
    if tonumber(tms) >= ms then return tms .. '-' .. string.format('%.0f', tonumber(tseq) + 1) end
  end
  return string.format('%.0f', ms) .. '-0'
end
local function put(key, ms, id, maxlen, nomk)
  local r = try(key, nomk, maxlen, string.format('%.0f', ms) .. '-*', id)
  if failed(r) then r = try(key, nomk, maxlen, after(key, ms), id) end
  if failed(r) then r = try(key, nomk, maxlen, '*', id) end
  if failed(r) then error(r) end
  if r then return string.match(r, '^%d+') end
  return nil
end
local function migrate(old, key, maxlen)
  if redis.call('EXISTS', old) == 0 then return end
  local ttl = redis.call('PTTL', old)
  local m = redis.call('ZRANGE', old, 0, -1, 'WITHSCORES')
  for i = 1, #m, 2 do
    if m[i] ~= '~' then put(key, tonumber(m[i+1]), m[i], maxlen, false) end
  end
  redis.call('DEL', old)
  if ttl > 0 and redis.call('EXISTS', key) == 1 then redis.call('PEXPIRE', key, ttl) end
end
local function xadd(key, old, ms, id, maxlen)
  local at = put(key, ms, id, maxlen, true)
  if at then return at end
  migrate(old, key, maxlen)
  return put(key, ms, id, maxlen, false)
end
`

// readIndexScript: KEYS old stream; ARGV max min count maxlen. Moves an
// index of the earlier format into its stream if it is still there
// (migrate), then reads the stream from max down to min, at most count
// entries (XREVRANGE).
var readIndexScript = newScript(streamLua+`
migrate(KEYS[1], KEYS[2], ARGV[4])
return redis.call('XREVRANGE', KEYS[2], ARGV[1], ARGV[2], 'COUNT', ARGV[3])
`, true)

// entryID is a stream entry's ID.
type entryID struct{ ms, seq uint64 }

// maxSeq is the largest sequence number of an entry ID.
const maxSeq = ^uint64(0)

func (e entryID) String() string {
	return strconv.FormatUint(e.ms, 10) + "-" + strconv.FormatUint(e.seq, 10)
}

// less orders entry IDs as a stream does.
func (e entryID) less(o entryID) bool {
	return e.ms < o.ms || e.ms == o.ms && e.seq < o.seq
}

func parseEntryID(s string) (entryID, bool) {
	ms, seq, ok := strings.Cut(s, "-")
	if !ok {
		return entryID{}, false
	}
	m, err1 := strconv.ParseUint(ms, 10, 64)
	q, err2 := strconv.ParseUint(seq, 10, 64)
	return entryID{m, q}, err1 == nil && err2 == nil
}

// streamEntry is one entry of an index stream: a task id at an entry ID.
type streamEntry struct {
	id string
	at entryID
}

// indexRead is a read of an index stream (the successor of the sorted set
// old) from max down to min, at most n entries; maxlen bounds the stream
// when the read moves the sorted set into it.
type indexRead struct {
	old, max, min string
	n, maxlen     int
}

func (r indexRead) args() []string {
	return []string{r.max, r.min, strconv.Itoa(r.n), strconv.Itoa(r.maxlen)}
}

// readIndexes runs reads in one round trip (a read that finds the server
// without the script runs again through rueidis, which loads it) and
// decodes their entries.
func (s *Store) readIndexes(ctx context.Context, reads ...indexRead) ([][]streamEntry, error) {
	cmds := make([]rueidis.Completed, len(reads))
	for i, r := range reads {
		cmds[i] = s.c.B().Evalsha().Sha1(readIndexScript.sha).Numkeys(2).Key(r.old, streamOf(r.old)).Arg(r.args()...).Build()
	}
	out := make([][]streamEntry, len(reads))
	for i, res := range s.c.DoMulti(ctx, cmds...) {
		if err := res.Error(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			res = readIndexScript.lua.Exec(ctx, s.c, []string{reads[i].old, streamOf(reads[i].old)}, reads[i].args())
		}
		es, err := res.AsXRange()
		if err != nil && !rueidis.IsRedisNil(err) {
			return nil, fmt.Errorf("redisstore: read index: %w", err)
		}
		for _, e := range es {
			at, ok := parseEntryID(e.ID)
			if !ok {
				return nil, fmt.Errorf("redisstore: read index: entry ID %q", e.ID)
			}
			out[i] = append(out[i], streamEntry{id: e.FieldValues["i"], at: at})
		}
	}
	return out, nil
}
