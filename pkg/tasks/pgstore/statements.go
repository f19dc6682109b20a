package pgstore

import "github.com/mcptasks/mcptasks/internal/pgschema"

// statements are the store's SQL, with its schema's name in place. Every
// parameter is cast to its type, so that the statements run the same with
// pgx's exec and simple protocols (which type parameters by Go type), and
// times travel as Unix milliseconds (see pgschema's ts and ms).
type statements struct {
	create, get, outstanding, update, cancel, claim, renew, commit, cancelRequested, due, list, listAll, inspect, schedule, reschedule, lock string
}

func newStatements(schema string) statements {
	q := func(src string) string { return pgschema.SQL(schema, src) }
	return statements{
		create: q(`SELECT {S}.create_task($1::text, $2::text, $3::text, $4::text, {S}.ts($5::bigint), $6::bigint,
  $7::bigint, $8::text, $9::boolean, $10::bigint, $11::text[], $12::jsonb, $13::bigint, $14::boolean)`),
		get: q(`SELECT ` + taskColumns + ` FROM {S}.tasks
WHERE id = $1::text AND expires_at > now() AND ($2::text = '' OR owner = $2::text)`),
		update: q(`SELECT {S}.update_task($1::text, $2::text, {S}.ts($3::bigint), $4::text[], $5::text[], $6::bigint, $7::boolean)`),
		cancel: q(`SELECT o_status, o_ended FROM {S}.cancel_task($1::text, $2::text, {S}.ts($3::bigint), $4::boolean)`),
		claim: q(`SELECT o_code, o_gen, o_attempts, {S}.ms(o_wake), o_owner, o_tool, o_args, o_status, o_status_message,
  {S}.ms(o_created_at), {S}.ms(o_updated_at), o_ttl_ms, o_poll_ms, o_result, o_error, o_cancel_requested,
  {S}.ms(o_lease_until), o_traceparent, o_journal, o_responses::text, {S}.ms(o_lost)
FROM {S}.claim_task($1::text, {S}.ts($2::bigint), $3::bigint, $4::boolean)`),
		renew: q(`SELECT {S}.renew_lease($1::text, $2::bigint, {S}.ts($3::bigint), $4::bigint, $5::boolean)`),
		outstanding: q(`SELECT status, {S}.ms(wake_at), lease_until IS NOT NULL, waiting::text, offers::text FROM {S}.tasks
WHERE id = $1::text AND owner = $2::text AND expires_at > now()`),
		commit: q(`SELECT o_code, o_attempts, o_status, o_woke FROM {S}.commit_task($1::text, $2::bigint,
  {S}.ts($3::bigint), $4::text, $5::boolean, $6::text, $7::integer, $8::text, {S}.ts($9::bigint), $10::boolean,
  $11::jsonb, $12::text[], $13::jsonb, $14::text[], $15::text[], $16::bigint, $17::boolean)`),
		cancelRequested: q(`SELECT cancel_requested, gen, status FROM {S}.tasks WHERE id = $1::text AND expires_at > now()`),
		due: q(`WITH purged AS (
  DELETE FROM {S}.tasks WHERE id IN (
    SELECT id FROM {S}.tasks WHERE expires_at <= now() ORDER BY expires_at LIMIT $3::bigint FOR UPDATE SKIP LOCKED)
)
SELECT id, {S}.ms(due_at) FROM {S}.tasks
WHERE due_at <= {S}.ts($1::bigint) AND expires_at > now() ORDER BY due_at LIMIT $2::bigint`),
		list: q(`SELECT id, {S}.ms(expires_at), ` + taskColumns + ` FROM {S}.tasks
WHERE owner = $1::text AND listed AND expires_at > {S}.ts($2::bigint) AND expires_at > now()
  AND ($3::bigint IS NULL OR (expires_at, id) < ({S}.ts($3::bigint), $4::text))
ORDER BY expires_at DESC, id DESC LIMIT $5::bigint`),
		listAll: q(`SELECT id, {S}.ms(created_at), ` + taskColumns + ` FROM {S}.tasks
WHERE created_at >= {S}.ts($2::bigint) AND ($3::bigint IS NULL OR created_at < {S}.ts($3::bigint))
  AND ($4::bigint IS NULL OR (created_at, id COLLATE "C") < ({S}.ts($4::bigint), $5::text COLLATE "C"))
  AND expires_at > {S}.ts($1::bigint) AND expires_at > now()
  AND ($6::text[] IS NULL OR status = ANY ($6::text[]))
  AND ($7::text = '' OR tool = $7::text) AND ($8::text = '' OR owner = $8::text)
ORDER BY created_at DESC, id COLLATE "C" DESC LIMIT $9::bigint`),
		inspect: q(`SELECT ` + taskColumns + `, attempts, gen, {S}.ms(cancel_requested_at), responses::text,
  answered_at::text, ARRAY(SELECT entry FROM {S}.journal WHERE task_id = t.id ORDER BY seq)
FROM {S}.tasks t WHERE id = $1::text AND expires_at > now()`),
		lock: q(`INSERT INTO {S}.locks AS l (name, holder, until) VALUES ($1::text, $2::text, now() + $3::bigint * interval '1 millisecond')
ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, until = EXCLUDED.until WHERE l.until <= now()`),
		schedule:   q(`UPDATE {S}.tasks SET due_at = {S}.ts($2::bigint) WHERE id = $1::text`),
		reschedule: q(`UPDATE {S}.tasks SET due_at = {S}.ts($3::bigint) WHERE id = $1::text AND due_at = {S}.ts($2::bigint)`),
	}
}
