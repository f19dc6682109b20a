package redisstore

import (
	"crypto/sha1"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/mcptasks/mcptasks/pkg/queue/redisqueue"
	"github.com/redis/rueidis"
)

// script is a server-side script with its SHA1, so that it can be sent as
// EVALSHA inside a pipeline (see Store.exec).
type script struct {
	lua *rueidis.Lua
	sha string
	src string
	// retryable: the client may send the script again after a connection
	// failure (it is idempotent).
	retryable bool
}

// dispatchLua is the prelude of the scripts of a Store that enqueues
// through a Redis queue on the same standalone server (Options.Queue). Its
// scripts also keep the due index themselves, so that every transition is
// one round trip: the task's queue shard and its wake channel are the last two
// KEYS, the due index the one before (and, for Commit and Cancel, the
// owner's live set before it); the task id is the hash tag of KEYS[1].
//
//   - dispatch(at, quiet) / undispatch() enqueue the task at at (Unix ms;
//     quiet: without waking an idle consumer, for a worker's own commit) or
//     drop its message; hold(at) makes its message a receipt that runs out
//     at at, the end of the lease a worker just took or renewed (see
//     redisqueue.LuaHold): if the worker dies, the task is delivered again
//     then;
//   - handback(now, receipt) takes the next due message of the task's
//     queue shard for the consumer that handles the task's message (see
//     redisqueue.HandBack; now empty: none asked), or returns false;
//   - dispatchID(id, at), holdID(id, at) and undispatchID(id) do the same
//     for the queue id id of one of the task's branches (see
//     driver.BranchID), whose messages share the task's shard;
//   - due(at) sets the task's time in the due index, dueNew(at) does so
//     for a new task and refreshes the index's expiry, dueLT(at) sets it
//     unless it is earlier already, undue(live) removes it (and the task from the
//     live set live, if given); GRACE is Options.EnqueueGrace and INDEXTTL
//     Options.IndexTTL, in ms;
//   - wakeAt(now, at) schedules the task to run at at: it dispatches it
//     then and sets its due entry at at + GRACE, or, for a wake more than
//     HORIZON (Options.WakeHorizon, in ms; 0: none) after now, drops its
//     message and sets its due entry at at - HORIZON, when the sweeper
//     enqueues the wake.
func dispatchLua(queueTTL, grace, indexTTL, horizon time.Duration) string {
	n := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	return redisqueue.LuaEnqueue + redisqueue.LuaReceive + redisqueue.LuaHold + `
local DQ, DW, DUE = KEYS[#KEYS-1], KEYS[#KEYS], KEYS[#KEYS-2]
local DID = string.match(KEYS[1], '{([^{}]*)}$')
local GRACE, INDEXTTL, HORIZON = ` + n(grace) + `, ` + n(indexTTL) + `, ` + n(horizon) + `
local function dispatch(at, quiet) enqueue(DQ, DW, DID, at, '` + n(queueTTL) + `', quiet) end
local function holdq(at) hold(DQ, DW, DID, at, '` + n(queueTTL) + `') end
local function undispatch() redis.call('ZREM', DQ, DID) end
local function handback(now, receipt)
  if now == '' then return false end
  return receive(DQ, now, receipt)
end
local function due(at) redis.call('ZADD', DUE, at, DID) end
local function dueNew(at)
  due(at)
  redis.call('PEXPIRE', DUE, INDEXTTL)
end
local function dueLT(at) redis.call('ZADD', DUE, 'LT', at, DID) end
local function undue(live)
  redis.call('ZREM', DUE, DID)
  if live then redis.call('ZREM', live, DID) end
end
local function dispatchID(id, at) enqueue(DQ, DW, id, at, '` + n(queueTTL) + `', false) end
local function holdID(id, at) hold(DQ, DW, id, at, '` + n(queueTTL) + `') end
local function undispatchID(id) redis.call('ZREM', DQ, id) end
local function wakeAt(now, at)
  if HORIZON > 0 and at - now > HORIZON then
    undispatch()
    due(at - HORIZON)
  else
    dispatch(at, true)
    due(at + GRACE)
  end
end
`
}

// noDispatchLua is the prelude of a Store that leaves enqueues to its
// caller and writes the due index in the pipelines around its scripts.
const noDispatchLua = `
local GRACE = 0
local function dispatch(at, quiet) end
local function holdq(at) end
local function undispatch() end
local function handback(now, receipt) return false end
local function due(at) end
local function dueNew(at) end
local function dueLT(at) end
local function undue(live) end
local function dispatchID(id, at) end
local function holdID(id, at) end
local function undispatchID(id) end
local function wakeAt(now, at) end
`

