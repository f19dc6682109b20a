package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcptasks/mcptasks/pkg/queue/redisqueue"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/redis/rueidis"
)

// The mix of live tasks the benchmark fills Redis with, each written by
// the store's own transitions (Create, then a worker's Claim and Commit)
// with the journal, status message, input requests and waits the example
// tools' handlers write when they park:
//
//   - sleeping (5 in 10): slow_compute, journaled its "start" step and
//     sleeps (working, with a wake time) for 10 minutes to a day;
//   - waiting (3 in 10): confirm_delete, parked in input_required on its
//     "confirm" elicitation, without a deadline;
//   - awaiting (2 in 10): transcode, handed its video to a service and
//     waits (working, without an invocation) for the service's callback,
//     up to its expiry.
//
// Tasks go round-robin to the principals. The fidelity check (fidelity)
// compares one filled task of each kind with one the real processes made
// through HTTP and a worker.
type kind int

const (
	sleeping kind = iota
	waiting
	awaiting
	nKinds
)

var kindNames = [nKinds]string{"sleeping (slow_compute)", "input_required (confirm_delete)", "awaiting a callback (transcode)"}

// mix is how many tasks of each kind there are in every sum(mix) tasks
// (-mix).
var mix = [nKinds]int{5, 3, 2}

// kindOf is the kind of the i-th filled task.
func kindOf(i int) kind {
	total := 0
	for _, w := range mix {
		total += w
	}
	r := i % total
	for k, w := range mix {
		if r < w {
			return kind(k)
		}
		r -= w
	}
	panic("unreachable")
}

// spec is what one filled task is made of: its tool call and how its
// first worker invocation parks it.
type spec struct {
	kind  kind
	tool  string
	args  map[string]any
	owner string
	// seconds: slow_compute's sleep; filename, video: the others' input.
	seconds  int
	filename string
	video    string
}

// specOf is the i-th filled task of principal owner.
func specOf(i int, owner string) spec { return specFor(kindOf(i), i, owner) }

// specFor is the i-th filled task of principal owner, of kind k.
func specFor(k kind, i int, owner string) spec {
	s := spec{kind: k, owner: owner}
	switch s.kind {
	case sleeping:
		s.tool, s.seconds = "slow_compute", 600+(i*7919)%86400
		s.args = map[string]any{"seconds": s.seconds, "label": "report-" + strconv.Itoa(i)}
	case waiting:
		s.tool, s.filename = "confirm_delete", fmt.Sprintf("reports/2026/q%d/summary-%d.pdf", i%4+1, i)
		s.args = map[string]any{"filename": s.filename}
	case awaiting:
		s.tool, s.video = "transcode", fmt.Sprintf("uploads/%d.mp4", i)
		s.args = map[string]any{"video": s.video, "seconds": 3600, "timeoutSeconds": 86400}
	}
	return s
}

// confirmSchema is confirm_delete's requested schema, and transcodedSchema
// the schema of transcode's callback payload (as the go-sdk infers them).
const (
	confirmSchema    = `{"type":"object","properties":{"confirm":{"type":"boolean","description":"delete the file?"}},"required":["confirm"],"additionalProperties":false}`
	transcodedSchema = `{"type":"object","properties":{"output":{"type":"string","description":"where the transcoded video is"}},"required":["output"],"additionalProperties":false}`
)

// filler writes tasks through a store.
type filler struct {
	store driver.Store
	// queue is the Redis queue the store dispatches to; visibility its
	// receipts' (a consumer's receive hides the message that long).
	queue      *redisqueue.Queue
	visibility time.Duration
	ttl        time.Duration
	poll       time.Duration
	// lease is the worker's lease of the claim.
	lease time.Duration
}

