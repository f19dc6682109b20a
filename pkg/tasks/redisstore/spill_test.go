package redisstore

import (
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
	"github.com/mcptasks/mcptasks/pkg/embedredis"
	"github.com/mcptasks/mcptasks/pkg/queue/redisqueue"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/redis/rueidis"
)

// Values longer than Redis's hash-max-listpack-value (64) as a real
// deployment has them: a principal of an issuer URL and a subject, a
// tool's arguments, a status message naming a file, an error.
var (
	longOwner = "44:https://login.example.com/0b5d4c3a-9f8e/v2.0|36:6f1c2b3a-4d5e-4f60-8a9b-0c1d2e3f4a5b"
	// otherOwner differs from longOwner in its last byte only.
	otherOwner = longOwner[:len(longOwner)-1] + "c"
	longTool   = "transcode_video_with_the_default_profile_of_the_media_pipeline_v2"
	longArgs   = json.RawMessage(`{"timeoutSeconds":86400,"video":"s3://media-uploads/2026/12/02/customer-1234/raw.mp4"}`)
	// hugeArgs are longer than maxChunks chunks: they go to the spill key.
	hugeArgs = json.RawMessage(`{"text":"` + strings.Repeat("lorem ipsum ", 100) + `"}`)
	longMsg  = "transcoding s3://media-uploads/2026/12/02/customer-1234/raw.mp4 (part 3 of 10)"
	longErr  = &driver.ErrorObject{Code: -32603, Message: "the transcoding service refused the video: unsupported codec in stream 2"}
)

// compact checks, on a redis-server, that the task hash of id is still in
// Redis's compact listpack encoding (a longer value would have converted
// it to a hash table, about a kilobyte more).
func compact(t *testing.T, b backend, c rueidis.Client, s *Store, id, stage string) {
	t.Helper()
	if b.name == "embedded" {
		return // miniredis has no encodings
	}
	tk, _, _, _ := s.keys(id)
	enc, err := c.Do(t.Context(), c.B().ObjectEncoding().Key(tk).Build()).ToString()
	if err != nil || enc != "listpack" {
		t.Errorf("%s: the task hash is %q (%v), want listpack", stage, enc, err)
	}
}