// scripts are a Store's transition scripts, with its dispatch prelude;
// the create script also with indexing, which defines indexed(now) (see
// Store.indexingLua).
type scripts struct {
	create, update, cancel, claim, commit, renew script
	// deliver: events.go; the branch scripts: branches.go.
	deliver                                script
	claimBranch, renewBranch, commitBranch script
}

func newScripts(prelude, indexing string) scripts {
	return scripts{
		create:       newScript(prelude+indexing+createLua, false),
		update:       newScript(prelude+updateLua, true),
		cancel:       newScript(prelude+cancelLua, true),
		claim:        newScript(prelude+claimLua, false),
		commit:       newScript(prelude+commitLua, false),
		renew:        newScript(prelude+renewLua, true),
		deliver:      newScript(prelude+deliverLua, false),
		claimBranch:  newScript(prelude+claimBranchLua, false),
		renewBranch:  newScript(prelude+renewBranchLua, true),
		commitBranch: newScript(prelude+commitBranchLua, false),
	}
}

func newScript(src string, retryable bool) script {
	sum := sha1.Sum([]byte(src))
	l := rueidis.NewLuaScript(src)
	if retryable {
		l = rueidis.NewLuaScriptRetryable(src)
	}
	return script{lua: l, sha: hex.EncodeToString(sum[:]), src: src, retryable: retryable}
}

// Every transition of a task is one of these scripts. Update and Cancel
// are idempotent (a repeat changes nothing more), so rueidis may retry them
// on a connection error; Create, Claim and Commit are not, and never are.
// KEYS always name keys
// of one task, which share the hash tag {id}, so the scripts run on Redis
// Cluster. Raw JSON travels as opaque strings: the scripts never decode it.
//
// changed() announces, in the round trip of the transition itself, that the
// task's visible state may have changed: a PUBLISH on the task's channel
// (see Store.Watch), whose name is KEYS[1] (the task hash) plus ":ev", under
// the task's hash tag. Subscribers re-read the task; the message carries
// nothing.
//
// Task hash fields: owner tool args status msg created updated exp ttl poll
// result error any cancel lease gen wake att, and flags, "0" or "1": j (the
// journal has entries), r (responses were received), of (offers were put
// up), lim (created under a live-task limit). From the format of
// 2026-12-03 on (the field jn present, see journal.go), a field at its
// default is left out: "0" for the numbers and flags, exp - created for
// ttl. In a task written before (no jn), a missing flag (written before
// the flags existed) counts as "1": the scripts then do what they did
// without it (flag()). tp is the creating request's traceparent (when
// traced). History for operators (Store.Inspect), never read by a
// transition: cancelat (first tasks/cancel of a live task) and
// answered:<key> (when the input key was answered). No value is longer
// than 64 bytes (see spill.go): a longer owner, tool or args is cut into
// the chunks <name>#0, <name>#1, ... (the owner also marked in the field
// owner: ownerField), or beyond 1 KiB kept in :a (flag sp); a longer msg is in :m
// (flag ml), a failed task's error in :x. Tasks written before hold these
// values whole in the hash (result in :x). The journal is in the chunks
// J0, J1, ... (jn of them) while it is short, else in the list j: journal.go.

var luaTerminal = luaSpill + luaJournal + `
local function terminal(s) return s == 'completed' or s == 'failed' or s == 'cancelled' end
local function changed() redis.call('PUBLISH', KEYS[1] .. ':ev', '') end
-- flag(v, jn) is a flag's truth (see the task hash's fields) given its
-- value v and the field jn's.
local function flag(v, jn) return v == '1' or (not v and not jn) end
-- idOf(key) is the task id a key's hash tag holds.
local function idOf(key) return string.match(key, '{([^{}]*)}$') end
-- ended(key, m) drops the fields a task that just ended no longer needs
-- (and its status message, and its long one in the key m, when it has
-- one: nil otherwise): a finished task keeps only what tasks/get shows.
local function ended(key, m)
  redis.call('HDEL', key, 'msg', 'ml', 'lease', 'gen', 'wake', 'att', 'cancel', 'any', 'j', 'r', 'of', 'lim', 'aw', 'fk', 'pk')
  if m then redis.call('DEL', m) end
end
-- delivered(e) returns the events delivered to a task (name, payload
-- pairs) from its events hash e, and closes its waits that ended at or
-- before now (see events.go).
local function delivered(e, now)
  local out = {}
  local all = redis.call('HGETALL', e)
  for i = 1, #all, 2 do
    local v = all[i+1]
    local c = string.sub(v, 1, 1)
    if c == 'd' then
      out[#out+1] = all[i]
      out[#out+1] = string.sub(v, 3)
    elseif c == 'o' then
      local u = string.match(v, '^o%a(%d+):')
      if u and tonumber(u) <= now then redis.call('HSET', e, all[i], 'x') end
    end
  end
  return out
end
`

