package pgschema

// tablesV1 are the tables of version 1.
//
// tasks holds one row per task: the record tasks/get shows, the worker's
// claim state (gen, attempts, lease_until, wake_at, cancel_requested), the
// input a parked task waits for (waiting), its outstanding offers (offers),
// the responses received (responses) and when each was answered
// (answered_at), all as JSON objects whose values are JSON texts held as
// strings (so that no JSON a client or a tool wrote is re-encoded), and
// due_at, the due index: when the sweeper must look at the task next (NULL:
// never; only a hint, re-derived from the record). Raw JSON (args, result,
// error, journal entries) is text, stored as written. Times are
// timestamptz, to the millisecond.
//
// journal holds the step journal, one row per entry in order (seq from 0).
//
// queue is the Redis queue's sorted set in rows: a task id (the dedup key)
// due at due_at; a received message holds a receipt and due_at is when its
// visibility timeout ends.
//
// locks holds named, expiring locks (the deployment's sweep turn).
const tablesV1 = `
CREATE TABLE {S}.tasks (
  id                  text PRIMARY KEY,
  owner               text NOT NULL,
  tool                text NOT NULL,
  args                text NOT NULL,
  status              text NOT NULL,
  status_message      text NOT NULL DEFAULT '',
  created_at          timestamptz NOT NULL,
  updated_at          timestamptz NOT NULL,
  expires_at          timestamptz NOT NULL,
  ttl_ms              bigint NOT NULL,
  poll_ms             bigint NOT NULL,
  result              text,
  error               text,
  traceparent         text NOT NULL DEFAULT '',
  gen                 bigint NOT NULL DEFAULT 0,
  attempts            integer NOT NULL DEFAULT 0,
  lease_until         timestamptz,
  wake_at             timestamptz,
  park_any            boolean NOT NULL DEFAULT false,
  cancel_requested    boolean NOT NULL DEFAULT false,
  cancel_requested_at timestamptz,
  waiting             jsonb,
  offers              jsonb,
  responses           jsonb,
  answered_at         jsonb,
  journal_len         integer NOT NULL DEFAULT 0,
  limited             boolean NOT NULL DEFAULT false,
  listed              boolean NOT NULL DEFAULT false,
  due_at              timestamptz
);
CREATE INDEX tasks_due ON {S}.tasks (due_at) WHERE due_at IS NOT NULL;
CREATE INDEX tasks_expires ON {S}.tasks (expires_at);
CREATE INDEX tasks_live ON {S}.tasks (owner, expires_at) WHERE limited AND status IN ('working', 'input_required');
CREATE INDEX tasks_listed ON {S}.tasks (owner, expires_at DESC, id DESC) WHERE listed;

CREATE TABLE {S}.journal (
  task_id text NOT NULL REFERENCES {S}.tasks (id) ON DELETE CASCADE,
  seq     integer NOT NULL,
  entry   text NOT NULL,
  PRIMARY KEY (task_id, seq)
);

CREATE TABLE {S}.queue (
  task_id text PRIMARY KEY,
  due_at  timestamptz NOT NULL,
  receipt bigint
);
CREATE INDEX queue_due ON {S}.queue (due_at);

CREATE TABLE {S}.locks (
  name   text PRIMARY KEY,
  holder text NOT NULL,
  until  timestamptz NOT NULL
);
`

