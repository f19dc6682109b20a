package redisstore

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/pkg/queue/redisqueue"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/redis/rueidis"
)

// toEarlierFormat rewrites the task id as the store wrote it before the
// format of 2026-12-03: its journal in the list :j (j "1", or j "0" for
// none) with times as RFC 3339 text, no jn and no chunks J<n>, and every
// field at its default written out (gen lease wake att cancel of lim r
// "0", ttl).
func toEarlierFormat(t *testing.T, c rueidis.Client, s *Store, id string) {
	t.Helper()
	ctx := context.Background()
	tk, _, j, _ := s.keys(id)
	h, err := c.Do(ctx, c.B().Hgetall().Key(tk).Build()).AsStrMap()
	if err != nil {
		t.Fatal(err)
	}
	raw, ok := journalStream(h)
	if !ok {
		t.Fatalf("task %s has no jn: not in the format of 2026-12-03", id)
	}
	del := []string{"jn"}
	for k := range h {
		if len(k) > 1 && k[0] == 'J' {
			del = append(del, k)
		}
	}
	cmds := rueidis.Commands{c.B().Hdel().Key(tk).Field(del...).Build()}
	flag := "0"
	if len(raw) > 0 {
		flag = "1"
		items := make([]string, len(raw))
		for i, r := range raw {
			e, err := decodeEntry(r)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(e)
			items[i] = string(b)
		}
		cmds = append(cmds, c.B().Rpush().Key(j).Element(items...).Build(), c.B().Pexpireat().Key(j).MillisecondsTimestamp(mustInt(t, h["exp"])).Build())
	}
	created, exp := mustInt(t, h["created"]), mustInt(t, h["exp"])
	defaults := [][2]string{{"j", flag}, {"gen", "0"}, {"lease", "0"}, {"wake", "0"}, {"att", "0"}, {"cancel", "0"},
		{"of", "0"}, {"lim", "0"}, {"r", "0"}, {"ttl", strconv.FormatInt(exp-created, 10)}}
	for _, d := range defaults {
		cmds = append(cmds, c.B().Hsetnx().Key(tk).Field(d[0]).Value(d[1]).Build())
	}
	for _, r := range c.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			t.Fatal(err)
		}
	}
}

func mustInt(t *testing.T, v string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// committed creates the task nt (its ID set here; Owner, Tool and Args
// default to alice's t with {}), claims it at ch.Now and commits ch, as a
// worker's first invocation does; it returns the task's id.
func committed(t *testing.T, s *Store, nt driver.NewTask, ch *driver.Change) string {
	t.Helper()
	ctx := t.Context()
	nt.ID = driver.NewID()
	if nt.Owner == "" {
		nt.Owner, nt.Tool, nt.Args = "alice", "t", json.RawMessage(`{}`)
	}
	if _, err := s.Create(ctx, &nt); err != nil {
		t.Fatal(err)
	}
	cl, err := s.Claim(ctx, nt.ID, ch.Now, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, cl, ch); err != nil {
		t.Fatal(err)
	}
	return nt.ID
}

// From the format of 2026-12-03 a field at its default is left out of the
// task hash (the flags, the lease, the attempts, ttl as exp - created): a
// sleeping task holds none of them, and every reader sees the defaults; a
// task in the earlier format, with all of them written out, reads the
// same.
func TestDefaultsLeftOut(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			c := b.client(t)
			prefix := uniquePrefix()
			o := &Options{Prefix: prefix}
			if b.dispatches() {
				o.Queue = redisqueue.New(c, &redisqueue.Options{Key: prefix + "{queue}"})
			}
			s := New(c, o)
			ctx := t.Context()
			now := time.Now().UTC().Truncate(time.Millisecond)
			sleeping := func() string {
				zero := 0
				return committed(t, s, driver.NewTask{TTL: 90 * time.Minute, PollInterval: 2 * time.Second, Now: now},
					&driver.Change{Now: now, SetAttempts: &zero, Release: true, Sleep: true, WakeAt: now.Add(time.Hour),
						Append: []driver.Entry{{Name: "nap", Kind: driver.KindSleep, Until: now.Add(time.Hour), At: now}}})
			}
			id := sleeping()
			tk, _, _, _ := s.keys(id)
			fields, err := c.Do(ctx, c.B().Hkeys().Key(tk).Build()).AsStrSlice()
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"lease", "att", "cancel", "of", "lim", "r", "j", "ttl"} {
				if slices.Contains(fields, f) {
					t.Errorf("a sleeping task's hash holds %q (fields %s)", f, strings.Join(fields, " "))
				}
			}
			earlier := sleeping()
			toEarlierFormat(t, c, s, earlier)
			for _, id := range []string{id, earlier} {
				tk, err := s.Get(ctx, "alice", id)
				if err != nil {
					t.Fatal(err)
				}
				if tk.TTL != 90*time.Minute || tk.PollInterval != 2*time.Second || tk.CancelRequested || !tk.LeaseUntil.IsZero() ||
					!tk.WakeAt.Equal(now.Add(time.Hour)) || tk.Status != driver.StatusWorking {
					t.Errorf("Get = %+v", tk)
				}
				cl, err := s.Claim(ctx, id, now.Add(time.Hour), time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				if cl.Attempts != 1 || len(cl.Journal) != 1 || cl.Journal[0].Name != "nap" || len(cl.Responses) != 0 || cl.Task.TTL != 90*time.Minute {
					t.Errorf("Claim = %+v, journal %+v", cl, cl.Journal)
				}
				// Cancellation requested under the lease, then honoured by the
				// commit.
				if st, ended, err := s.Cancel(ctx, "alice", id, now.Add(time.Hour)); err != nil || ended || st != driver.StatusWorking {
					t.Fatalf("Cancel under a lease = %s, %v, %v", st, ended, err)
				}
				if err := s.Commit(ctx, cl, &driver.Change{Now: now.Add(time.Hour), Release: true}); err != nil {
					t.Fatal(err)
				}
				if tk, err := s.Get(ctx, "alice", id); err != nil || tk.Status != driver.StatusCancelled {
					t.Errorf("after the commit: %+v, %v", tk, err)
				}
			}
		})
	}
}