// createLua: KEYS t j r a [all, its earlier sorted set]; ARGV exp, now, nResp, spill,
// fieldPairs..., respPairs... (the fields hold the journal gathered before
// the task existed: journal.go; nothing goes to j, named for the position
// of all). The spill string (empty: none) goes to a (see spill.go). The
// new task is dispatched now, and indexed in the index of all tasks
// (KEYS[5], when the store indexes inline).
const createLua = `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local exp = ARGV[1]
local nr = tonumber(ARGV[3])
local nf = #ARGV - 4 - 2*nr
local fields = {}
for i = 5, 4 + nf do fields[#fields+1] = ARGV[i] end
redis.call('HSET', KEYS[1], unpack(fields))
redis.call('PEXPIREAT', KEYS[1], exp)
if ARGV[4] ~= '' then redis.call('SET', KEYS[4], ARGV[4], 'PXAT', exp) end
local base = 4 + nf
for i = 1, nr do redis.call('HSET', KEYS[3], ARGV[base+2*i-1], ARGV[base+2*i]) end
if nr > 0 then redis.call('PEXPIREAT', KEYS[3], exp) end
dispatch(ARGV[2])
dueNew(tonumber(ARGV[2]) + GRACE)
indexed(tonumber(ARGV[2]))
return 1
`

// reserveScript: KEYS live; ARGV now id exp max. Takes a place for id in
// an owner's live set (members are task ids scored by their expiry): drops
// expired members, then returns 2 if id holds a place already, the members
// if the set is full, else adds id, keeps the set expiring with its last
// member and returns 1. One key: Cluster-safe.
var reserveScript = newScript(`
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZSCORE', KEYS[1], ARGV[2]) then return 2 end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then return redis.call('ZRANGE', KEYS[1], 0, -1) end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[2])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], last[2])
return 1
`, true)

// getScript: KEYS t p o x a m j; ARGV owner (empty: no check). Returns
// {task hash}, {task hash, result or error} for a completed or failed task
// or, for a task in input_required, {task hash, outstanding input hash,
// outstanding offers hash, journal or false} (see parked); false when the
// task is missing or owned by someone else (the owner is compared here:
// nothing of a foreign task leaves Redis). The task hash comes without its journal's chunks (J<n>),
// and carries its spilled values as _a and _m (see spill.go). Read-only,
// so retryable.
var getScript = newScript(luaSpill+luaJournal+`
local h = redis.call('HGETALL', KEYS[1])
local f, chunks = {}, nil
for i = 1, #h, 2 do
  local k = h[i]
  if k == 'owner' or k == 'status' or k == 'sp' or k == 'ml' or k == 'jn' or k == 'pk' then
    f[k] = h[i+1]
  elseif string.sub(k, 1, 6) == 'owner#' then
    chunks = chunks or {}
    chunks[tonumber(string.sub(k, 7)) + 1] = h[i+1]
  end
end
-- An owner in chunks is compared whole from them; one in the spill key,
-- through its digest.
local mine
if chunks then mine = table.concat(chunks) == ARGV[1] else mine = owns(KEYS[1], f.owner, ARGV[1]) end
if not f.owner or (ARGV[1] ~= '' and not mine) then return false end
-- The journal stays in Redis: nothing of tasks/get shows it.
if f.jn then
  local kept = {}
  for i = 1, #h, 2 do
    if string.byte(h[i], 1) ~= 74 then kept[#kept+1] = h[i]; kept[#kept+1] = h[i+1] end
  end
  h = kept
end
withSpills(h, f, KEYS[5], KEYS[6])
local st = f.status
if st == 'completed' or st == 'failed' then return {h, redis.call('GET', KEYS[4])} end
if st ~= 'input_required' then return {h} end
local req, journal = parked(KEYS[1], KEYS[7], KEYS[2], f.pk)
return {h, req, redis.call('HGETALL', KEYS[3]), journal}
`, true)

