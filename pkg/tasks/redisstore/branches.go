package redisstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/inspect"
	"github.com/redis/rueidis"
)

// Parallel steps (driver.Brancher). The branches of a task's n-th parallel
// step live in the hash <prefix>{<id>}:f<n>, under the task's hash tag (so
// in its Redis Cluster slot, and in every script with its other keys),
// expiring with the task:
//
//	n, c, name   branches, concurrency, the step's name
//	nx, nd       branches dispatched so far (0..nx-1), branches finished
//	g<i> l<i>    branch i's fencing generation and lease end (Unix ms, 0: none)
//	a<i> w<i>    its attempts so far and the time of its retry (0: none)
//	v<i> | e<i>  its result, or its final error, once it finished
//	t<i> f<i>    how long its last attempt ran (ms), when it finished
//	x<i> k<i>    the error of its last retried attempt; how many of its
//	             leases ran out (its worker was lost)
//
// A commit that starts the fork (driver.Change.Fork) writes n, c, nx = c,
// opens the join (the event named after the step, kind j, in the events
// hash: see events.go) and sets the task's field fk to the fork's number;
// the last branch to finish delivers the join, which resumes the task if
// it awaits it, and clears fk. A branch's queue message is its id
// (driver.BranchID), in the task's queue shard.

var _ driver.Brancher = (*Store)(nil)

// claimBranchLua: KEYS t j r e f a m (+ due q w when dispatching); ARGV index
// now leaseMs branchId. Returns {NF} (no such branch), {I} (nothing to
// run: finished, not dispatched yet, or its task ended), {L, lease end}
// (holding the branch's message until then), {W, retry at}, or {C, gen,
// att, 0, record, journal, responses, lost, events} as claimScript does,
// the record being the task's, gen, att and lost the branch's. Events are
// not read: a branch decides none.
var claimBranchLua = luaTerminal + `
local CLAIMFIELDS = {'` + strings.Join(claimFields, "', '") + `'}` + `
local now, i = tonumber(ARGV[2]), ARGV[1]
local all = redis.call('HGETALL', KEYS[1])
if #all == 0 then return {'NF'} end
local f = {}
for k = 1, #all, 2 do f[all[k]] = all[k+1] end
if terminal(f.status) then return {'I'} end
local b = redis.call('HMGET', KEYS[5], 'n', 'nx', 'g'..i, 'l'..i, 'a'..i, 'w'..i, 'v'..i, 'e'..i)
if not b[1] or tonumber(i) >= tonumber(b[1]) then return {'NF'} end
if b[7] or b[8] or tonumber(i) >= tonumber(b[2]) then return {'I'} end
local lease = tonumber(b[4] or '0')
if lease > now then
  holdID(ARGV[4], lease)
  return {'L', lease}
end
local wake = tonumber(b[6] or '0')
if wake > now then return {'W', wake} end
local gen = tonumber(b[3] or '0') + 1
local att = tonumber(b[5] or '0') + 1
redis.call('HSET', KEYS[5], 'g'..i, gen, 'a'..i, att, 'l'..i, now + tonumber(ARGV[3]), 'w'..i, 0)
if lease > 0 then redis.call('HINCRBY', KEYS[5], 'k'..i, 1) end
local journal, responses = {}, {}
if f.jn then journal = journalOf(f) elseif f.j ~= '0' then journal = redis.call('LRANGE', KEYS[2], 0, -1) end
if flag(f.r, f.jn) then responses = redis.call('HGETALL', KEYS[3]) end
unspill(f, KEYS[6], KEYS[7])
local rec = {}
for k, name in ipairs(CLAIMFIELDS) do rec[k] = f[name] or '' end
return {'C', gen, att, 0, rec, journal, responses, lease, {}}
`

// renewBranchLua: KEYS t f (+ due q w); ARGV index gen now leaseMs
// branchId. Renews the branch's lease while the claim gen holds it and
// holds its message until the new end. Returns the end, -1 fenced, -2
// gone. Idempotent for a given now, so retryable.
var renewBranchLua = luaTerminal + `
local st = redis.call('HGET', KEYS[1], 'status')
if not st then return -2 end
if terminal(st) then return -1 end
local i = ARGV[1]
local b = redis.call('HMGET', KEYS[2], 'g'..i, 'l'..i, 'v'..i, 'e'..i)
if b[1] ~= ARGV[2] or (b[2] or '0') == '0' or b[3] or b[4] then return -1 end
local ends = tonumber(ARGV[3]) + tonumber(ARGV[4])
redis.call('HSET', KEYS[2], 'l'..i, ends)
holdID(ARGV[5], ends)
return ends
`

