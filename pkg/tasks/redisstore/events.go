package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/inspect"
)

// Events (driver.EventStore). A task's events live in the hash
// <prefix>{<id>}:e, one field per event name, whose value says where the
// event stands:
//
//	o<kind><until>:<proof>:<meta>  an open wait: kind c (callback), s (signal)
//	                               or j (a parallel step's join), until in
//	                               Unix ms, proof the hex SHA-256 of a
//	                               callback's token, meta the JSON of its
//	                               schema and secret ({"s":..,"k":..})
//	d<kind><payload>               delivered, with its JSON payload
//	x                              closed: the wait ended before a delivery
//
// A commit opens waits (driver.Change.Open), a claim reads the delivered
// events and closes the waits that ended (see delivered in scripts.go),
// and the task hash's field ev ("1") says the task has events at all, so
// that a task without any costs its claims nothing. A released task that
// awaits an event holds its name in the field aw, which a delivery of it
// clears as it resumes the task.

var _ driver.EventStore = (*Store)(nil)

// waitKinds maps an event kind to its letter in the events hash.
var waitKinds = map[driver.EventKind]string{driver.EventCallback: "c", driver.EventSignal: "s"}

// waitMeta is the part of an open wait the scripts never read.
type waitMeta struct {
	Schema json.RawMessage `json:"s,omitempty"`
	Secret string          `json:"k,omitempty"`
}

// encodeWait encodes w as the events hash holds an open wait.
func encodeWait(w *driver.EventWait) (string, error) {
	k, ok := waitKinds[w.Kind]
	if !ok {
		return "", fmt.Errorf("wait %q: unknown kind %q", w.Name, w.Kind)
	}
	if strings.ContainsAny(w.Proof, ":") {
		return "", fmt.Errorf("wait %q: malformed proof", w.Name)
	}
	meta, err := json.Marshal(waitMeta{Schema: w.Schema, Secret: w.Secret})
	if err != nil {
		return "", fmt.Errorf("wait %q: %w", w.Name, err)
	}
	return "o" + k + ms(w.Until) + ":" + w.Proof + ":" + string(meta), nil
}

// decodeWait decodes the open wait name (value v) of the events hash.
func decodeWait(name, v string) (*driver.EventWait, error) {
	if len(v) < 2 || v[0] != 'o' {
		return nil, fmt.Errorf("event %q is not an open wait", name)
	}
	w := &driver.EventWait{Name: name}
	switch v[1] {
	case 'c':
		w.Kind = driver.EventCallback
	case 's':
		w.Kind = driver.EventSignal
	default:
		w.Kind = driver.EventKind("join")
	}
	parts := strings.SplitN(v[2:], ":", 3)
	if len(parts) != 3 {
		return nil, fmt.Errorf("event %q: malformed wait", name)
	}
	until, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("event %q: malformed wait: %w", name, err)
	}
	w.Until, w.Proof = time.UnixMilli(until).UTC(), parts[1]
	if parts[2] != "" {
		var m waitMeta
		if err := json.Unmarshal([]byte(parts[2]), &m); err != nil {
			return nil, fmt.Errorf("event %q: malformed wait: %w", name, err)
		}
		w.Schema, w.Secret = m.Schema, m.Secret
	}
	return w, nil
}

// luaFindWait defines find(e, name, proof, now): the name and value of the
// open wait a delivery of (name, proof) would fill, else false. A callback
// (proof set) is found by its proof (among every wait when name is empty).
const luaFindWait = `
local function find(e, name, proof, now)
  if proof == '' then
    local v = redis.call('HGET', e, name)
    if not v then return false end
    local u = string.match(v, '^os(%d+):')
    if not u or tonumber(u) <= now then return false end
    return {name, v}
  end
  local all
  if name ~= '' then
    local v = redis.call('HGET', e, name)
    if not v then return false end
    all = {name, v}
  else
    all = redis.call('HGETALL', e)
  end
  for i = 1, #all, 2 do
    local u, p = string.match(all[i+1], '^oc(%d+):(%x*):')
    if p and p == proof and tonumber(u) > now then return {all[i], all[i+1]} end
  end
  return false
end
`

// waitingScript: KEYS t e; ARGV name proof now. Returns {-2} for a task
// that does not exist (or a callback that names no open wait), {-1} for a
// signal the task takes no more, {0} for a signal without a wait yet, and
// {1, name, wait} for an open wait. Read-only, so retryable.
var waitingScript = newScript(luaTerminal+luaFindWait+`
local st = redis.call('HMGET', KEYS[1], 'owner', 'status')
if not st[1] then return {-2} end
local now = tonumber(ARGV[3])
local w = false
if not terminal(st[2]) then w = find(KEYS[2], ARGV[1], ARGV[2], now) end
if w then return {1, w[1], w[2]} end
if ARGV[2] ~= '' then return {-2} end
if terminal(st[2]) or redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return {-1} end
return {0}
`, true)

