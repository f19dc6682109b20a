package redisstore

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/inspect"
	"github.com/redis/rueidis"
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

// Compact waits (format of 2026-12-03). An open wait with its schema in
// it is longer than 64 bytes (a callback's: about 240), which makes the
// events hash a hash table (about 470 bytes for one wait). Now a wait
// keeps its callback's proof as the first 16 bytes of the SHA-256 in
// base64url (22 characters; a delivery presents the hex digest, and the
// scripts compare either form) and, when its meta would not fit, a
// reference to it instead: "@", the day of the task's expiry (Unix days)
// and "." and the first 9 bytes of the meta's SHA-256 in base64url. The
// meta itself is the string <prefix>wm:<day>.<digest>, shared by every
// wait with the same meta whose task expires that day, and expiring at that
// day's end: a deployment keeps one per schema and day. A meta that holds
// a secret is the task's own, the string <prefix>{id}:w:<digest>, which
// expires with the task, and the reference is "!" and the digest. Waits
// written before keep the hex proof and the meta inline, and read as
// before.

// compactProof is the proof p (a hex SHA-256) as a compact wait keeps it,
// or p when it is not one.
func compactProof(p string) string {
	b, err := hex.DecodeString(p)
	if err != nil || len(b) != sha256.Size {
		return p
	}
	return base64.RawURLEncoding.EncodeToString(b[:16])
}

// metaWrite is the shared string that holds a wait's meta.
type metaWrite struct {
	key, value string
	until      time.Time
	// own: the task's own string, else a shared one (written once).
	own bool
}

// encodeWait encodes w as the events hash holds an open wait of the task
// id that expires at exp, and the meta string to write first, if any.
func (s *Store) encodeWait(id string, w *driver.EventWait, exp time.Time) (string, *metaWrite, error) {
	k, ok := waitKinds[w.Kind]
	if !ok {
		return "", nil, fmt.Errorf("wait %q: unknown kind %q", w.Name, w.Kind)
	}
	if strings.ContainsAny(w.Proof, ":") {
		return "", nil, fmt.Errorf("wait %q: malformed proof", w.Name)
	}
	meta, err := json.Marshal(waitMeta{Schema: w.Schema, Secret: w.Secret})
	if err != nil {
		return "", nil, fmt.Errorf("wait %q: %w", w.Name, err)
	}
	head := "o" + k + ms(w.Until) + ":" + compactProof(w.Proof) + ":"
	if len(head)+len(meta) <= maxInline {
		return head + string(meta), nil, nil
	}
	sum := sha256.Sum256(meta)
	digest := base64.RawURLEncoding.EncodeToString(sum[:9])
	if w.Secret != "" {
		ref := "!" + digest
		return head + ref, &metaWrite{key: s.metaKey(id, ref), value: string(meta), until: exp, own: true}, nil
	}
	day := exp.UnixMilli() / (24 * time.Hour).Milliseconds()
	ref := "@" + strconv.FormatInt(day, 10) + "." + digest
	return head + ref, &metaWrite{key: s.metaKey(id, ref), value: string(meta), until: time.UnixMilli((day + 1) * (24 * time.Hour).Milliseconds())}, nil
}

// metaKey is the string of the wait meta reference ref of the task id (see
// encodeWait).
func (s *Store) metaKey(id, ref string) string {
	if ref[0] == '!' {
		return s.prefix + "{" + id + "}:w:" + ref[1:]
	}
	return s.prefix + "wm:" + ref[1:]
}

// writeMetas writes the shared meta strings of waits a commit opens: before
// the commit, so that no wait refers to a meta that is not there.
func (s *Store) writeMetas(ctx context.Context, ws []*metaWrite) error {
	cmds := make(rueidis.Commands, len(ws))
	for i, w := range ws {
		if w.own {
			cmds[i] = s.c.B().Set().Key(w.key).Value(w.value).Pxat(w.until).Build()
		} else {
			cmds[i] = s.c.B().Set().Key(w.key).Value(w.value).Nx().Pxat(w.until).Build()
		}
	}
	for _, r := range s.c.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil && !rueidis.IsRedisNil(err) {
			return fmt.Errorf("writing a wait's meta: %w", err)
		}
	}
	return nil
}