// branchCancelledScript: KEYS t f; ARGV index gen. Returns 1 when the
// branch's task ended or its cancellation was requested, or another claim
// took the branch. Read-only, so retryable.
var branchCancelledScript = newScript(luaTerminal+`
local st = redis.call('HMGET', KEYS[1], 'status', 'cancel')
if not st[1] or terminal(st[1]) or st[2] == '1' then return 1 end
if redis.call('HGET', KEYS[2], 'g'..ARGV[1]) ~= ARGV[2] then return 1 end
return 0
`, true)

// commitBranchLua: KEYS t f e (+ due q w); ARGV index gen now op value err
// retry attempt tookMs branchId fork. op: release (run again now, the
// attempt uncharged), retry (at retry, err the attempt's), done (value) or
// fail (err). Returns {-2} gone, {-1} fenced, or {0, the id of the branch
// it dispatched next or false, 1 if it resumed the task}.
var commitBranchLua = luaTerminal + `
local i, now = ARGV[1], tonumber(ARGV[3])
local st = redis.call('HMGET', KEYS[1], 'status', 'aw')
if not st[1] then return {-2} end
if terminal(st[1]) then return {-1} end
local b = redis.call('HMGET', KEYS[2], 'g'..i, 'l'..i, 'v'..i, 'e'..i, 'n', 'nx', 'name', 'a'..i)
if b[1] ~= ARGV[2] or (b[2] or '0') == '0' or b[3] or b[4] then return {-1} end
local op = ARGV[4]
if op == 'release' then
  redis.call('HSET', KEYS[2], 'l'..i, 0, 'a'..i, math.max(tonumber(b[8] or '1') - 1, 0))
  dispatchID(ARGV[10], now)
  return {0, false, 0}
end
if op == 'retry' then
  redis.call('HSET', KEYS[2], 'l'..i, 0, 'w'..i, ARGV[7], 'x'..i, ARGV[6])
  dispatchID(ARGV[10], ARGV[7])
  return {0, false, 0}
end
local set = {'l'..i, 0, 't'..i, ARGV[9], 'f'..i, ARGV[3], 'a'..i, ARGV[8]}
if op == 'done' then
  set[#set+1] = 'v'..i; set[#set+1] = ARGV[5]
else
  set[#set+1] = 'e'..i; set[#set+1] = ARGV[6]
end
redis.call('HSET', KEYS[2], unpack(set))
undispatchID(ARGV[10])
local nd = redis.call('HINCRBY', KEYS[2], 'nd', 1)
local n, nx = tonumber(b[5]), tonumber(b[6])
local nxt = false
if nx < n then
  redis.call('HSET', KEYS[2], 'nx', nx + 1)
  nxt = idOf(KEYS[1]) .. '.' .. ARGV[11] .. '.' .. nx
  dispatchID(nxt, now)
end
dueLT(now + GRACE)
local resumed = 0
if nd >= n then
  redis.call('HSET', KEYS[3], b[7], 'dj')
  redis.call('HDEL', KEYS[1], 'fk')
  if st[2] == b[7] then
    redis.call('HSET', KEYS[1], 'status', 'working', 'wake', '0', 'updated', ARGV[3])
    redis.call('HDEL', KEYS[1], 'aw')
    dispatch(ARGV[3])
    due(now + GRACE)
    changed()
    resumed = 1
  end
end
return {0, nxt, resumed}
`

// branchKeys returns the task, fork and index of branch id, and the keys
// of its task and fork; ok is false for an id that is not a branch's.
func (s *Store) branchKeys(id string) (task string, fork, index int, t, f string, ok bool) {
	task, fork, index, ok = driver.ParseBranchID(id)
	if !ok {
		return "", 0, 0, "", "", false
	}
	t, _, _, _ = s.keys(task)
	return task, fork, index, t, s.forkKey(task, fork), true
}