// TestLongValuesKeepTheHashCompact walks a task whose owner, tool,
// arguments, status messages and error are longer than 64 bytes through
// its life: the task hash stays in the listpack encoding at every step,
// every reader gets the values whole, the owner check holds (a principal
// that differs in one byte, or none, sees nothing), the kept-out values
// expire with the task, and a status message that gets short again
// leaves nothing behind.
func TestLongValuesKeepTheHashCompact(t *testing.T) {
	for _, b := range backends() {
		for _, dispatch := range []bool{false, true} {
			if dispatch && !b.dispatches() {
				continue
			}
			name := b.name
			if dispatch {
				name += "+dispatch"
			}
			t.Run(name, func(t *testing.T) {
				c := b.client(t)
				prefix := uniquePrefix()
				o := &Options{Prefix: prefix}
				if dispatch {
					o.Queue = redisqueue.New(c, &redisqueue.Options{Key: prefix + "{queue}"})
				}
				s := New(c, o)
				k := &keyChecker{t: t, c: c, s: s, exp: map[string]time.Time{}}
				if b.name == "embedded" {
					k.late = embedredis.Tick
				}
				ctx := t.Context()
				now := time.Now().UTC().Truncate(time.Millisecond)
				args := longArgs
				create := func() string {
					t.Helper()
					id := driver.NewID()
					tk, err := s.Create(ctx, &driver.NewTask{ID: id, Owner: longOwner, Tool: longTool, Args: args,
						TTL: time.Hour, PollInterval: time.Second, Now: now, Listed: true, MaxLive: 10})
					if err != nil {
						t.Fatal(err)
					}
					k.exp[id] = tk.ExpiresAt()
					compact(t, b, c, s, id, "create")
					return id
				}
				whole := func(stage string, tk *driver.Task) {
					t.Helper()
					if tk.Owner != longOwner || tk.Tool != longTool || string(tk.Args) != string(args) {
						t.Errorf("%s: owner %q, tool %q, args %s; want them whole", stage, tk.Owner, tk.Tool, tk.Args)
					}
				}
				get := func(stage, id string) *driver.Task {
					t.Helper()
					tk, err := s.Get(ctx, longOwner, id)
					if err != nil {
						t.Fatalf("%s: Get: %v", stage, err)
					}
					whole(stage, tk)
					for _, who := range []string{otherOwner, ""} {
						if _, err := s.Get(ctx, who, id); !errors.Is(err, driver.ErrNotFound) {
							t.Errorf("%s: Get by %q = %v, want ErrNotFound", stage, who, err)
						}
					}
					return tk
				}
				commit := func(stage string, cl *driver.Claim, ch *driver.Change) {
					t.Helper()
					if err := s.Commit(ctx, cl, ch); err != nil {
						t.Fatalf("%s: Commit: %v", stage, err)
					}
					compact(t, b, c, s, cl.Task.ID, stage)
				}
				claim := func(stage, id string, at time.Time) *driver.Claim {
					t.Helper()
					cl, err := s.Claim(ctx, id, at, time.Minute)
					if err != nil || cl.Gen == 0 {
						t.Fatalf("%s: Claim: %+v, %v", stage, cl, err)
					}
					whole(stage+" claim", cl.Task)
					return cl
				}

				id := create()
				get("created", id)
				if tk, err := s.Peek(ctx, id); err != nil {
					t.Fatal(err)
				} else {
					whole("peek", tk)
				}
				cl := claim("first", id, now)
				msg := longMsg
				commit("a long status message", cl, &driver.Change{Now: now, StatusMessage: &msg,
					Append: []driver.Entry{{Name: "one", Kind: driver.KindDo, Value: json.RawMessage(`1`)}}})
				if tk := get("a long status message", id); tk.StatusMessage != longMsg {
					t.Errorf("status message %q, want %q", tk.StatusMessage, longMsg)
				}
				if !dispatch { // (the checker knows no queue)
					k.check("a long status message", s.msgKey(id))
				}
				short := "waiting"
				commit("parked with a short message", cl, &driver.Change{Now: now, StatusMessage: &short,
					Park: map[string]json.RawMessage{"ok": json.RawMessage(`{"method":"elicitation/create"}`)}})
				if tk := get("parked", id); tk.StatusMessage != short || tk.Status != driver.StatusInputRequired {
					t.Errorf("parked: %s %q, want input_required %q", tk.Status, tk.StatusMessage, short)
				}
				if n, _ := c.Do(ctx, c.B().Exists().Key(s.msgKey(id)).Build()).AsInt64(); n != 0 {
					t.Error("a short status message left the long one's key behind")
				}
				if _, err := s.Update(ctx, otherOwner, id, map[string]json.RawMessage{"ok": json.RawMessage(`{"action":"accept"}`)}, now); !errors.Is(err, driver.ErrNotFound) {
					t.Errorf("Update by another principal = %v, want ErrNotFound", err)
				}
				if out, err := s.Outstanding(ctx, longOwner, id, now); err != nil || len(out) != 1 {
					t.Errorf("Outstanding = %v, %v; want the request", out, err)
				}
				if resumed, err := s.Update(ctx, longOwner, id, map[string]json.RawMessage{"ok": json.RawMessage(`{"action":"accept"}`)}, now); err != nil || !resumed {
					t.Fatalf("Update = %v, %v; want resumed", resumed, err)
				}
				cl = claim("resumed", id, now)
				msg = longMsg + " failing"
				commit("failed", cl, &driver.Change{Now: now, StatusMessage: &msg, Fail: longErr})
				tk := get("failed", id)
				if tk.Status != driver.StatusFailed || !sameError(tk.Error, longErr) || tk.StatusMessage != msg {
					t.Errorf("failed: %s, error %+v, message %q; want failed with %+v and %q", tk.Status, tk.Error, tk.StatusMessage, longErr, msg)
				}
				rec, err := s.Inspect(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				whole("inspect", rec.Task)
				if !sameError(rec.Task.Error, longErr) || rec.Task.StatusMessage != msg {
					t.Errorf("inspect: error %+v, message %q", rec.Task.Error, rec.Task.StatusMessage)
				}
				if ts, _, err := s.List(ctx, longOwner, "", 10, now); err != nil || len(ts) != 1 {
					t.Errorf("List = %d tasks, %v", len(ts), err)
				} else {
					whole("list", ts[0])
				}
				if ts, _, err := s.ListAll(ctx, nil, "", 10, now); err != nil || len(ts) != 1 {
					t.Errorf("ListAll = %d tasks, %v", len(ts), err)
				} else {
					whole("list all", ts[0])
				}
				if _, err := c.Do(ctx, c.B().Zscore().Key(s.liveKey(longOwner)).Member(id).Build()).AsFloat64(); !rueidis.IsRedisNil(err) {
					t.Errorf("the failed task stayed in its owner's live set (ZSCORE: %v)", err)
				}

				// Cancelled while a worker holds it: the claim after the lease
				// ends it, and hands back the owner whole. Its arguments are
				// too long for chunks: they are in the spill key.
				args = hugeArgs
				id2 := create()
				get("huge arguments", id2)
				cl2 := claim("cancel", id2, now)
				msg = longMsg
				commit("cancel: a long message", cl2, &driver.Change{Now: now, StatusMessage: &msg})
				if st, ended, err := s.Cancel(ctx, longOwner, id2, now); err != nil || ended || st != driver.StatusWorking {
					t.Fatalf("Cancel of a leased task = %s, %v, %v", st, ended, err)
				}
				ended, err := s.Claim(ctx, id2, now.Add(2*time.Minute), time.Minute)
				if err != nil || !ended.Ended || ended.Task.Status != driver.StatusCancelled {
					t.Fatalf("Claim after the lease = %+v, %v; want it cancelled", ended, err)
				}
				whole("cancelled by a claim", ended.Task)
				if ended.Task.StatusMessage != "" {
					t.Errorf("a cancelled task shows the message %q", ended.Task.StatusMessage)
				}
				if n, _ := c.Do(ctx, c.B().Exists().Key(s.msgKey(id2)).Build()).AsInt64(); n != 0 {
					t.Error("the long status message of a cancelled task outlived its end")
				}
				// Cancelled at once, parked.
				args = longArgs
				id3 := create()
				cl3 := claim("cancel at once", id3, now)
				commit("cancel at once: parked", cl3, &driver.Change{Now: now, StatusMessage: &msg,
					Park: map[string]json.RawMessage{"x": json.RawMessage(`{}`)}})
				if _, _, err := s.Cancel(ctx, otherOwner, id3, now); !errors.Is(err, driver.ErrNotFound) {
					t.Errorf("Cancel by another principal = %v, want ErrNotFound", err)
				}
				if st, ended, err := s.Cancel(ctx, longOwner, id3, now); err != nil || !ended || st != driver.StatusCancelled {
					t.Fatalf("Cancel of a parked task = %s, %v, %v", st, ended, err)
				}
				compact(t, b, c, s, id3, "cancelled")
				if !dispatch {
					k.check("the end", s.spillKey(id2))
				}
				for _, x := range []string{id2, id3} {
					if _, err := c.Do(ctx, c.B().Zscore().Key(s.liveKey(longOwner)).Member(x).Build()).AsFloat64(); !rueidis.IsRedisNil(err) {
						t.Errorf("cancelled task %s stayed in its owner's live set (ZSCORE: %v)", x, err)
					}
				}
			})
		}
	}
}

// TestPreviousFormatReadable: a task written before the long values left
// the hash (the owner, tool, arguments, status message and error in it,
// no sp or ml flag, no spill key) is read, claimed, committed, answered
// and cancelled as before.
func TestPreviousFormatReadable(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			c := b.client(t)
			s := New(c, &Options{Prefix: uniquePrefix()})
			ctx := t.Context()
			now := time.Now().UTC().Truncate(time.Millisecond)
			// What the previous Create and Commit wrote: the same fields,
			// every value in the hash.
			old := func(status string, extra ...string) string {
				t.Helper()
				id := driver.NewID()
				if _, err := s.Create(ctx, &driver.NewTask{ID: id, Owner: "short", Tool: "t", Args: json.RawMessage(`{}`),
					TTL: time.Hour, PollInterval: time.Second, Now: now}); err != nil {
					t.Fatal(err)
				}
				toEarlierFormat(t, c, s, id)
				tk, _, _, _ := s.keys(id)
				fv := c.B().Hset().Key(tk).FieldValue().FieldValue("owner", longOwner).FieldValue("tool", longTool).
					FieldValue("args", string(longArgs)).FieldValue("msg", longMsg).FieldValue("status", status)
				for i := 0; i+1 < len(extra); i += 2 {
					fv = fv.FieldValue(extra[i], extra[i+1])
				}
				if err := c.Do(ctx, fv.Build()).Error(); err != nil {
					t.Fatal(err)
				}
				return id
			}
			id := old("working")
			tk, err := s.Get(ctx, longOwner, id)
			if err != nil || tk.Owner != longOwner || tk.Tool != longTool || string(tk.Args) != string(longArgs) || tk.StatusMessage != longMsg {
				t.Fatalf("Get of a task in the previous format = %+v, %v", tk, err)
			}
			if _, err := s.Get(ctx, otherOwner, id); !errors.Is(err, driver.ErrNotFound) {
				t.Errorf("Get by another principal = %v, want ErrNotFound", err)
			}
			cl, err := s.Claim(ctx, id, now, time.Minute)
			if err != nil || cl.Gen == 0 || cl.Task.Owner != longOwner || string(cl.Task.Args) != string(longArgs) || cl.Task.StatusMessage != longMsg {
				t.Fatalf("Claim of a task in the previous format = %+v, %v", cl, err)
			}
			short := "ask"
			if err := s.Commit(ctx, cl, &driver.Change{Now: now, StatusMessage: &short, Park: map[string]json.RawMessage{"k": json.RawMessage(`{}`)}}); err != nil {
				t.Fatal(err)
			}
			if resumed, err := s.Update(ctx, longOwner, id, map[string]json.RawMessage{"k": json.RawMessage(`{"action":"accept"}`)}, now); err != nil || !resumed {
				t.Fatalf("Update = %v, %v", resumed, err)
			}
			cl, err = s.Claim(ctx, id, now, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Commit(ctx, cl, &driver.Change{Now: now, Complete: json.RawMessage(`{"content":[]}`)}); err != nil {
				t.Fatal(err)
			}
			if tk, err := s.Get(ctx, longOwner, id); err != nil || tk.Status != driver.StatusCompleted || string(tk.Result) != `{"content":[]}` {
				t.Errorf("completed: %+v, %v", tk, err)
			}

			// A failed task of the previous format: its error in the hash.
			errJSON, _ := json.Marshal(longErr)
			failed := old("failed", "error", string(errJSON))
			if tk, err := s.Get(ctx, longOwner, failed); err != nil || !sameError(tk.Error, longErr) {
				t.Errorf("a failed task of the previous format: %+v, %v", tk, err)
			}
			if rec, err := s.Inspect(ctx, failed); err != nil || !sameError(rec.Task.Error, longErr) || rec.Task.Owner != longOwner {
				t.Errorf("Inspect of a failed task of the previous format: %+v, %v", rec, err)
			}
			// Cancelled by its long owner.
			live := old("working")
			if st, ended, err := s.Cancel(ctx, longOwner, live, now); err != nil || !ended || st != driver.StatusCancelled {
				t.Errorf("Cancel of a task in the previous format = %s, %v, %v", st, ended, err)
			}
			if tk, err := s.Get(ctx, longOwner, live); err != nil || tk.StatusMessage != "" {
				t.Errorf("cancelled: %+v, %v; want no status message", tk, err)
			}
		})
	}
}