// waitMetaOf fills the schema and secret of w from the wait's stored meta
// (inline, or the shared string of its reference).
func (s *Store) waitMetaOf(ctx context.Context, id string, w *driver.EventWait, meta string) error {
	if meta == "" {
		return nil
	}
	if meta[0] == '@' || meta[0] == '!' {
		v, err := s.c.Do(ctx, s.c.B().Get().Key(s.metaKey(id, meta)).Build()).ToString()
		if err != nil {
			return fmt.Errorf("event %q: its meta %s: %w", w.Name, meta, err)
		}
		meta = v
	}
	m, err := inlineMeta(w.Name, meta)
	w.Schema, w.Secret = m.Schema, m.Secret
	return err
}

// inlineMeta decodes the meta the wait name holds itself (JSON); "" and a
// reference to a meta string (see encodeWait) decode to none.
func inlineMeta(name, meta string) (waitMeta, error) {
	var m waitMeta
	if meta == "" || meta[0] == '@' || meta[0] == '!' {
		return m, nil
	}
	if err := json.Unmarshal([]byte(meta), &m); err != nil {
		return m, fmt.Errorf("event %q: malformed wait: %w", name, err)
	}
	return m, nil
}

// decodeWait decodes the open wait name (value v) of the events hash,
// but for its meta, which it returns as stored (see waitMetaOf).
func decodeWait(name, v string) (*driver.EventWait, string, error) {
	if len(v) < 2 || v[0] != 'o' {
		return nil, "", fmt.Errorf("event %q is not an open wait", name)
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
		return nil, "", fmt.Errorf("event %q: malformed wait", name)
	}
	until, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil {
		return nil, "", fmt.Errorf("event %q: malformed wait: %w", name, err)
	}
	w.Until, w.Proof = time.UnixMilli(until).UTC(), parts[1]
	return w, parts[2], nil
}

// luaFindWait defines find(e, name, proof, proof2, now): the name and
// value of the open wait a delivery of (name, proof) would fill, else
// false. A callback (proof set) is found by its proof, the hex digest or
// its compact form proof2 (among every wait when name is empty).
const luaFindWait = `
local function find(e, name, proof, proof2, now)
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
    local u, p = string.match(all[i+1], '^oc(%d+):([^:]*):')
    if p and (p == proof or p == proof2) and tonumber(u) > now then return {all[i], all[i+1]} end
  end
  return false
end
`

// waitingScript: KEYS t e; ARGV name proof now proof2. Returns {-2} for a task
// that does not exist (or a callback that names no open wait), {-1} for a
// signal the task takes no more, {0} for a signal without a wait yet, and
// {1, name, wait} for an open wait. Read-only, so retryable.
var waitingScript = newScript(luaTerminal+luaFindWait+`
local st = redis.call('HMGET', KEYS[1], 'owner', 'status')
if not st[1] then return {-2} end
local now = tonumber(ARGV[3])
local w = false
if not terminal(st[2]) then w = find(KEYS[2], ARGV[1], ARGV[2], ARGV[4], now) end
if w then return {1, w[1], w[2]} end
if ARGV[2] ~= '' then return {-2} end
if terminal(st[2]) or redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return {-1} end
return {0}
`, true)

// deliverLua: KEYS t e (+ due q w when dispatching); ARGV name proof
// payload now maxEvents proof2. Returns -2 (the task, or for a callback its open
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
  if not find(KEYS[2], name, proof, ARGV[6], now) then return -2 end
  kind = 'c'
elseif redis.call('HEXISTS', KEYS[2], name) == 1 then
  if not find(KEYS[2], name, '', '', now) then return -1 end
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
	arr, err := waitingScript.lua.Exec(sctx, s.c, []string{t, s.eventsKey(id)}, []string{name, proof, ms(now), compactProof(proof)}).ToArray()
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
	w, meta, err := decodeWait(wname, v)
	if err == nil {
		err = s.waitMetaOf(ctx, id, w, meta)
	}
	if err != nil {
		return nil, fmt.Errorf("redisstore: waiting %s: %w", id, err)
	}
	return w, nil
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
		[]string{d.Name, d.Proof, string(d.Payload), ms(d.Now), strconv.Itoa(driver.MaxEvents), compactProof(d.Proof)}, before, nil, true)
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
			w, meta, err := decodeWait(name, v)
			if err != nil {
				return nil, err
			}
			m, err := inlineMeta(name, meta)
			if err != nil {
				return nil, err
			}
			r.State, r.Kind, r.Until, r.Signed = "open", w.Kind, w.Until, m.Secret != "" || strings.HasPrefix(meta, "!")
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