// functionsV1 are the functions of version 1. Every transition of a task
// is one call: it locks the task's row (SELECT ... FOR UPDATE), so the
// transitions of one task are serialised as Redis serialises scripts, and
// it runs in the call's own transaction. They port the Redis store's
// scripts (pkg/tasks/redisstore/scripts.go) rule for rule; the comments
// there are the reference. A task past its expiry is gone to every one of
// them (expires_at <= now(), on the database's clock), whether or not the
// sweeper deleted its row yet.
//
// p_dispatch asks a transition to keep the task's message in the queue
// table itself (driver.Dispatcher): enqueue() / dequeue(). A transition
// that may change what a client sees of a task notifies "<schema>.tasks"
// with the task's id, delivered when it commits (Store.Watch).
//
// ts and ms convert between timestamptz and Unix milliseconds: the stores
// pass and read times as milliseconds, so that no session setting
// (DateStyle, TimeZone) changes what they read.
const functionsV1 = `
CREATE FUNCTION {S}.ts(p_ms bigint) RETURNS timestamptz LANGUAGE sql STABLE PARALLEL SAFE AS
$$ SELECT 'epoch'::timestamptz + p_ms * interval '1 millisecond' $$;

CREATE FUNCTION {S}.ms(p_ts timestamptz) RETURNS bigint LANGUAGE sql STABLE PARALLEL SAFE AS
$$ SELECT (extract(epoch FROM p_ts) * 1000)::bigint $$;

-- enqueue: the queue's Enqueue (see pkg/queue/pgqueue): one message per
-- task id, due at the earlier of its times; a message being handled (it
-- holds a receipt) takes the new time, and Ack, seeing no receipt, keeps
-- it. Unless quiet it wakes idle consumers of every process.
CREATE FUNCTION {S}.enqueue(p_id text, p_at timestamptz, p_quiet boolean) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO {S}.queue AS q (task_id, due_at) VALUES (p_id, p_at)
  ON CONFLICT (task_id) DO UPDATE
    SET due_at = CASE WHEN q.receipt IS NULL THEN least(q.due_at, EXCLUDED.due_at) ELSE EXCLUDED.due_at END,
        receipt = NULL;
  IF NOT p_quiet THEN
    PERFORM pg_notify('{N}.queue', {S}.ms(p_at)::text);
  END IF;
END $$;

CREATE FUNCTION {S}.dequeue(p_id text) RETURNS void LANGUAGE sql AS
$$ DELETE FROM {S}.queue WHERE task_id = p_id $$;

-- receive: takes the earliest message due at p_now, hiding it until
-- p_now + p_vis_ms under the receipt p_receipt; returns its id (NULL:
-- none due) and the earliest due time left in the queue (NULL: empty).
-- Messages another consumer is taking are skipped, not waited for.
CREATE FUNCTION {S}.receive(p_now timestamptz, p_vis_ms bigint, p_receipt bigint, OUT o_id text, OUT o_next timestamptz)
LANGUAGE plpgsql AS $$
BEGIN
  SELECT task_id INTO o_id FROM {S}.queue WHERE due_at <= p_now ORDER BY due_at LIMIT 1 FOR UPDATE SKIP LOCKED;
  IF o_id IS NOT NULL THEN
    UPDATE {S}.queue SET due_at = p_now + p_vis_ms * interval '1 millisecond', receipt = p_receipt WHERE task_id = o_id;
  END IF;
  SELECT min(due_at) INTO o_next FROM {S}.queue;
END $$;

-- create_task: 1 created, 0 the id exists, -1 the owner has p_max_live
-- live tasks created under a limit (concurrent creations of one owner are
-- serialised by a transaction-scoped advisory lock).
CREATE FUNCTION {S}.create_task(p_id text, p_owner text, p_tool text, p_args text, p_now timestamptz,
  p_ttl_ms bigint, p_poll_ms bigint, p_traceparent text, p_listed boolean, p_max_live bigint,
  p_journal text[], p_responses jsonb, p_grace_ms bigint, p_dispatch boolean) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  v_n integer := coalesce(cardinality(p_journal), 0);
BEGIN
  IF p_max_live > 0 THEN
    PERFORM pg_advisory_xact_lock(hashtextextended('{N}.live:' || p_owner, 0));
    IF (SELECT count(*) FROM {S}.tasks WHERE owner = p_owner AND limited
        AND status IN ('working', 'input_required') AND expires_at > p_now) >= p_max_live THEN
      RETURN -1;
    END IF;
  END IF;
  DELETE FROM {S}.tasks WHERE id = p_id AND expires_at <= now();
  INSERT INTO {S}.tasks (id, owner, tool, args, status, created_at, updated_at, expires_at, ttl_ms, poll_ms,
    traceparent, responses, journal_len, limited, listed, due_at)
  VALUES (p_id, p_owner, p_tool, p_args, 'working', p_now, p_now, p_now + p_ttl_ms * interval '1 millisecond',
    p_ttl_ms, p_poll_ms, p_traceparent, p_responses, v_n, p_max_live > 0, p_listed,
    p_now + p_grace_ms * interval '1 millisecond')
  ON CONFLICT (id) DO NOTHING;
  IF NOT FOUND THEN
    RETURN 0;
  END IF;
  IF v_n > 0 THEN
    INSERT INTO {S}.journal (task_id, seq, entry)
    SELECT p_id, u.o - 1, u.e FROM unnest(p_journal) WITH ORDINALITY AS u (e, o);
  END IF;
  IF p_dispatch THEN
    PERFORM {S}.enqueue(p_id, p_now, false);
  END IF;
  RETURN 1;
END $$;

-- update_task: -1 not found (or another owner's), 0 nothing accepted, 1
-- accepted, 2 accepted and resumed. The keys a parked task waits for take
-- answers only while it is parked, before its deadline and unclaimed;
-- offers in any live status. An answer to an offer resumes a task that
-- sleeps with offers (parked with nothing in waiting), never a wait for
-- input.
CREATE FUNCTION {S}.update_task(p_owner text, p_id text, p_now timestamptz, p_keys text[], p_values text[],
  p_grace_ms bigint, p_dispatch boolean) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  t {S}.tasks%ROWTYPE;
  v_parked boolean;
  v_hp integer := 0;
  v_nb integer := 0;
  v_no integer := 0;
  v_waiting jsonb;
  v_offers jsonb;
  v_responses jsonb;
  v_answered jsonb;
  v_ms bigint := {S}.ms(p_now);
  k text;
BEGIN
  IF p_owner = '' THEN
    RETURN -1;
  END IF;
  SELECT * INTO t FROM {S}.tasks WHERE id = p_id AND expires_at > now() FOR UPDATE;
  IF NOT FOUND OR t.owner <> p_owner THEN
    RETURN -1;
  END IF;
  IF t.status IN ('completed', 'failed', 'cancelled') THEN
    RETURN 0;
  END IF;
  -- A parked task holds no lease; one that does was claimed after its
  -- deadline, whatever this caller's clock says: its answers are frozen.
  v_parked := t.status = 'input_required' AND NOT coalesce(t.wake_at <= p_now, false) AND t.lease_until IS NULL;
  v_waiting := coalesce(t.waiting, '{}');
  v_offers := coalesce(t.offers, '{}');
  v_responses := coalesce(t.responses, '{}');
  v_answered := coalesce(t.answered_at, '{}');
  IF v_parked THEN
    SELECT count(*) INTO v_hp FROM jsonb_object_keys(v_waiting);
  END IF;
  FOR i IN 1 .. coalesce(cardinality(p_keys), 0) LOOP
    k := p_keys[i];
    IF v_parked AND v_waiting ? k THEN
      v_waiting := v_waiting - k;
      v_nb := v_nb + 1;
    ELSIF v_offers ? k THEN
      v_offers := v_offers - k;
      v_no := v_no + 1;
    ELSE
      CONTINUE;
    END IF;
    v_responses := v_responses || jsonb_build_object(k, p_values[i]);
    v_answered := v_answered || jsonb_build_object(k, v_ms);
  END LOOP;
  IF v_nb + v_no = 0 THEN
    RETURN 0;
  END IF;
  IF v_parked AND ((v_nb > 0 AND (t.park_any OR v_nb = v_hp)) OR (v_hp = 0 AND v_no > 0)) THEN
    UPDATE {S}.tasks SET waiting = NULL, offers = nullif(v_offers, '{}'), responses = v_responses,
      answered_at = v_answered, status = 'working', updated_at = p_now, wake_at = NULL,
      due_at = p_now + p_grace_ms * interval '1 millisecond'
    WHERE id = p_id;
    IF p_dispatch THEN
      PERFORM {S}.enqueue(p_id, p_now, false);
    END IF;
    PERFORM pg_notify('{N}.tasks', p_id);
    RETURN 2;
  END IF;
  -- Nothing left to ask (the last offer of a task whose sleep is over was
  -- answered): it is due anyway, and working.
  UPDATE {S}.tasks SET waiting = nullif(v_waiting, '{}'), offers = nullif(v_offers, '{}'),
    responses = v_responses, answered_at = v_answered, updated_at = p_now,
    status = CASE WHEN t.status = 'input_required' AND v_waiting = '{}' AND v_offers = '{}' THEN 'working' ELSE t.status END
  WHERE id = p_id;
  PERFORM pg_notify('{N}.tasks', p_id);
  RETURN 1;
END $$;

-- cancel_task: the status afterwards and whether this call ended the
-- task; no row when not found.
CREATE FUNCTION {S}.cancel_task(p_owner text, p_id text, p_now timestamptz, p_dispatch boolean,
  OUT o_status text, OUT o_ended boolean) RETURNS SETOF record LANGUAGE plpgsql AS $$
DECLARE
  t {S}.tasks%ROWTYPE;
BEGIN
  IF p_owner = '' THEN
    RETURN;
  END IF;
  SELECT * INTO t FROM {S}.tasks WHERE id = p_id AND expires_at > now() FOR UPDATE;
  IF NOT FOUND OR t.owner <> p_owner THEN
    RETURN;
  END IF;
  o_ended := false;
  IF t.status IN ('completed', 'failed', 'cancelled') THEN
    o_status := t.status;
    RETURN NEXT;
    RETURN;
  END IF;
  IF t.lease_until > p_now THEN
    UPDATE {S}.tasks SET cancel_requested = true, cancel_requested_at = coalesce(cancel_requested_at, p_now)
    WHERE id = p_id;
    o_status := t.status;
    RETURN NEXT;
    RETURN;
  END IF;
  UPDATE {S}.tasks SET status = 'cancelled', updated_at = p_now, cancel_requested_at = coalesce(cancel_requested_at, p_now),
    status_message = '', ` + endedColumns + `
  WHERE id = p_id;
  IF p_dispatch THEN
    PERFORM {S}.dequeue(p_id);
  END IF;
  PERFORM pg_notify('{N}.tasks', p_id);
  o_status := 'cancelled';
  o_ended := true;
  RETURN NEXT;
END $$;

-- claim_task: o_code NF (not found), T (terminal), X (made terminal here:
-- cancellation was requested), L (leased; o_wake is the lease's end), P
-- (parked for input), W (sleeping until o_wake) or C (claimed). For T, X
-- and C the task's columns follow (for C as they are under the new lease),
-- and for C its journal and responses, and o_lost: the end of the lease C
-- took over (its holder was lost: a lease that a commit released, parked
-- or ended is NULL), else NULL. A task claimed out of input_required (its
-- deadline passed) is working from the claim on.
CREATE FUNCTION {S}.claim_task(p_id text, p_now timestamptz, p_lease_ms bigint, p_dispatch boolean,
  OUT o_code text, OUT o_gen bigint, OUT o_attempts integer, OUT o_wake timestamptz,
  OUT o_owner text, OUT o_tool text, OUT o_args text, OUT o_status text, OUT o_status_message text,
  OUT o_created_at timestamptz, OUT o_updated_at timestamptz, OUT o_ttl_ms bigint, OUT o_poll_ms bigint,
  OUT o_result text, OUT o_error text, OUT o_cancel_requested boolean, OUT o_lease_until timestamptz,
  OUT o_traceparent text, OUT o_journal text[], OUT o_responses jsonb, OUT o_lost timestamptz) LANGUAGE plpgsql AS $$
DECLARE
  t {S}.tasks%ROWTYPE;
  v_lease timestamptz := p_now + p_lease_ms * interval '1 millisecond';
BEGIN
  SELECT * INTO t FROM {S}.tasks WHERE id = p_id AND expires_at > now() FOR UPDATE;
  IF NOT FOUND THEN
    o_code := 'NF';
    RETURN;
  END IF;
  o_wake := t.wake_at;
  IF t.status IN ('completed', 'failed', 'cancelled') THEN
    o_code := 'T';
  ELSIF t.lease_until > p_now THEN
    -- Held by a live worker: this delivery comes back when the lease ends.
    IF p_dispatch THEN
      PERFORM {S}.enqueue(p_id, t.lease_until, false);
    END IF;
    o_code := 'L';
    o_wake := t.lease_until;
    RETURN;
  ELSIF t.cancel_requested THEN
    UPDATE {S}.tasks SET status = 'cancelled', updated_at = p_now,
      status_message = '', ` + endedColumns + `
    WHERE id = p_id RETURNING * INTO t;
    IF p_dispatch THEN
      PERFORM {S}.dequeue(p_id);
    END IF;
    PERFORM pg_notify('{N}.tasks', p_id);
    o_code := 'X';
  ELSIF t.status = 'input_required' AND (t.wake_at IS NULL OR t.wake_at > p_now) THEN
    o_code := 'P';
    RETURN;
  ELSIF t.status = 'working' AND t.wake_at > p_now THEN
    o_code := 'W';
    RETURN;
  ELSE
    IF t.status = 'input_required' THEN
      -- Past its deadline (or its sleep's end): the run is on, and the
      -- input it waited for is closed (its answers are frozen; offers stay).
      PERFORM pg_notify('{N}.tasks', p_id);
    END IF;
    o_lost := t.lease_until;
    -- The due index moves to no later than the lease's end: if this worker
    -- dies, the sweeper finds the task then.
    UPDATE {S}.tasks SET gen = gen + 1, attempts = attempts + 1, lease_until = v_lease, status = 'working',
      waiting = CASE WHEN status = 'input_required' THEN NULL ELSE waiting END,
      due_at = CASE WHEN due_at IS NULL OR due_at > v_lease THEN v_lease ELSE due_at END
    WHERE id = p_id RETURNING * INTO t;
    o_code := 'C';
    o_gen := t.gen;
    o_attempts := t.attempts;
    IF t.journal_len > 0 THEN
      o_journal := ARRAY(SELECT entry FROM {S}.journal WHERE task_id = p_id ORDER BY seq);
    END IF;
    o_responses := t.responses;
  END IF;
  o_owner := t.owner;
  o_tool := t.tool;
  o_args := t.args;
  o_status := t.status;
  o_status_message := t.status_message;
  o_created_at := t.created_at;
  o_updated_at := t.updated_at;
  o_ttl_ms := t.ttl_ms;
  o_poll_ms := t.poll_ms;
  o_result := t.result;
  o_error := t.error;
  o_cancel_requested := t.cancel_requested;
  o_lease_until := t.lease_until;
  o_traceparent := t.traceparent;
END $$;

-- renew_lease: the lease of the claim of generation p_gen lasts until
-- p_now + p_lease_ms, if that claim still holds the task (its generation,
-- a lease, not terminal): o_code the new end in ms, -1 fenced, -2 gone.
-- With p_dispatch the task's message is held until then too (the Redis
-- store's holdq): a worker that dies after it is replaced when the lease
-- runs out.
CREATE FUNCTION {S}.renew_lease(p_id text, p_gen bigint, p_now timestamptz, p_lease_ms bigint, p_dispatch boolean)
  RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  t {S}.tasks%ROWTYPE;
  v_ends timestamptz := p_now + p_lease_ms * interval '1 millisecond';
BEGIN
  SELECT * INTO t FROM {S}.tasks WHERE id = p_id AND expires_at > now() FOR UPDATE;
  IF NOT FOUND THEN
    RETURN -2;
  END IF;
  IF t.gen <> p_gen OR t.lease_until IS NULL OR t.status IN ('completed', 'failed', 'cancelled') THEN
    RETURN -1;
  END IF;
  UPDATE {S}.tasks SET lease_until = v_ends WHERE id = p_id;
  IF p_dispatch THEN
    INSERT INTO {S}.queue AS q (task_id, due_at) VALUES (p_id, v_ends)
    ON CONFLICT (task_id) DO UPDATE SET due_at = EXCLUDED.due_at;
  END IF;
  RETURN {S}.ms(v_ends);
END $$;

-- commit_task: a worker's fenced write. o_code 0 ok, -1 fenced (stale
-- generation, no lease, or terminal), -2 gone. p_op is keep, release,
-- sleep, park, complete, fail or cancel; a change that keeps the task
-- alive while cancellation was requested cancels it instead. Offers are
-- put up (p_offers) and withdrawn (p_withdrawn) before the op applies. A
-- sleep is released to run now (o_woke) if a watched offer (p_watch) was
-- answered meanwhile, parked in input_required with nothing in waiting
-- until p_wake if offers are outstanding, and released until p_wake
-- otherwise. A terminal change sets the status message it carries, or
-- clears it.
CREATE FUNCTION {S}.commit_task(p_id text, p_gen bigint, p_now timestamptz, p_op text, p_has_message boolean,
  p_message text, p_attempts integer, p_payload text, p_wake timestamptz, p_any boolean, p_park jsonb,
  p_append text[], p_offers jsonb, p_withdrawn text[], p_watch text[], p_grace_ms bigint, p_dispatch boolean,
  OUT o_code integer, OUT o_attempts integer, OUT o_status text, OUT o_woke boolean) LANGUAGE plpgsql AS $$
DECLARE
  t {S}.tasks%ROWTYPE;
  v_op text := p_op;
  v_cancelled boolean := false;
  v_n integer := coalesce(cardinality(p_append), 0);
  v_offers jsonb;
  v_message text;
  v_wake timestamptz := p_wake;
  v_park jsonb := p_park;
  v_grace interval := p_grace_ms * interval '1 millisecond';
BEGIN
  o_woke := false;
  SELECT * INTO t FROM {S}.tasks WHERE id = p_id AND expires_at > now() FOR UPDATE;
  IF NOT FOUND THEN
    o_code := -2;
    RETURN;
  END IF;
  o_status := t.status;
  IF p_gen = 0 OR t.gen <> p_gen OR t.status IN ('completed', 'failed', 'cancelled') THEN
    o_code := -1;
    RETURN;
  END IF;
  o_code := 0;
  IF v_n > 0 THEN
    INSERT INTO {S}.journal (task_id, seq, entry)
    SELECT p_id, t.journal_len + u.o - 1, u.e FROM unnest(p_append) WITH ORDINALITY AS u (e, o);
  END IF;
  v_offers := coalesce(t.offers, '{}');
  IF p_offers IS NOT NULL THEN
    v_offers := v_offers || p_offers;
  END IF;
  IF p_withdrawn IS NOT NULL THEN
    v_offers := v_offers - p_withdrawn;
  END IF;
  o_attempts := coalesce(p_attempts, t.attempts);
  IF t.cancel_requested AND v_op IN ('keep', 'release', 'sleep', 'park') THEN
    v_op := 'cancel';
    v_cancelled := true;
  END IF;
  v_message := t.status_message;
  IF p_has_message AND NOT v_cancelled THEN
    v_message := p_message;
  END IF;
  IF v_op = 'keep' THEN
    UPDATE {S}.tasks SET updated_at = p_now, journal_len = journal_len + v_n, offers = nullif(v_offers, '{}'),
      attempts = o_attempts, status_message = v_message
    WHERE id = p_id;
    IF p_has_message OR p_offers IS NOT NULL OR p_withdrawn IS NOT NULL THEN
      PERFORM pg_notify('{N}.tasks', p_id);
    END IF;
    RETURN;
  END IF;
  IF v_op = 'sleep' THEN
    v_op := 'release';
    IF EXISTS (SELECT 1 FROM unnest(p_watch) AS w (k) WHERE coalesce(t.responses, '{}') ? w.k) THEN
      o_woke := true;
      v_wake := NULL;
    ELSIF v_offers <> '{}' THEN
      v_op := 'park';
      v_park := NULL;
    END IF;
  END IF;
  IF v_op IN ('release', 'park') THEN
    -- Runs again at its wake time (or deadline); without one, a release
    -- runs now, and a park waits for its input, found by the sweeper at
    -- its expiry at the latest.
    IF v_wake IS NOT NULL THEN
      IF p_dispatch THEN
        PERFORM {S}.enqueue(p_id, v_wake, true);
      END IF;
      t.due_at := v_wake + v_grace;
    ELSIF v_op = 'release' THEN
      IF p_dispatch THEN
        PERFORM {S}.enqueue(p_id, p_now, true);
      END IF;
      t.due_at := CASE WHEN t.due_at IS NULL OR t.due_at > p_now + v_grace THEN p_now + v_grace ELSE t.due_at END;
    ELSE
      IF p_dispatch THEN
        PERFORM {S}.dequeue(p_id);
      END IF;
      t.due_at := t.expires_at;
    END IF;
    o_status := CASE v_op WHEN 'release' THEN 'working' ELSE 'input_required' END;
    -- A task under a lease has no input it waits for: the claim that
    -- took it out of input_required dropped it.
    UPDATE {S}.tasks SET status = o_status, lease_until = NULL, wake_at = v_wake, updated_at = p_now,
      journal_len = journal_len + v_n, offers = nullif(v_offers, '{}'), attempts = o_attempts,
      status_message = v_message, due_at = t.due_at,
      waiting = CASE WHEN v_op = 'park' THEN nullif(v_park, '{}') END,
      park_any = v_op = 'park' AND p_any
    WHERE id = p_id;
  ELSE
    o_status := CASE v_op WHEN 'complete' THEN 'completed' WHEN 'fail' THEN 'failed' ELSE 'cancelled' END;
    IF p_dispatch THEN
      PERFORM {S}.dequeue(p_id);
    END IF;
    -- Ended: its running state (and a status message this commit does
    -- not set) goes.
    UPDATE {S}.tasks SET status = o_status, updated_at = p_now, journal_len = journal_len + v_n,
      result = CASE WHEN v_op = 'complete' THEN p_payload END,
      error = CASE WHEN v_op = 'fail' THEN p_payload END,
      ` + endedColumns + `,
      status_message = CASE WHEN p_has_message AND NOT v_cancelled THEN p_message ELSE '' END
    WHERE id = p_id;
  END IF;
  PERFORM pg_notify('{N}.tasks', p_id);
END $$;
`

// indexesV2 is version 2: the index of every task newest first
// (tasks_created), which the operator's listing (pgstore's ListAll:
// mcptasks tasks, the dashboard) reads a page of at a time, whoever owns
// the tasks. Ids order bytewise (COLLATE "C"), whatever the database's
// collation, as the listing's contract and the Redis store order them. It
// costs a creation one more index entry, and the migration builds it in
// its transaction, holding off writes to the tasks for as long as that
// takes (the tasks table holds only unexpired tasks and those the
// sweeper has yet to purge).
const indexesV2 = `
CREATE INDEX tasks_created ON {S}.tasks (created_at DESC, id COLLATE "C" DESC);
`

// endedColumns is the SET list of a transition that ends a task: its
// running state, its input and offers and its due-index entry go (the
// status message too, set by each such transition).
const endedColumns = `lease_until = NULL, gen = 0, wake_at = NULL, attempts = 0,
  cancel_requested = false, park_any = false, waiting = NULL, offers = NULL, due_at = NULL`