// outstandingScript: KEYS t p o j; ARGV owner now. Returns false when the
// task is missing or foreign, else {waited-for input hash, offers hash,
// journal or false} (see parked):
// the requests Update would take an answer for (the first empty unless the
// task is parked before its deadline, as updateScript decides it; both
// empty for a terminal task). Read-only, so retryable.
var outstandingScript = newScript(luaTerminal+`
local h = redis.call('HMGET', KEYS[1], 'owner', 'status', 'wake', 'lease', 'pk')
if not owns(KEYS[1], h[1], ARGV[1]) then return false end
if terminal(h[2]) then return {{}, {}} end
local wake = tonumber(h[3] or '0')
local waiting = h[2] == 'input_required' and not (wake > 0 and wake <= tonumber(ARGV[2])) and (h[4] or '0') == '0'
local p, journal = {}, false
if waiting then p, journal = parked(KEYS[1], KEYS[4], KEYS[2], h[5]) end
return {p, redis.call('HGETALL', KEYS[3]), journal}
`, true)

// rescheduleScript: KEYS due; ARGV id fromMs toMs(” removes) ttlMs. A
// compare-and-set on one task's due time (one key: Cluster-safe).
var rescheduleScript = newScript(`
local sc = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not sc or tonumber(sc) ~= tonumber(ARGV[2]) then return 0 end
if ARGV[3] == '' then redis.call('ZREM', KEYS[1], ARGV[1]) else redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1]) end
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
`, false)

// updateScript: KEYS t p r o; ARGV owner now mode k1 v1 k2 v2 ...
// The keys a parked task waits for (p) take answers only while it is
// parked and before its deadline: responses to a task whose deadline
// passed (by the caller's clock, or because a worker claimed it) are
// refused, so a worker that replays after the deadline sees a frozen set.
// Offers (o) take answers in any live status: what a check of one found is
// journaled, so a late answer cannot change a replay. An answer to an
// offer resumes a task that sleeps with offers (parked with nothing in p)
// before its wake time; it never resumes a wait for input.
// mode "try" changes nothing when the responses would resume the task and
// returns 3 (the caller then moves the task's due entry and calls again);
// mode "apply" applies them in any case.
// Returns -1 not found, 0 nothing accepted, 1 accepted, 2 accepted and
// resumed, 3 (try) would resume.
var updateLua = luaTerminal + `
local h = redis.call('HMGET', KEYS[1], 'owner', 'status', 'any', 'exp', 'wake', 'lease', 'pk')
if not owns(KEYS[1], h[1], ARGV[1]) then return -1 end
if terminal(h[2]) then return 0 end
local wake = tonumber(h[5] or '0')
-- A parked task holds no lease; one that does was claimed after its
-- deadline, whatever this caller's clock says: its answers are frozen.
local parked = h[2] == 'input_required' and not (wake > 0 and wake <= tonumber(ARGV[2])) and (h[6] or '0') == '0'
-- The keys waited for: those of the field pk (the list pkl, the set pks
-- of those not answered yet, npk of them) and those of the hash p.
local pkl, pks, npk = {}, {}, 0
if parked then pkl = pkKeys(h[7]) end
for _, k in ipairs(pkl) do pks[k] = true; npk = npk + 1 end
local hp = 0
if parked then hp = redis.call('HLEN', KEYS[2]) + npk end
local function resumes(nb, no)
  return parked and ((nb > 0 and (h[3] == '1' or nb == hp)) or (hp == 0 and no > 0))
end
if ARGV[3] == 'try' then
  local nb, no = 0, 0
  for i = 4, #ARGV, 2 do
    if parked and (pks[ARGV[i]] or redis.call('HEXISTS', KEYS[2], ARGV[i]) == 1) then nb = nb + 1
    elseif redis.call('HEXISTS', KEYS[4], ARGV[i]) == 1 then no = no + 1 end
  end
  if resumes(nb, no) then return 3 end
end
local nb, no = 0, 0
local npk0 = npk
for i = 4, #ARGV, 2 do
  local waited = false
  if parked then
    if pks[ARGV[i]] then pks[ARGV[i]] = nil; npk = npk - 1; waited = true
    else waited = redis.call('HDEL', KEYS[2], ARGV[i]) == 1 end
  end
  if waited then
    redis.call('HSET', KEYS[3], ARGV[i], ARGV[i+1])
    redis.call('HSET', KEYS[1], 'answered:'..ARGV[i], ARGV[2])
    nb = nb + 1
  elseif redis.call('HDEL', KEYS[4], ARGV[i]) == 1 then
    redis.call('HSET', KEYS[3], ARGV[i], ARGV[i+1])
    redis.call('HSET', KEYS[1], 'answered:'..ARGV[i], ARGV[2])
    no = no + 1
  end
end
if nb + no == 0 then return 0 end
redis.call('PEXPIREAT', KEYS[3], h[4])
if resumes(nb, no) then
  redis.call('DEL', KEYS[2])
  if npk0 > 0 then redis.call('HDEL', KEYS[1], 'pk') end
  redis.call('HSET', KEYS[1], 'status', 'working', 'updated', ARGV[2], 'wake', '0', 'r', '1')
  dispatch(ARGV[2])
  due(tonumber(ARGV[2]) + GRACE)
  changed()
  return 2
end
redis.call('HSET', KEYS[1], 'updated', ARGV[2], 'r', '1')
if npk < npk0 then
  -- The keys of pk still waited for, in their order.
  local left = {}
  for _, k in ipairs(pkl) do if pks[k] then left[#left+1] = k .. '\n' end end
  if npk == 0 then redis.call('HDEL', KEYS[1], 'pk') else redis.call('HSET', KEYS[1], 'pk', table.concat(left)) end
end
if h[2] == 'input_required' and npk == 0 and redis.call('EXISTS', KEYS[2], KEYS[4]) == 0 then
  -- Nothing left to ask (the last offer of a task whose sleep is over was
  -- answered): it is due anyway, and working.
  redis.call('HSET', KEYS[1], 'status', 'working')
end
changed()
return 1
`