// deliverLua: KEYS t e (+ due q w when dispatching); ARGV name proof
// payload now maxEvents. Returns -2 (the task, or for a callback its open
// wait, is not there), -1 (a signal the task takes no more), 1 delivered,
// 2 delivered and resumed (the task awaited it).
var deliverLua = luaTerminal + luaFindWait + `
local st = redis.call('HMGET', KEYS[1], 'owner', 'status', 'aw', 'exp')
if not st[1] then return -2 end
local name, proof, now = ARGV[1], ARGV[2], tonumber(ARGV[4])
local cb = proof ~= ''
if terminal(st[2]) then
  if cb then return -2 end
  return -1
end
local kind = 's'
if cb then
  if not find(KEYS[2], name, proof, now) then return -2 end
  kind = 'c'
elseif redis.call('HEXISTS', KEYS[2], name) == 1 then
  if not find(KEYS[2], name, '', now) then return -1 end
elseif redis.call('HLEN', KEYS[2]) >= tonumber(ARGV[5]) then
  return -1
end
redis.call('HSET', KEYS[2], name, 'd' .. kind .. ARGV[3])
redis.call('PEXPIREAT', KEYS[2], st[4])
if st[3] == name then
  redis.call('HSET', KEYS[1], 'ev', '1', 'status', 'working', 'wake', '0', 'updated', ARGV[4])
  redis.call('HDEL', KEYS[1], 'aw')
  dispatch(ARGV[4])
  due(now + GRACE)
  changed()
  return 2
end
redis.call('HSET', KEYS[1], 'ev', '1')
return 1
`

// Waiting implements driver.EventStore: one read-only script.
func (s *Store) Waiting(ctx context.Context, id, name, proof string, now time.Time) (*driver.EventWait, error) {
	if !driver.ValidID(id) {
		return nil, driver.ErrNotFound
	}
	t, _, _, _ := s.keys(id)
	sctx, span := s.span(ctx, "waiting")
	arr, err := waitingScript.lua.Exec(sctx, s.c, []string{t, s.eventsKey(id)}, []string{name, proof, ms(now)}).ToArray()
	endSpan(span, err)
	if err != nil {
		return nil, fmt.Errorf("redisstore: waiting %s: %w", id, err)
	}
	code, _ := arr[0].AsInt64()
	switch code {
	case -2:
		return nil, driver.ErrNotFound
	case -1:
		return nil, driver.ErrEventClosed
	case 0:
		return nil, nil
	}
	if len(arr) != 3 {
		return nil, fmt.Errorf("redisstore: waiting %s: a reply of %d elements", id, len(arr))
	}
	wname, _ := arr[1].ToString()
	v, _ := arr[2].ToString()
	return decodeWait(wname, v)
}

// Deliver implements driver.EventStore: one script. When the store does not
// dispatch, the due entry of a task that exists moves to now+grace at the
// latest, in the same round trip, before the script (as Update's does),
// so that the sweeper finds a task the delivery resumed if its caller dies
// before it enqueues it.
func (s *Store) Deliver(ctx context.Context, id string, d *driver.Delivery) (bool, error) {
	if !driver.ValidID(id) || d.Name == "" {
		return false, driver.ErrNotFound
	}
	t, _, _, _ := s.keys(id)
	before := s.index(s.c.B().Zadd().Key(s.dueKey(id)).Xx().Lt().ScoreMember().ScoreMember(float64(d.Now.Add(s.grace).UnixMilli()), id).Build())
	res, _, waitErr := s.run(ctx, s.sc.deliver, s.withQueue(id, t, s.eventsKey(id)),
		[]string{d.Name, d.Proof, string(d.Payload), ms(d.Now), strconv.Itoa(driver.MaxEvents)}, before, nil, true)
	n, err := res.AsInt64()
	if err == nil && n > 0 {
		err = waitErr
	}
	if err != nil {
		return false, fmt.Errorf("redisstore: deliver %s: %w", id, err)
	}
	switch n {
	case -2:
		return false, driver.ErrNotFound
	case -1:
		return false, driver.ErrEventClosed
	}
	return n == 2, nil
}

// eventsOf decodes a task's events hash for Inspect.
func eventsOf(h map[string]string) (map[string]inspect.Event, error) {
	out := make(map[string]inspect.Event, len(h))
	for name, v := range h {
		var r inspect.Event
		switch {
		case strings.HasPrefix(v, "o"):
			w, err := decodeWait(name, v)
			if err != nil {
				return nil, err
			}
			r.State, r.Kind, r.Until, r.Signed = "open", w.Kind, w.Until, w.Secret != ""
		case strings.HasPrefix(v, "d") && len(v) >= 2:
			r.State, r.Payload = "delivered", json.RawMessage(v[2:])
			switch v[1] {
			case 'c':
				r.Kind = driver.EventCallback
			case 's':
				r.Kind = driver.EventSignal
			default:
				r.Kind = "join"
			}
		case v == "x":
			r.State = "closed"
		default:
			return nil, errors.New("malformed event " + name)
		}
		out[name] = r
	}
	return out, nil
}