// TestSleepingTaskMemory guards the Redis memory of a typical live task:
// the sleeping slow_compute of the scale benchmark (a principal and
// arguments longer than 64 bytes, its "start" step journaled, sleeping)
// written as the engine writes it. Its keys' MEMORY USAGE stays within
// the bounds below on a redis-server; before the long values were cut into
// chunks the task hash was a hash table (MEMORY USAGE 1,432 bytes instead
// of 616), before the journal moved into the hash it had a list of its
// own (440 bytes more), and before the fields at their default were left
// out it took a size class more (872 bytes instead of 744).
func TestSleepingTaskMemory(t *testing.T) {
	c := testredis.Client(t, "redis-server")
	prefix := uniquePrefix()
	s := New(c, &Options{Prefix: prefix, Queue: redisqueue.New(c, &redisqueue.Options{Key: prefix + "{queue}"})})
	ctx := t.Context()
	now := time.Now().UTC()
	id := driver.NewID()
	args := json.RawMessage(`{"label":"nightly revenue report for the EMEA region","seconds":43200}`)
	if _, err := s.Create(ctx, &driver.NewTask{ID: id, Owner: longOwner, Tool: "slow_compute", Args: args,
		TTL: 24 * time.Hour, PollInterval: time.Second, Now: now, Listed: true}); err != nil {
		t.Fatal(err)
	}
	cl, err := s.Claim(ctx, id, now, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	at := now.Add(3 * time.Millisecond)
	wake := at.Add(12 * time.Hour)
	start, _ := json.Marshal(at.Add(-time.Microsecond))
	zero := 0
	msg := "computing for 43200s"
	if err := s.Commit(ctx, cl, &driver.Change{Now: at, SetAttempts: &zero, StatusMessage: &msg, Release: true, Sleep: true, WakeAt: wake,
		Append: []driver.Entry{
			{Name: "start", Kind: driver.KindDo, Value: start, At: at, Attempt: 1, Took: 412 * time.Microsecond},
			{Name: "compute", Kind: driver.KindSleep, Until: wake, At: at},
		}}); err != nil {
		t.Fatal(err)
	}
	tk, _, j, _ := s.keys(id)
	usage := func(key string) int64 {
		n, err := c.Do(ctx, c.B().MemoryUsage().Key(key).Samples(0).Build()).AsInt64()
		if err != nil && !rueidis.IsRedisNil(err) {
			t.Fatal(err)
		}
		return n
	}
	compact(t, backend{name: "redis-server"}, c, s, id, "sleeping")
	// Bounds: the sizes on redis-server 7.0 with jemalloc (744 bytes: the
	// principal and the arguments in chunks, the journal in the hash with
	// its times in Unix ms, no field at its default; 872 before those two,
	// 616 + 440 with the journal in a list of its own), plus a size class
	// of slack; no journal key.
	bounds := map[string]int64{tk: 872, j: 0}
	var total int64
	var got []string
	for key, bound := range bounds {
		n := usage(key)
		total += n
		got = append(got, strings.TrimPrefix(key, prefix)+"="+strconv.FormatInt(n, 10))
		if n > bound {
			t.Errorf("MEMORY USAGE of %s = %d bytes, want at most %d", key, n, bound)
		}
	}
	t.Logf("MEMORY USAGE of a sleeping task's keys: %s; %d in all", strings.Join(got, " "), total)
}

// sameError reports whether two error objects are equal.
func sameError(a, b *driver.ErrorObject) bool {
	return a != nil && b != nil && a.Code == b.Code && a.Message == b.Message && string(a.Data) == string(b.Data)
}

// BenchmarkGetLongValues: Get of a task whose owner and arguments are
// longer than 64 bytes, in chunks (this format) and whole in the hash
// (the previous one, a hash table), interleaved in one loop; ns/chunked
// and ns/previous are the mean of each. On the project's machine the
// chunked read costs 1-4% more (a longer reply, the chunks joined).
func BenchmarkGetLongValues(b *testing.B) {
	c := testredis.Client(b, "redis-server")
	s := New(c, &Options{Prefix: uniquePrefix()})
	ctx := b.Context()
	mk := func() string {
		id := driver.NewID()
		if _, err := s.Create(ctx, &driver.NewTask{ID: id, Owner: longOwner, Tool: "slow_compute", Args: longArgs, TTL: time.Hour, Now: time.Now()}); err != nil {
			b.Fatal(err)
		}
		return id
	}
	chunked, previous := mk(), mk()
	// The previous format: the same fields, the values whole.
	tk, _, _, _ := s.keys(previous)
	h, err := c.Do(ctx, c.B().Hgetall().Key(tk).Build()).AsStrMap()
	if err != nil {
		b.Fatal(err)
	}
	joinChunks(h)
	fv := c.B().Hset().Key(tk).FieldValue()
	for k, v := range h {
		if !strings.Contains(k, "#") {
			fv = fv.FieldValue(k, v)
		}
	}
	if err := c.Do(ctx, c.B().Del().Key(tk).Build()).Error(); err != nil {
		b.Fatal(err)
	}
	if err := c.Do(ctx, fv.Build()).Error(); err != nil {
		b.Fatal(err)
	}
	var d [2]time.Duration
	for b.Loop() {
		for i, id := range []string{chunked, previous} {
			t0 := time.Now()
			if _, err := s.Get(ctx, longOwner, id); err != nil {
				b.Fatal(err)
			}
			d[i] += time.Since(t0)
		}
	}
	b.ReportMetric(float64(d[0].Nanoseconds())/float64(b.N), "ns/chunked")
	b.ReportMetric(float64(d[1].Nanoseconds())/float64(b.N), "ns/previous")
}

// TestOwnerMarks checks the owner check of every script that makes it
// (Get, Outstanding, Update, Cancel) on the three marks of a long owner:
// its length beside its chunks (this format), its SHA-1 beside its chunks
// (the format before) and its SHA-1 for an owner in the spill key, and a
// short owner starting with "#" (cut into chunks, or held whole by a
// format before). The owner is recognised; a principal one byte off, one
// byte shorter or longer, or of the mark's own text is not (the format
// before took a principal equal to a digest mark for its owner).
func TestOwnerMarks(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			c := b.client(t)
			s := New(c, &Options{Prefix: uniquePrefix()})
			ctx := t.Context()
			now := time.Now().UTC()
			spilled := strings.Repeat("s", maxChunks*maxInline+1)
			sum := sha1.Sum([]byte(longOwner))
			for _, tc := range []struct {
				name, owner, mark string
				whole             bool // the owner held whole (a format before)
			}{
				{"length", longOwner, "#" + strconv.Itoa(len(longOwner)), false},
				{"digest beside chunks", longOwner, "#" + hex.EncodeToString(sum[:]), false},
				{"spilled", spilled, "", false},
				{"short, starting with #", "#abc", "", false},
				{"short, starting with #, held whole", "#abc", "#abc", true},
			} {
				id := driver.NewID()
				if _, err := s.Create(ctx, &driver.NewTask{ID: id, Owner: tc.owner, Tool: "t", Args: json.RawMessage(`{}`),
					TTL: time.Hour, Now: now}); err != nil {
					t.Fatal(err)
				}
				tk, _, _, _ := s.keys(id)
				if tc.mark != "" {
					if err := c.Do(ctx, c.B().Hset().Key(tk).FieldValue().FieldValue("owner", tc.mark).Build()).Error(); err != nil {
						t.Fatal(err)
					}
				}
				if tc.whole {
					if err := c.Do(ctx, c.B().Hdel().Key(tk).Field("owner#0").Build()).Error(); err != nil {
						t.Fatal(err)
					}
				}
				mark, _ := c.Do(ctx, c.B().Hget().Key(tk).Field("owner").Build()).ToString()
				others := []string{tc.owner[:len(tc.owner)-1] + "x", tc.owner[:len(tc.owner)-1], tc.owner + "x"}
				if !tc.whole {
					others = append(others, mark)
				}
				for _, p := range others {
					if _, err := s.Get(ctx, p, id); !errors.Is(err, driver.ErrNotFound) {
						t.Errorf("%s: Get by %q = %v, want ErrNotFound", tc.name, p, err)
					}
					if _, err := s.Outstanding(ctx, p, id, now); !errors.Is(err, driver.ErrNotFound) {
						t.Errorf("%s: Outstanding by %q = %v, want ErrNotFound", tc.name, p, err)
					}
					if _, err := s.Update(ctx, p, id, map[string]json.RawMessage{"k": json.RawMessage(`1`)}, now); !errors.Is(err, driver.ErrNotFound) {
						t.Errorf("%s: Update by %q = %v, want ErrNotFound", tc.name, p, err)
					}
					if _, _, err := s.Cancel(ctx, p, id, now); !errors.Is(err, driver.ErrNotFound) {
						t.Errorf("%s: Cancel by %q = %v, want ErrNotFound", tc.name, p, err)
					}
				}
				if got, err := s.Get(ctx, tc.owner, id); err != nil || got.Owner != tc.owner {
					t.Errorf("%s: Get by the owner = %+v, %v", tc.name, got, err)
				}
				if _, err := s.Outstanding(ctx, tc.owner, id, now); err != nil {
					t.Errorf("%s: Outstanding by the owner: %v", tc.name, err)
				}
				if st, ended, err := s.Cancel(ctx, tc.owner, id, now); err != nil || !ended || st != driver.StatusCancelled {
					t.Errorf("%s: Cancel by the owner = %s, %v, %v", tc.name, st, ended, err)
				}
			}
		})
	}
}