// cancelScript: KEYS t p o m; ARGV owner now. Returns {status afterwards,
// 1 if this call ended the task else 0}, or false when not found.
var cancelLua = luaTerminal + `
local h = redis.call('HMGET', KEYS[1], 'owner', 'status', 'lease', 'lim', 'ml', 'jn')
if not owns(KEYS[1], h[1], ARGV[1]) then return false end
if terminal(h[2]) then return {h[2], 0} end
redis.call('HSETNX', KEYS[1], 'cancelat', ARGV[2])
if tonumber(h[3] or '0') > tonumber(ARGV[2]) then
  redis.call('HSET', KEYS[1], 'cancel', '1')
  return {h[2], 0}
end
redis.call('DEL', KEYS[2], KEYS[3])
ended(KEYS[1], h[5] == '1' and KEYS[4] or nil)
redis.call('HSET', KEYS[1], 'status', 'cancelled', 'updated', ARGV[2])
undispatch()
if flag(h[4], h[6]) then undue(KEYS[#KEYS-3]) else undue() end
changed()
return {'cancelled', 1}
`

// claimFields are the task hash fields a claim (code C) returns, in this
// order (an empty string for a missing one): what the worker reads of a
// running task.
var claimFields = []string{"owner", "tool", "args", "status", "msg", "created", "updated", "ttl", "poll", "cancel", "lease", "wake", "tp", "exp"}