// ClaimBranch implements driver.Brancher: one script.
func (s *Store) ClaimBranch(ctx context.Context, id string, now time.Time, lease time.Duration) (*driver.BranchClaim, error) {
	task, _, index, t, f, ok := s.branchKeys(id)
	if !ok {
		return nil, driver.ErrNotFound
	}
	_, _, j, r := s.keys(task)
	res, err := s.exec(ctx, s.sc.claimBranch, s.withQueue(task, t, j, r, s.eventsKey(task), f, s.spillKey(task), s.msgKey(task)),
		[]string{strconv.Itoa(index), ms(now), strconv.FormatInt(lease.Milliseconds(), 10), id}, nil, nil)
	var arr []rueidis.RedisMessage
	if err == nil {
		arr, err = res.ToArray()
	}
	if err != nil {
		return nil, fmt.Errorf("redisstore: claim branch %s: %w", id, err)
	}
	code, _ := arr[0].ToString()
	at := func() time.Time {
		n, _ := arr[1].AsInt64()
		return time.UnixMilli(n).UTC()
	}
	switch code {
	case "NF":
		return nil, driver.ErrNotFound
	case "I":
		return &driver.BranchClaim{State: driver.BranchIdle}, nil
	case "L":
		return &driver.BranchClaim{State: driver.BranchLeased, Until: at()}, nil
	case "W":
		return &driver.BranchClaim{State: driver.BranchWaiting, Until: at()}, nil
	}
	c, err := decodeClaim(task, arr, now, lease)
	if err != nil {
		return nil, fmt.Errorf("redisstore: claim branch %s: %w", id, err)
	}
	return &driver.BranchClaim{State: driver.BranchClaimed, Claim: c}, nil
}

// RenewBranch implements driver.Brancher: one script, which holds the
// branch's message until the lease's new end when the store dispatches.
func (s *Store) RenewBranch(ctx context.Context, id string, gen int64, now time.Time, lease time.Duration) error {
	task, _, index, t, f, ok := s.branchKeys(id)
	if !ok {
		return driver.ErrNotFound
	}
	res, _ := s.exec(ctx, s.sc.renewBranch, s.withQueue(task, t, f),
		[]string{strconv.Itoa(index), strconv.FormatInt(gen, 10), ms(now), strconv.FormatInt(lease.Milliseconds(), 10), id}, nil, nil)
	return renewed(res, "renew branch", id)
}

// BranchCancelled implements driver.Brancher: one read-only script.
func (s *Store) BranchCancelled(ctx context.Context, id string, gen int64) (bool, error) {
	_, _, index, t, f, ok := s.branchKeys(id)
	if !ok {
		return true, nil
	}
	n, err := branchCancelledScript.lua.Exec(ctx, s.c, []string{t, f}, []string{strconv.Itoa(index), strconv.FormatInt(gen, 10)}).AsInt64()
	if err != nil {
		return false, fmt.Errorf("redisstore: branch %s cancelled: %w", id, err)
	}
	return n == 1, nil
}

// CommitBranch implements driver.Brancher: one script. When the store does
// not dispatch, a final outcome first moves the task's due entry to
// now+grace at the latest, in the same round trip, so that the sweeper
// watches the fork (and finds the task if this branch's join resumed it
// and its caller dies before it enqueues anything).
func (s *Store) CommitBranch(ctx context.Context, id string, gen int64, ch *driver.BranchChange) (*driver.BranchCommit, error) {
	task, fork, index, t, f, ok := s.branchKeys(id)
	if !ok {
		return nil, driver.ErrNotFound
	}
	op := "done"
	switch {
	case ch.Release:
		op = "release"
	case !ch.Retry.IsZero():
		op = "retry"
	case ch.Err != "":
		op = "fail"
	}
	var before []rueidis.Completed
	if op == "done" || op == "fail" {
		before = s.index(s.c.B().Zadd().Key(s.dueKey(task)).Xx().Lt().ScoreMember().ScoreMember(float64(ch.Now.Add(s.grace).UnixMilli()), task).Build())
	}
	retry := "0"
	if !ch.Retry.IsZero() {
		retry = ms(ch.Retry)
	}
	res, _, waitErr := s.run(ctx, s.sc.commitBranch, s.withQueue(task, t, f, s.eventsKey(task)),
		[]string{strconv.Itoa(index), strconv.FormatInt(gen, 10), ms(ch.Now), op, string(ch.Value), ch.Err, retry,
			strconv.Itoa(ch.Attempt), strconv.FormatInt(ch.Took.Milliseconds(), 10), id, strconv.Itoa(fork)}, before, nil, true)
	arr, err := res.ToArray()
	if err == nil && len(arr) == 0 {
		err = fmt.Errorf("an empty reply")
	}
	var code int64
	if err == nil {
		code, _ = arr[0].AsInt64()
		if code == 0 {
			err = waitErr
		}
	}
	if err != nil {
		return nil, fmt.Errorf("redisstore: commit branch %s: %w", id, err)
	}
	switch code {
	case -2:
		return nil, driver.ErrNotFound
	case -1:
		return nil, driver.ErrFenced
	}
	out := &driver.BranchCommit{}
	if next, err := arr[1].ToString(); err == nil {
		out.Next = []string{next}
	}
	resumed, _ := arr[2].AsInt64()
	out.Resumed = resumed == 1
	return out, nil
}