// one creates the task of s and parks it as its handler's first
// invocation does; it returns the task's id.
func (f *filler) one(ctx context.Context, s spec) (string, error) {
	args, _ := json.Marshal(s.args)
	now := time.Now()
	nt := &driver.NewTask{ID: driver.NewID(), Owner: s.owner, Tool: s.tool, Args: args, TTL: f.ttl,
		PollInterval: f.poll, Now: now, Listed: true}
	t, err := f.store.Create(ctx, nt)
	if err != nil {
		return "", fmt.Errorf("create: %w", err)
	}
	// A consumer receives the creation's message: it becomes a receipt
	// until the visibility timeout, which the worker's commit replaces.
	now = time.Now()
	if err := f.queue.Defer(ctx, nt.ID, now.Add(f.visibility)); err != nil {
		return "", fmt.Errorf("receive: %w", err)
	}
	c, err := f.store.Claim(ctx, nt.ID, now, f.lease)
	if err != nil {
		return "", fmt.Errorf("claim: %w", err)
	}
	if c.Gen == 0 {
		return "", fmt.Errorf("claim of a new task %s: no lease (%s)", nt.ID, c.Task.Status)
	}
	zero := 0
	at := fullNanos(time.Now().UTC())
	ch := &driver.Change{Now: at, SetAttempts: &zero}
	msg := ""
	switch s.kind {
	case sleeping:
		// The step's closure ran a little before it was journaled, and the
		// sleep was journaled a little after.
		ran := fullNanos(at.Add(-time.Duration(400+randInt(400)) * time.Nanosecond))
		wake := fullNanos(at.Add(time.Duration(s.seconds)*time.Second + 15*time.Microsecond))
		start, _ := json.Marshal(ran)
		ch.Append = []driver.Entry{
			{Name: "start", Kind: driver.KindDo, Value: start, At: at, Attempt: 1, Took: time.Duration(100+randInt(800)) * time.Microsecond},
			{Name: "compute", Kind: driver.KindSleep, Until: wake, At: fullNanos(wake.Add(-time.Duration(s.seconds) * time.Second))},
		}
		msg = fmt.Sprintf("computing for %ds", s.seconds)
		ch.Release, ch.Sleep, ch.WakeAt = true, true, wake
	case waiting:
		req := json.RawMessage(`{"method":"elicitation/create","params":{"mode":"form","message":` +
			strconv.Quote("Delete "+s.filename+"?") + `,"requestedSchema":` + confirmSchema + `}}`)
		v, _ := json.Marshal(map[string]json.RawMessage{"confirm": req})
		ch.Append = []driver.Entry{{Name: "confirm", Kind: driver.KindInput, Value: v, Keys: []string{"confirm"}, At: at}}
		msg = "waiting for confirmation"
		ch.Park = map[string]json.RawMessage{"confirm": req}
	case awaiting:
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		token := base64.RawURLEncoding.EncodeToString(b)
		proof := sha256.Sum256([]byte(token))
		until := t.ExpiresAt().UTC()
		v, _ := json.Marshal(map[string]string{"t": token})
		// The callback is written at once (its URL takes requests from
		// then on), the submission with the wait.
		if err := f.store.Commit(ctx, c, &driver.Change{Now: at,
			Append: []driver.Entry{{Name: "transcoded", Kind: driver.KindCallback, Value: v, Until: until, At: at}},
			Open: []driver.EventWait{{Name: "transcoded", Kind: driver.EventCallback, Proof: hex.EncodeToString(proof[:]),
				Schema: json.RawMessage(transcodedSchema), Until: until}},
		}); err != nil {
			return "", fmt.Errorf("commit: %w", err)
		}
		ch.Append = []driver.Entry{{Name: "submit", Kind: driver.KindDo, Value: json.RawMessage("true"), At: at, Attempt: 1, Took: time.Duration(100+randInt(800)) * time.Microsecond}}
		msg = "transcoding " + s.video
		ch.Release, ch.Await, ch.WakeAt = true, "transcoded", until
	}
	ch.StatusMessage = &msg
	if err := f.store.Commit(ctx, c, ch); err != nil {
		return "", fmt.Errorf("commit: %w", err)
	}
	return nt.ID, nil
}

