package main

import (
	"context"
	"strconv"
	"strings"

	"github.com/redis/rueidis"
)

// indexes are the keys that index tasks: sorted sets (the due index, the
// queue) and streams (the index of all tasks and each principal's list:
// redisstore's streamindex.go). A stream is read whole once, on the first
// question about it: a stream holds up to about 10,000 entries.
type indexes struct {
	r              *redisServer
	zsets, streams []string
	entries        map[string]map[string]string // stream -> task id -> entry ID
}

// indexes lists the deployment's index keys.
func (d *deployment) indexes() *indexes {
	ix := &indexes{r: d.redis, zsets: []string{d.prefix + "due", d.prefix + "{queue}"}, entries: map[string]map[string]string{}}
	ix.streams = append(ix.streams, "{"+d.prefix+"all}")
	keys, _ := d.redis.c.Do(context.Background(), d.redis.c.B().Keys().Pattern("{"+d.prefix+"list:*").Build()).AsStrSlice()
	ix.streams = append(ix.streams, keys...)
	return ix
}

// all are the index keys.
func (ix *indexes) all() []string { return append(append([]string(nil), ix.zsets...), ix.streams...) }

// isStream reports whether key is one of the streams.
func (ix *indexes) isStream(key string) bool { return strings.HasPrefix(key, "{") }

// scoreOf is id's score in the index key (a stream entry's: its ms), if
// the index holds id.
func (ix *indexes) scoreOf(ctx context.Context, key, id string) (float64, bool) {
	if !ix.isStream(key) {
		sc, err := ix.r.c.Do(ctx, ix.r.c.B().Zscore().Key(key).Member(id).Build()).AsFloat64()
		return sc, err == nil
	}
	at, ok := ix.entryOf(ctx, key, id)
	if !ok {
		return 0, false
	}
	ms, _, _ := strings.Cut(at, "-")
	v, err := strconv.ParseFloat(ms, 64)
	return v, err == nil
}

// entryOf is the ID of id's entry in the stream key, if it holds one.
func (ix *indexes) entryOf(ctx context.Context, key, id string) (string, bool) {
	m, ok := ix.entries[key]
	if !ok {
		m = map[string]string{}
		es, _ := ix.r.c.Do(ctx, ix.r.c.B().Xrange().Key(key).Start("-").End("+").Build()).AsXRange()
		for _, e := range es {
			m[e.FieldValues["i"]] = e.ID
		}
		ix.entries[key] = m
	}
	at, ok := m[id]
	return at, ok
}

// name is how the measurements call the index key: without the
// deployment's prefix, and each principal's list as one.
func (ix *indexes) name(prefix, key string) string {
	n := key
	if ix.isStream(key) {
		n = strings.TrimSuffix(strings.TrimPrefix(key, "{"), "}")
	}
	n = strings.TrimPrefix(n, prefix)
	if strings.HasPrefix(n, "list:") {
		return "list:<principal>"
	}
	return n
}

// streamAddLua: KEYS stream; ARGV ms id pairs. Adds each id at its ms, or
// after the stream's top (as redisstore's put, on Redis 7).
var streamAddLua = rueidis.NewLuaScript(`
for i = 1, #ARGV, 2 do
  local r = redis.pcall('XADD', KEYS[1], ARGV[i] .. '-*', 'i', ARGV[i+1])
  if type(r) == 'table' and r.err then redis.call('XADD', KEYS[1], '*', 'i', ARGV[i+1]) end
end
return 1
`)