// Joined implements driver.Brancher: one read.
func (s *Store) Joined(ctx context.Context, taskID string, fork int) ([]driver.BranchOutcome, error) {
	if !driver.ValidID(taskID) {
		return nil, driver.ErrNotFound
	}
	h, err := s.c.Do(ctx, s.c.B().Hgetall().Key(s.forkKey(taskID, fork)).Build()).AsStrMap()
	if err != nil {
		return nil, fmt.Errorf("redisstore: joined %s: %w", taskID, err)
	}
	n, _ := strconv.Atoi(h["n"])
	done, _ := strconv.Atoi(h["nd"])
	if h["n"] == "" || done < n {
		return nil, nil
	}
	outs := make([]driver.BranchOutcome, n)
	for i := range outs {
		k := strconv.Itoa(i)
		if v, ok := h["v"+k]; ok {
			outs[i].Value = json.RawMessage(v)
		} else {
			outs[i].Err = h["e"+k]
		}
	}
	return outs, nil
}

// Stalled implements driver.Brancher: two reads (the task's open fork,
// then its branches).
func (s *Store) Stalled(ctx context.Context, taskID string, now time.Time) ([]string, bool, error) {
	if !driver.ValidID(taskID) {
		return nil, false, nil
	}
	t, _, _, _ := s.keys(taskID)
	v, err := s.c.Do(ctx, s.c.B().Hget().Key(t).Field("fk").Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("redisstore: stalled %s: %w", taskID, err)
	}
	fork, err := strconv.Atoi(v)
	if err != nil {
		return nil, false, fmt.Errorf("redisstore: stalled %s: fork %q", taskID, v)
	}
	h, err := s.c.Do(ctx, s.c.B().Hgetall().Key(s.forkKey(taskID, fork)).Build()).AsStrMap()
	if err != nil {
		return nil, false, fmt.Errorf("redisstore: stalled %s: %w", taskID, err)
	}
	if len(h) == 0 {
		return nil, false, nil
	}
	nx, _ := strconv.Atoi(h["nx"])
	msNow := now.UnixMilli()
	var ids []string
	for i := range nx {
		k := strconv.Itoa(i)
		_, done := h["v"+k]
		_, failed := h["e"+k]
		lease, _ := strconv.ParseInt(h["l"+k], 10, 64)
		wake, _ := strconv.ParseInt(h["w"+k], 10, 64)
		if !done && !failed && lease <= msNow && wake <= msNow {
			ids = append(ids, driver.BranchID(taskID, fork, i))
		}
	}
	return ids, true, nil
}

// forkRecord decodes the hash of the fork number for Inspect.
func forkRecord(number int, h map[string]string, now time.Time) inspect.Fork {
	atoi := func(k string) int { n, _ := strconv.Atoi(h[k]); return n }
	msTime := func(k string) time.Time {
		n, _ := strconv.ParseInt(h[k], 10, 64)
		if n == 0 {
			return time.Time{}
		}
		return time.UnixMilli(n).UTC()
	}
	f := inspect.Fork{Number: number, Name: h["name"], Branches: atoi("n"), Concurrency: atoi("c"), Dispatched: atoi("nx"), Finished: atoi("nd")}
	f.Branch = make([]inspect.Branch, f.Branches)
	for i := range f.Branch {
		k := strconv.Itoa(i)
		b := &f.Branch[i]
		b.Attempts, b.Lost = atoi("a"+k), atoi("k"+k)
		b.LeaseUntil, b.RetryAt, b.FinishedAt = msTime("l"+k), msTime("w"+k), msTime("f"+k)
		b.Took = time.Duration(atoi("t"+k)) * time.Millisecond
		b.Err, b.LastErr = h["e"+k], h["x"+k]
		v, done := h["v"+k]
		_, failed := h["e"+k]
		switch {
		case done:
			b.State, b.Value = "done", json.RawMessage(v)
		case failed:
			b.State = "failed"
		case i >= f.Dispatched:
			b.State = "pending"
		case b.LeaseUntil.After(now):
			b.State = "running"
		case b.RetryAt.After(now):
			b.State = "retrying"
		default:
			b.State = "queued"
		}
	}
	return f
}