// fullNanos is t with a nanosecond part whose last digit is not zero, as
// the wall clock's usually is: RFC 3339 times in a journal then have their
// usual length.
func fullNanos(t time.Time) time.Time {
	if t.Nanosecond()%10 == 0 {
		t = t.Add(time.Duration(1+randInt(9)) * time.Nanosecond)
	}
	return t
}

// fleet is the filled tasks: ids[p][k] are principal p's tasks of kind k.
type fleet struct {
	mu     sync.Mutex
	ids    [][nKinds][]string
	owners []string
	n      int
	// templates[p][k] are the tasks filled through the store, which
	// clone copies (read at its first call).
	templates [][nKinds][]*template
	// copies are a template and a clone of it, of each kind.
	copies [nKinds][2]string
}

func newFleet(owners []string) *fleet {
	return &fleet{ids: make([][nKinds][]string, len(owners)), owners: owners}
}

// fill adds tasks until the fleet holds n, with workers goroutines.
func (fl *fleet) fill(ctx context.Context, f *filler, n, workers int, progress func(done int)) error {
	from := fl.n
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	var done atomic.Int64
	for range workers {
		wg.Go(func() {
			type made struct {
				p  int
				k  kind
				id string
			}
			var mine []made
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					break
				}
				p := i % len(fl.owners)
				s := specOf(i/len(fl.owners), fl.owners[p])
				id, err := f.one(ctx, s)
				if err != nil {
					errs <- fmt.Errorf("filling task %d: %w", i, err)
					return
				}
				mine = append(mine, made{p, s.kind, id})
				if d := done.Add(1); progress != nil && d%50000 == 0 {
					progress(from + int(d))
				}
			}
			fl.mu.Lock()
			for _, m := range mine {
				fl.ids[m.p][m.k] = append(fl.ids[m.p][m.k], m.id)
			}
			fl.mu.Unlock()
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	fl.n = n
	return nil
}

// random returns a random live task of principal p (any kind, by the mix).
func (fl *fleet) random(p int) string {
	ids := fl.ids[p][kindOf(randInt(1<<20))]
	return ids[randInt(len(ids))]
}

func randInt(n int) int { return mrand.IntN(n) }

// keysOf are the keys of task id (its hash tag), sorted.
func (r *redisServer) keysOf(ctx context.Context, id string) []string {
	var keys []string
	var cursor uint64
	for {
		e, err := r.c.Do(ctx, r.c.B().Scan().Cursor(cursor).Match("*{"+id+"}*").Count(10000).Build()).AsScanEntry()
		if err != nil {
			panic(err)
		}
		keys = append(keys, e.Elements...)
		if cursor = e.Cursor; cursor == 0 {
			break
		}
	}
	slices.Sort(keys)
	return keys
}

// shape describes how a task sits in Redis, without what differs between
// two tasks made alike (its id, its times, random tokens).
type shape struct {
	keys    []string          // suffixes of its keys, with type and encoding
	bytes   map[string]int64  // MEMORY USAGE by suffix
	fields  map[string]string // key suffix -> its hash fields (names), its entries' members
	indexed []string          // the sorted sets that hold its id
	// scores are its scores in them, in seconds from its creation.
	scores map[string]float64
	ttls   map[string]int64 // key suffix -> PTTL, relative to the task's TTL
}

// shapeOf reads the shape of task id, whose TTL is ttl.
func (r *redisServer) shapeOf(ctx context.Context, prefix, id string, ttl time.Duration, ix *indexes) shape {
	sh := shape{bytes: map[string]int64{}, fields: map[string]string{}, ttls: map[string]int64{}, scores: map[string]float64{}}
	for _, k := range r.keysOf(ctx, id) {
		suffix := strings.TrimPrefix(k, prefix+"{"+id+"}")
		typ, _ := r.c.Do(ctx, r.c.B().Type().Key(k).Build()).ToString()
		enc, _ := r.c.Do(ctx, r.c.B().ObjectEncoding().Key(k).Build()).ToString()
		sh.keys = append(sh.keys, suffix+" "+typ+"/"+enc)
		sh.bytes[suffix] = r.memoryUsage(k)
		pttl, _ := r.c.Do(ctx, r.c.B().Pttl().Key(k).Build()).AsInt64()
		sh.ttls[suffix] = pttl - ttl.Milliseconds()
		switch typ {
		case "hash":
			m, _ := r.c.Do(ctx, r.c.B().Hgetall().Key(k).Build()).AsStrMap()
			var names []string
			chunks := map[int]string{}
			for f, v := range m {
				// The journal's chunks (redisstore/journal.go): compared
				// as the entries they make.
				if n, err := strconv.Atoi(strings.TrimPrefix(f, "J")); err == nil && f[0] == 'J' {
					chunks[n] = v
					continue
				}
				names = append(names, f+"="+valueShape(f, v))
			}
			slices.Sort(names)
			sh.fields[suffix] = strings.Join(names, " ")
			if len(chunks) > 0 {
				var stream strings.Builder
				for i := range len(chunks) {
					stream.WriteString(chunks[i])
				}
				sh.fields[suffix+" journal"] = entriesShape(strings.Split(strings.TrimSuffix(stream.String(), "\n"), "\n"))
			}
		case "list":
			l, _ := r.c.Do(ctx, r.c.B().Lrange().Key(k).Start(0).Stop(-1).Build()).AsStrSlice()
			sh.fields[suffix] = entriesShape(l)
		}
	}
	// Each index entry with its score relative to the task's creation, in
	// seconds (a receipt keeps its ".5").
	created, _ := r.c.Do(ctx, r.c.B().Hget().Key(prefix+"{"+id+"}").Field("created").Build()).AsInt64()
	// A stream entry only by its presence: one behind its stream's top
	// goes after it (redisstore's streamindex.go).
	for _, z := range ix.all() {
		if sc, ok := ix.scoreOf(ctx, z, id); ok {
			name := ix.name(prefix, z)
			if sc != float64(int64(sc)) {
				name += " (receipt)"
			}
			sh.indexed = append(sh.indexed, name)
			if !ix.isStream(z) {
				sh.scores[name] = (sc - float64(created)) / 1000
			}
		}
	}
	return sh
}

// entriesShape is what the fidelity check compares of journal entries:
// their members, with valueShape of their values.
func entriesShape(l []string) string {
	var entries []string
	for _, e := range l {
		var m map[string]json.RawMessage
		_ = json.Unmarshal([]byte(e), &m)
		var names []string
		for f, v := range m {
			names = append(names, f+"="+valueShape(f, string(v)))
		}
		slices.Sort(names)
		entries = append(entries, "{"+strings.Join(names, " ")+"}")
	}
	return strings.Join(entries, " ")
}

// valueShape is what the fidelity check compares of a field's value: the
// value itself, but for times, ids and tokens only their length.
func valueShape(field, v string) string {
	switch field {
	case "d": // how long a step took
		return "duration"
	case "t", "u": // times, RFC 3339 with nanoseconds (trailing zeros cut)
		return "time"
	case "v":
		var t time.Time
		if json.Unmarshal([]byte(v), &t) == nil {
			return "time"
		}
		return "len" + strconv.Itoa(len(v))
	case "jn": // the journal's chunks: times' trailing zeros may make one more
		return "chunks"
	case "created", "updated", "exp", "wake", "lease", "transcoded", "args", "msg", "confirm":
		return "len" + strconv.Itoa(len(v))
	}
	return v
}

// fidelity compares the shape of a filled task with one of the same kind
// the real processes made, and returns the differences.
func fidelity(real, filled shape) []string {
	var diffs []string
	if !slices.Equal(real.keys, filled.keys) {
		diffs = append(diffs, fmt.Sprintf("keys %v, filled %v", real.keys, filled.keys))
	}
	for k, v := range real.fields {
		if filled.fields[k] != v {
			diffs = append(diffs, fmt.Sprintf("key %q: %s\n  filled: %s", k, v, filled.fields[k]))
		}
	}
	for k, b := range real.bytes {
		// Within an allocator's size class or two: the same content a few
		// bytes longer or shorter (a time's trailing zeros) may cross one,
		// and a hash table's buckets grow by powers of two.
		if d := filled.bytes[k] - b; d < -128 || d > 128 {
			diffs = append(diffs, fmt.Sprintf("key %q: MEMORY USAGE %d, filled %d", k, b, filled.bytes[k]))
		}
	}
	for k, d := range real.ttls {
		if e := filled.ttls[k] - d; e < -60000 || e > 60000 {
			diffs = append(diffs, fmt.Sprintf("key %q: TTL %+dms of the task's, filled %+dms", k, d, filled.ttls[k]))
		}
	}
	if !slices.Equal(real.indexed, filled.indexed) {
		diffs = append(diffs, fmt.Sprintf("indexed in %v, filled in %v", real.indexed, filled.indexed))
	}
	for z, sc := range real.scores {
		// Within the seconds a worker may take to claim a task here.
		if d := filled.scores[z] - sc; d < -5 || d > 5 {
			diffs = append(diffs, fmt.Sprintf("%s: scored %+.1fs from its creation, filled %+.1fs", z, sc, filled.scores[z]))
		}
	}
	return diffs
}

// purge deletes tasks the measurements created (with their index
// entries), so that the next size starts from the fleet alone.
func (r *redisServer) purge(ctx context.Context, prefix string, ids []string, ix *indexes) {
	for len(ids) > 0 {
		batch := ids[:min(len(ids), 500)]
		ids = ids[len(batch):]
		var cmds rueidis.Commands
		for _, id := range batch {
			base := prefix + "{" + id + "}"
			cmds = append(cmds, r.c.B().Del().Key(base, base+":p", base+":j", base+":r", base+":o", base+":x", base+":e", base+":f1", base+":a", base+":m").Build())
		}
		for _, z := range ix.zsets {
			cmds = append(cmds, r.c.B().Zrem().Key(z).Member(batch...).Build())
		}
		for _, z := range ix.streams {
			var at []string
			for _, id := range batch {
				if e, ok := ix.entryOf(ctx, z, id); ok {
					at = append(at, e)
				}
			}
			if len(at) > 0 {
				cmds = append(cmds, r.c.B().Xdel().Key(z).Id(at...).Build())
			}
		}
		for _, res := range r.c.DoMulti(ctx, cmds...) {
			if err := res.Error(); err != nil {
				panic(err)
			}
		}
	}
}

// template is a task written through the store, which clones copy: its
// keys (DUMP payloads, absolute expiry) and its index entries.
type template struct {
	id   string
	keys []struct {
		suffix, payload string
		expireAt        int64
	}
	// scores by sorted set (only those that hold the task).
	scores map[string]float64
}

// templateOf reads task id's keys and index entries.
func (r *redisServer) templateOf(ctx context.Context, prefix, id string, ix *indexes) (*template, error) {
	t := &template{id: id, scores: map[string]float64{}}
	for _, suffix := range taskSuffixes {
		key := prefix + "{" + id + "}" + suffix
		res := r.c.DoMulti(ctx, r.c.B().Dump().Key(key).Build(), r.c.B().Pexpiretime().Key(key).Build())
		payload, err := res[0].ToString()
		if rueidis.IsRedisNil(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		at, err := res[1].AsInt64()
		if err != nil || at <= 0 {
			return nil, fmt.Errorf("key %s: no expiry (%d, %v)", key, at, err)
		}
		t.keys = append(t.keys, struct {
			suffix, payload string
			expireAt        int64
		}{suffix, payload, at})
	}
	for _, z := range ix.all() {
		if sc, ok := ix.scoreOf(ctx, z, id); ok {
			t.scores[z] = sc
		}
	}
	return t, nil
}

// clone adds tasks until the fleet holds n, each a copy of one of the
// tasks filled through the store (its keys restored under a new id with
// the same expiry, its index entries added with the same scores): byte
// for byte what the store wrote, made many times faster. Nothing in a
// task's values names its id. Each principal's list index is then cut to
// maxListed, and the index of all tasks to maxIndexed, as the store's
// creations keep them.
func (fl *fleet) clone(ctx context.Context, r *redisServer, prefix string, ix *indexes, n, workers, maxListed, maxIndexed int, progress func(int)) error {
	if fl.templates == nil {
		// The templates: every task filled through the store so far.
		fl.templates = make([][nKinds][]*template, len(fl.owners))
		for p := range fl.owners {
			for k := range nKinds {
				for _, id := range fl.ids[p][k] {
					t, err := r.templateOf(ctx, prefix, id, ix)
					if err != nil {
						return fmt.Errorf("template %s: %w", id, err)
					}
					fl.templates[p][k] = append(fl.templates[p][k], t)
				}
			}
		}
	}
	const chunk = 500
	from := fl.n
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for {
				lo := int(next.Add(chunk) - chunk)
				if lo >= n {
					return
				}
				hi := min(lo+chunk, n)
				var cmds rueidis.Commands
				adds := map[string][]struct {
					score float64
					id    string
				}{}
				made := make([]struct {
					p  int
					k  kind
					id string
				}, 0, hi-lo)
				for i := lo; i < hi; i++ {
					p := i % len(fl.owners)
					j := i / len(fl.owners)
					k := kindOf(j)
					ts := fl.templates[p][k]
					t := ts[j%len(ts)]
					id := driver.NewID()
					for _, key := range t.keys {
						cmds = append(cmds, r.c.B().Restore().Key(prefix+"{"+id+"}"+key.suffix).Ttl(key.expireAt).
							SerializedValue(key.payload).Absttl().Build())
					}
					for z, sc := range t.scores {
						adds[z] = append(adds[z], struct {
							score float64
							id    string
						}{sc, id})
					}
					made = append(made, struct {
						p  int
						k  kind
						id string
					}{p, k, id})
					if p == 0 {
						fl.mu.Lock()
						if fl.copies[k][0] == "" {
							fl.copies[k] = [2]string{t.id, id}
						}
						fl.mu.Unlock()
					}
				}
				var streamAdds []rueidis.LuaExec
				for z, ms := range adds {
					if ix.isStream(z) {
						ex := rueidis.LuaExec{Keys: []string{z}}
						for _, m := range ms {
							ex.Args = append(ex.Args, strconv.FormatInt(int64(m.score), 10), m.id)
						}
						streamAdds = append(streamAdds, ex)
						continue
					}
					cmd := r.c.B().Zadd().Key(z).ScoreMember()
					for _, m := range ms {
						cmd = cmd.ScoreMember(m.score, m.id)
					}
					cmds = append(cmds, cmd.Build())
				}
				for _, res := range append(r.c.DoMulti(ctx, cmds...), streamAddLua.ExecMulti(ctx, r.c, streamAdds...)...) {
					if err := res.Error(); err != nil {
						errs <- fmt.Errorf("cloning: %w", err)
						return
					}
				}
				fl.mu.Lock()
				for _, m := range made {
					fl.ids[m.p][m.k] = append(fl.ids[m.p][m.k], m.id)
				}
				fl.mu.Unlock()
				if progress != nil && (hi/chunk)%100 == 0 {
					progress(hi)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	// The creations' trims (redisstore's list.go and listall.go): about
	// the newest maxListed, or maxIndexed, entries (whole listpacks go; a
	// creation trims the few its addition puts over, this trim all at once:
	// LIMIT 0).
	for _, z := range ix.streams {
		keep := maxIndexed
		if strings.Contains(z, "list:") {
			keep = maxListed
		}
		if err := r.c.Do(ctx, r.c.B().Xtrim().Key(z).Maxlen().Almost().Threshold(strconv.Itoa(keep)).Limit(0).Build()).Error(); err != nil {
			return err
		}
	}
	clear(ix.entries)
	fl.n = n
	return nil
}