// claimScript: KEYS t p j r o e a m; ARGV now leaseMs. A task claimed out of
// input_required (its deadline passed) is working from the claim on.
// Returns {code, gen, att, wake, record, journal, responses, lost, events} where
// code is NF (not found), T (terminal), X (made terminal here: cancellation
// was requested), L (leased), P (parked for input), W (sleeping until wake)
// or C (claimed); record is the task hash for T and X, and the values of
// claimFields for C; lost is the end of the lease a claim C took over (its
// holder was lost), else 0; events the delivered events (see delivered).
// A claim C ends the task's wait for an event (aw). L holds the task's message until the live
// lease's end. C leaves the message as the delivery left it: a receipt
// that runs out with the queue's visibility timeout, which the deployment
// sets to the lease (bundle: MCPTASKS_QUEUE_VISIBILITY defaults to
// MCPTASKS_LEASE), so that a worker that dies before its first renewal is
// replaced then too (a delivery that comes a few milliseconds before the
// lease's end finds it live, and L holds the message until it ends).
// Moving it here would cost every step two commands for a correction of
// those milliseconds.
var claimLua = luaTerminal + `
local CLAIMFIELDS = {'` + strings.Join(claimFields, "', '") + `'}` + `
local now = tonumber(ARGV[1])
local all = redis.call('HGETALL', KEYS[1])
if #all == 0 then
  undue()
  return {'NF', 0, 0, 0}
end
local f = {}
for i = 1, #all, 2 do f[all[i]] = all[i+1] end
local wake = tonumber(f.wake or '0')
if terminal(f.status) then return {'T', 0, 0, 0, withSpills(all, f, KEYS[7], KEYS[8])} end
local lease = tonumber(f.lease or '0')
if lease > now then
  -- Held by a live worker: this delivery comes back when the lease ends.
  holdq(f.lease)
  return {'L', 0, 0, lease}
end
if f.cancel == '1' then
  redis.call('DEL', KEYS[2], KEYS[5])
  ended(KEYS[1], f.ml == '1' and KEYS[8] or nil)
  redis.call('HSET', KEYS[1], 'status', 'cancelled', 'updated', ARGV[1])
  undispatch()
  changed()
  f.ml = nil
  return {'X', 0, 0, 0, withSpills(redis.call('HGETALL', KEYS[1]), f, KEYS[7], KEYS[8])}
end
if f.status == 'input_required' and (wake == 0 or wake > now) then return {'P', 0, 0, wake} end
if f.status == 'working' and wake > now then return {'W', 0, 0, wake} end
local gen = tonumber(f.gen or '0') + 1
local att = tonumber(f.att or '0') + 1
local ends = now + tonumber(ARGV[2])
if f.status == 'input_required' then
  -- Past its deadline (or its sleep's end): the run is on, and the input
  -- it waited for is closed (its answers are frozen; offers stay).
  redis.call('DEL', KEYS[2])
  if f.pk then redis.call('HDEL', KEYS[1], 'pk') end
  redis.call('HSET', KEYS[1], 'gen', gen, 'att', att, 'lease', ends, 'status', 'working')
  changed()
else
  redis.call('HSET', KEYS[1], 'gen', gen, 'att', att, 'lease', ends)
end
if f.aw then redis.call('HDEL', KEYS[1], 'aw') end
-- The journal, responses and events unless the task is known to have
-- none.
local journal, responses, events = {}, {}, {}
if f.jn then journal = journalOf(f) elseif f.j ~= '0' then journal = redis.call('LRANGE', KEYS[3], 0, -1) end
if flag(f.r, f.jn) then responses = redis.call('HGETALL', KEYS[4]) end
if f.ev == '1' then events = delivered(KEYS[6], now) end
-- The record as read (the fields the worker reads): the caller sets the
-- lease and status it now has.
unspill(f, KEYS[7], KEYS[8])
local rec = {}
for i, k in ipairs(CLAIMFIELDS) do rec[i] = f[k] or '' end
return {'C', gen, att, wake, rec, journal, responses, lease, events}
`

// renewScript: KEYS t; ARGV gen now leaseMs. Renews the lease of the claim
// gen if it still holds the task (see driver.LeaseRenewer) and holds the
// task's message until the new end. Returns the new end (Unix ms), -1
// fenced or -2 gone. Idempotent for a given now, so retryable.
var renewLua = luaTerminal + `
local h = redis.call('HMGET', KEYS[1], 'gen', 'lease', 'status')
if not h[3] then return -2 end
if h[1] ~= ARGV[1] or (h[2] or '0') == '0' or terminal(h[3]) then return -1 end
local ends = tonumber(ARGV[2]) + tonumber(ARGV[3])
redis.call('HSET', KEYS[1], 'lease', ends)
holdq(ends)
return ends
`

