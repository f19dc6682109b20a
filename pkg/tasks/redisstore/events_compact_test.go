package redisstore

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/redis/rueidis"
)

// Compact waits (format of 2026-12-03): an open callback wait with a
// schema keeps a short proof and a reference to its meta, so that the
// events hash stays a listpack; the tasks whose waits have the same meta
// and expire the same day share one string, which outlives each of them;
// a meta with a secret is the task's own. Waiting returns the wait whole
// (schema and secret), Deliver takes the hex proof, another proof is not
// found, and a wait written before (hex proof, meta inline) reads and
// delivers as before.
func TestCompactWaits(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"output":{"type":"string","description":"where the transcoded video is"}},"required":["output"],"additionalProperties":false}`)
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			c := b.client(t)
			prefix := uniquePrefix()
			s := New(c, &Options{Prefix: prefix})
			ctx := t.Context()
			now := time.Now().UTC().Truncate(time.Millisecond)
			proofOf := func(token string) string { sum := sha256.Sum256([]byte(token)); return hex.EncodeToString(sum[:]) }
			// await opens the callback wait "hook" for token on a new task.
			await := func(token, secret string) string {
				t.Helper()
				return committed(t, s, driver.NewTask{TTL: time.Hour, Now: now}, &driver.Change{Now: now, Release: true, Await: "hook", WakeAt: now.Add(30 * time.Minute),
					Open: []driver.EventWait{{Name: "hook", Kind: driver.EventCallback, Proof: proofOf(token), Schema: schema, Secret: secret, Until: now.Add(30 * time.Minute)}}})
			}
			// metaOf is the meta string of the task id's wait for token.
			metaOf := func(id, token, secret string) string {
				t.Helper()
				tk, err := s.Peek(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				_, m, err := s.encodeWait(id, &driver.EventWait{Name: "hook", Kind: driver.EventCallback, Proof: proofOf(token), Schema: schema, Secret: secret, Until: now.Add(30 * time.Minute)}, tk.ExpiresAt())
				if err != nil || m == nil {
					t.Fatalf("encodeWait: %v, %v", m, err)
				}
				if n, _ := c.Do(ctx, c.B().Exists().Key(m.key).Build()).AsInt64(); n != 1 {
					t.Errorf("no meta string %s", m.key)
				}
				return m.key
			}
			a, b2 := await("token-a", ""), await("token-b", "")
			shared := metaOf(a, "token-a", "")
			if other := metaOf(b2, "token-b", ""); other != shared || !strings.HasPrefix(shared, prefix+"wm:") {
				t.Errorf("meta strings %s and %s, want one shared", shared, other)
			}
			exp := now.Add(time.Hour)
			if ms, _ := c.Do(ctx, c.B().Pttl().Key(shared).Build()).AsInt64(); time.Duration(ms)*time.Millisecond < time.Until(exp) || time.Duration(ms)*time.Millisecond > 25*time.Hour {
				t.Errorf("the shared meta expires in %v, the tasks in %v", time.Duration(ms)*time.Millisecond, time.Until(exp))
			}
			for _, id := range []string{a, b2} {
				e := s.eventsKey(id)
				v, err := c.Do(ctx, c.B().Hget().Key(e).Field("hook").Build()).ToString()
				if err != nil || len(v) > maxInline {
					t.Errorf("the wait holds %q (%d bytes), want at most %d", v, len(v), maxInline)
				}
				if b.name == "redis-server" {
					if enc, _ := c.Do(ctx, c.B().ObjectEncoding().Key(e).Build()).ToString(); enc != "listpack" {
						t.Errorf("events hash encoding %q, want listpack", enc)
					}
				}
			}
			w, err := s.Waiting(ctx, a, "", proofOf("token-a"), now)
			if err != nil || w == nil || w.Name != "hook" || string(w.Schema) != string(schema) || w.Secret != "" || !w.Until.Equal(now.Add(30*time.Minute)) {
				t.Fatalf("Waiting = %+v, %v", w, err)
			}
			if _, err := s.Waiting(ctx, a, "", proofOf("token-b"), now); !errors.Is(err, driver.ErrNotFound) {
				t.Errorf("Waiting with another task's proof = %v, want ErrNotFound", err)
			}
			if resumed, err := s.Deliver(ctx, b2, &driver.Delivery{Name: "hook", Proof: proofOf("token-a"), Payload: json.RawMessage(`{}`), Now: now}); !errors.Is(err, driver.ErrNotFound) {
				t.Errorf("Deliver with a wrong proof = %v, %v", resumed, err)
			}
			if resumed, err := s.Deliver(ctx, a, &driver.Delivery{Name: "hook", Proof: proofOf("token-a"), Payload: json.RawMessage(`{"output":"x"}`), Now: now}); err != nil || !resumed {
				t.Fatalf("Deliver = %v, %v", resumed, err)
			}
			if cl, err := s.Claim(ctx, a, now, time.Minute); err != nil || string(cl.Events["hook"]) != `{"output":"x"}` {
				t.Fatalf("claim after the delivery: %+v, %v", cl, err)
			}

			// A secret: the task's own string.
			signed := await("token-s", "whsec_c2VjcmV0")
			own := metaOf(signed, "token-s", "whsec_c2VjcmV0")
			if !strings.HasPrefix(own, prefix+"{"+signed+"}:") {
				t.Errorf("a signed wait's meta is %s, not the task's own", own)
			}
			// It expires with its task, not later.
			if at, _ := c.Do(ctx, c.B().Pexpiretime().Key(own).Build()).AsInt64(); at != exp.UnixMilli() {
				t.Errorf("a signed wait's meta expires at %d, its task at %d", at, exp.UnixMilli())
			}
			w, err = s.Waiting(ctx, signed, "hook", proofOf("token-s"), now)
			if err != nil || w == nil || w.Secret != "whsec_c2VjcmV0" || string(w.Schema) != string(schema) {
				t.Fatalf("Waiting of a signed wait = %+v, %v", w, err)
			}
			rec, err := s.Inspect(ctx, signed)
			if err != nil || !rec.Events["hook"].Signed || rec.Events["hook"].State != "open" {
				t.Errorf("Inspect of a signed wait: %+v, %v", rec.Events, err)
			}
			if rec, err := s.Inspect(ctx, b2); err != nil || rec.Events["hook"].Signed || rec.Events["hook"].Kind != driver.EventCallback {
				t.Errorf("Inspect of an unsigned wait: %+v, %v", rec.Events, err)
			}

			// A wait written before: the hex proof, the meta inline.
			old := await("token-o", "")
			meta, _ := json.Marshal(waitMeta{Schema: schema})
			v := "oc" + ms(now.Add(30*time.Minute)) + ":" + proofOf("token-o") + ":" + string(meta)
			if err := c.Do(ctx, c.B().Hset().Key(s.eventsKey(old)).FieldValue().FieldValue("hook", v).Build()).Error(); err != nil {
				t.Fatal(err)
			}
			w, err = s.Waiting(ctx, old, "", proofOf("token-o"), now)
			if err != nil || w == nil || string(w.Schema) != string(schema) || w.Proof != proofOf("token-o") {
				t.Fatalf("Waiting of a wait written before = %+v, %v", w, err)
			}
			if resumed, err := s.Deliver(ctx, old, &driver.Delivery{Name: "hook", Proof: proofOf("token-o"), Payload: json.RawMessage(`{"output":"y"}`), Now: now}); err != nil || !resumed {
				t.Fatalf("Deliver to a wait written before = %v, %v", resumed, err)
			}
			// A missing meta is an error, not a wait without schema.
			lost := await("token-l", "x")
			if err := c.Do(ctx, c.B().Del().Key(metaOf(lost, "token-l", "x")).Build()).Error(); err != nil {
				t.Fatal(err)
			}
			if w, err := s.Waiting(ctx, lost, "", proofOf("token-l"), now); err == nil || !rueidis.IsRedisNil(errors.Unwrap(err)) && !strings.Contains(err.Error(), "meta") {
				t.Errorf("Waiting without its meta = %+v, %v", w, err)
			}
		})
	}
}