// commitScript: KEYS t p j r o x e f m; ARGV gen now op hasMsg msg attempts
// payload wake any nPark nAppend nOffer nWithdraw nWatch hbNow hbReceipt
// await nOpen fork, then nAppend entries, nPark park pairs, nOffer offer
// pairs, nWithdraw withdrawn keys, nWatch watched keys and nOpen opened
// waits (name, encoded wait: see events.go).
// op: keep | release | sleep | await | park | complete | fail | cancel.
// Waits are opened before the op applies (a signal delivered before its
// wait stays delivered). await releases the task to wait for the event
// await (field aw) until wake, or to run now (woke 1) when it was
// delivered. fork ("number branches concurrency", or empty) starts a
// parallel step in f (see branches.go) with await its name: its join is
// an open event of kind j, its first branches are dispatched, and the
// task waits without a message (the join or the sweeper brings it back).
// Returns {code, att, status, woke, handback}: code 0 ok, -1 fenced, -2
// gone (then without handback), handback what handback(hbNow, hbReceipt)
// returned once the task's message is settled (false for keep). A
// change that keeps the task alive while cancellation was requested
// cancels it instead. A terminal change sets the status message it
// carries, or clears it: a finished task never shows a message of its
// running days. Offers are put up and withdrawn before the op applies. A
// sleep is released to run now (woke 1) if a watched offer was answered
// meanwhile (its response is there), parked in input_required with no
// blocking keys until wake if offers are outstanding, and released until
// wake otherwise.
var commitLua = luaTerminal + `
local h = redis.call('HMGET', KEYS[1], 'gen', 'status', 'exp', 'att', 'cancel', 'of', 'lim', 'ml', 'j', 'jn')
if not h[2] then return {-2, 0, '', 0} end
if ARGV[1] == '0' or h[1] ~= ARGV[1] or terminal(h[2]) then return {-1, 0, h[2] or '', 0} end
local now, op, exp, wake = ARGV[2], ARGV[3], h[3], ARGV[8]
local att = tonumber(h[4] or '0')
local np, n, nof, nw, nwatch = tonumber(ARGV[10]), tonumber(ARGV[11]), tonumber(ARGV[12]), tonumber(ARGV[13]), tonumber(ARGV[14])
local awaited, nopen, fork = ARGV[17], tonumber(ARGV[18]), ARGV[19]
local i = 19
-- Every field this commit sets, written by one HSET at the end ('j' and
-- 'of' record that the task has a journal and has made offers, 'ev' that
-- it has events), the journal's new chunks among them.
local set, del = {'updated', now}, {}
if n > 0 then
  journalAppend(set, KEYS[1], KEYS[3], h[9], h[10], table.concat({unpack(ARGV, i+1, i+n)}, '\n') .. '\n', exp)
end
i = i + n
local park = i
i = i + 2*np
for k = 1, nof do redis.call('HSET', KEYS[5], ARGV[i+2*k-1], ARGV[i+2*k]) end
if nof > 0 then redis.call('PEXPIREAT', KEYS[5], exp) end
i = i + 2*nof
for k = 1, nw do redis.call('HDEL', KEYS[5], ARGV[i+k]) end
local watch = i + nw
local opened = watch + nwatch
for k = 1, nopen do
  local name, v = ARGV[opened+2*k-1], ARGV[opened+2*k]
  local cur = redis.call('HGET', KEYS[7], name)
  -- A signal delivered before its wait opened stays delivered.
  if not (cur and string.sub(cur, 1, 2) == 'ds' and string.sub(v, 1, 2) == 'os') then redis.call('HSET', KEYS[7], name, v) end
end
if nopen > 0 then redis.call('PEXPIREAT', KEYS[7], exp) end
if nof > 0 then set[#set+1] = 'of'; set[#set+1] = '1' end
if nopen > 0 or fork ~= '' then set[#set+1] = 'ev'; set[#set+1] = '1' end
if ARGV[6] == '0' then att = 0; del[#del+1] = 'att'
elseif ARGV[6] ~= '' then att = tonumber(ARGV[6]); set[#set+1] = 'att'; set[#set+1] = ARGV[6] end
local cancelled = false
if h[5] == '1' and (op == 'keep' or op == 'release' or op == 'sleep' or op == 'await' or op == 'park') then op = 'cancel'; cancelled = true end
-- The status message this commit sets, written by putMsg() into set
-- before the HSET (a long one to m: see spill.go).
local msgv = nil
if ARGV[4] == '1' and not cancelled then msgv = ARGV[5] end
local function putMsg()
  if not msgv then return end
  if #msgv > MAXINLINE then
    redis.call('SET', KEYS[9], msgv, 'PXAT', exp)
    redis.call('HDEL', KEYS[1], 'msg')
    set[#set+1] = 'ml'; set[#set+1] = '1'
  else
    set[#set+1] = 'msg'; set[#set+1] = msgv
    if h[8] == '1' then
      redis.call('HDEL', KEYS[1], 'ml')
      redis.call('DEL', KEYS[9])
    end
  end
end
-- setFields() writes set, and deletes the fields del (a field at its
-- default value is left out: see Create).
local function setFields()
  redis.call('HSET', KEYS[1], unpack(set))
  if #del > 0 then redis.call('HDEL', KEYS[1], unpack(del)) end
end
if op == 'keep' then
  putMsg()
  setFields()
  if ARGV[4] == '1' or nof + nw > 0 then changed() end
  return {0, att, h[2], 0, false}
end
local woke = 0
if op == 'sleep' then
  op = 'release'
  for k = 1, nwatch do
    if redis.call('HEXISTS', KEYS[4], ARGV[watch+k]) == 1 then woke = 1; wake = '0'; break end
  end
  if woke == 0 and redis.call('EXISTS', KEYS[5]) == 1 then op = 'park'; np = 0 end
end
local forked = false
if op == 'await' then
  op = 'release'
  if fork ~= '' then
    local no, nb, c = string.match(fork, '^(%d+) (%d+) (%d+)$')
    redis.call('HSET', KEYS[8], 'n', nb, 'c', c, 'nx', c, 'nd', 0, 'name', awaited)
    redis.call('PEXPIREAT', KEYS[8], exp)
    redis.call('HSET', KEYS[7], awaited, 'oj' .. exp .. '::')
    redis.call('PEXPIREAT', KEYS[7], exp)
    for b = 0, tonumber(c) - 1 do dispatchID(idOf(KEYS[1]) .. '.' .. no .. '.' .. b, now) end
    set[#set+1] = 'fk'; set[#set+1] = no
    forked = true
  end
  local v = redis.call('HGET', KEYS[7], awaited)
  if v and string.sub(v, 1, 1) == 'd' then
    woke = 1; wake = '0'
  else
    set[#set+1] = 'aw'; set[#set+1] = awaited
  end
end
-- A task under a lease has no blocking input (KEYS[2]): the claim that
-- took it out of input_required deleted it.
local status
if op == 'release' then
  status = 'working'
  if wake == '0' then
    dispatch(now, true)
    dueLT(tonumber(now) + GRACE)
  elseif forked then
    undispatch()
    due(tonumber(now) + GRACE)
  else
    wakeAt(tonumber(now), tonumber(wake))
  end
elseif op == 'park' then
  status = 'input_required'
  -- Requests all kept by reference: their keys in the field pk, when
  -- they fit (see pkKeys); else the hash p.
  local keys, inHash = {}, np > 0
  for k = 1, np do
    local key = ARGV[park+2*k-1]
    if ARGV[park+2*k] ~= '' or string.find(key, '\n', 1, true) then inHash = false end
    keys[k] = key .. '\n'
  end
  local pk = table.concat(keys)
  if inHash and #pk <= MAXINLINE then
    set[#set+1] = 'pk'; set[#set+1] = pk
  else
    for k = 1, np do redis.call('HSET', KEYS[2], ARGV[park+2*k-1], ARGV[park+2*k]) end
    if np > 0 then redis.call('PEXPIREAT', KEYS[2], exp) end
  end
  set[#set+1] = 'any'; set[#set+1] = ARGV[9]
  if wake == '0' then
    -- Nothing to do until an answer resumes it (which indexes it again)
    -- or it expires (its keys by themselves): out of the due index.
    undispatch()
    undue()
  else
    wakeAt(tonumber(now), tonumber(wake))
  end
else
  if flag(h[6], h[10]) or nof > 0 then redis.call('DEL', KEYS[5]) end
  if op == 'complete' then status = 'completed'; redis.call('SET', KEYS[6], ARGV[7], 'PXAT', exp)
  elseif op == 'fail' then status = 'failed'; redis.call('SET', KEYS[6], ARGV[7], 'PXAT', exp)
  else status = 'cancelled' end
  undispatch()
  if flag(h[7], h[10]) then undue(KEYS[#KEYS-3]) else undue() end
  -- Ended: its running fields (and a status message this commit does
  -- not set) go.
  ended(KEYS[1], h[8] == '1' and KEYS[9] or nil)
  set[#set+1] = 'status'; set[#set+1] = status
  putMsg()
  redis.call('HSET', KEYS[1], unpack(set))
  changed()
  return {0, att, status, woke, handback(ARGV[15], ARGV[16])}
end
set[#set+1] = 'status'; set[#set+1] = status
del[#del+1] = 'lease'
if wake == '0' then del[#del+1] = 'wake' else set[#set+1] = 'wake'; set[#set+1] = wake end
putMsg()
setFields()
changed()
return {0, att, status, woke, handback(ARGV[15], ARGV[16])}
`
