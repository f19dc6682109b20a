// Package storetest is the behavioural contract of a [driver.Store], written
// once and run against every backend.
//
// A backend's test calls [Run] with a constructor that returns a store
// private to the calling (sub)test: an empty key space, or at least one that
// no other test writes to. Every subtest uses fresh task ids from
// [driver.NewID].
//
// Most Store methods take the caller's clock (now). The suite uses it to
// move through lease expiry, sleeps and input deadlines without sleeping.
// Only TTL expiry is enforced by the backend on its own (real) clock, so the
// TTL case creates a task with a short TTL on the real clock and polls with a
// generous deadline. No case asserts how long anything takes.
//
// Timestamps are expected back with at least millisecond precision: the
// suite uses millisecond-aligned times and compares them exactly.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
)

// Principals and durations the suite works with.
const (
	owner    = "iss-a|alice"
	stranger = "iss-a|mallory"
	ttl      = time.Hour
	poll     = 2 * time.Second
	lease    = time.Minute
	tool     = "send_report"

	// racers is the number of goroutines in each race.
	racers = 50
)

// Run runs the Store contract as subtests of t. newStore is called once per
// subtest and must return a store that no other test writes to.
func Run(t *testing.T, newStore func(t *testing.T) driver.Store) {
	cases := []struct {
		name string
		fn   func(f *fixture)
	}{
		{"CreateGetRoundTrip", testCreateGet},
		{"GetInvisible", testGetInvisible},
		{"ForeignIDs", testForeignIDs},
		{"CreateDuplicate", testCreateDuplicate},
		{"CreateSeedsJournalAndResponses", testCreateSeeded},
		{"TTLExpiry", testTTL},
		{"ClaimFresh", testClaimFresh},
		{"ClaimWhileLeased", testClaimWhileLeased},
		{"ClaimAfterLeaseExpiryFencesStaleClaim", testStaleClaim},
		{"JournalAppendOrder", testJournalOrder},
		{"SetAttempts", testSetAttempts},
		{"StatusMessage", testStatusMessage},
		{"TerminalClearsStatusMessage", testTerminalClearsStatusMessage},
		{"ReleaseSleepingTask", testSleeping},
		{"Park", testPark},
		{"UpdatePartialThenResume", testUpdatePartial},
		{"UpdateAllAtOnce", testUpdateAll},
		{"UpdateParkAny", testUpdateAny},
		{"UpdatePastDeadline", testUpdatePastDeadline},
		{"UpdateResumeIsDue", testUpdateResumeIsDue},
		{"Reschedule", testReschedule},
		{"RescheduleVsResume", testRescheduleVsResume},
		{"UpdateNotParked", testUpdateNotParked},
		{"UpdateCancelByOthers", testUpdateCancelByOthers},
		{"UpdateByOthersLeavesDueIndex", testUpdateByOthersLeavesDueIndex},
		{"CancelParked", testCancelParked},
		{"CancelUnleased", testCancelUnleased},
		{"CancelLeased", testCancelLeased},
		{"CancelRequestedThenLeaseExpired", testCancelThenLeaseExpired},
		{"CancelReportsEnded", testCancelReportsEnded},
		{"Terminal", testTerminal},
		{"DueSchedule", testDueSchedule},
		{"RaceUpdateCancelComplete", testRaceUpdateCancelComplete},
		{"CommitWithoutLeaseFenced", testCommitWithoutLease},
		{"RaceClaim", testRaceClaim},
		{"LiveLimit", testLiveLimit},
		{"LiveLimitRace", testLiveLimitRace},
		{"OfferWhileWorking", testOfferWhileWorking},
		{"OfferSleep", testOfferSleep},
		{"SleepWithoutOffers", testSleepWithoutOffers},
		{"OfferAnsweredBeforeSleep", testOfferAnsweredBeforeSleep},
		{"OfferWithdrawn", testOfferWithdrawn},
		{"OfferWhileParked", testOfferWhileParked},
		{"OfferLateAnswers", testOfferLateAnswers},
		{"OfferEnds", testOfferEnds},
		{"ClaimPastDeadlineIsWorking", testClaimPastDeadline},
		{"ClaimReportsLostLease", testClaimReportsLost},
		{"RenewLeaseExtends", testRenewExtends},
		{"RenewLeaseFencing", testRenewFencing},
		{"RenewLeaseAfterRelease", testRenewAfterRelease},
		{"RenewLeaseUnknown", testRenewUnknown},
		{"List", testList},
		{"ListAll", testListAll},
		{"Outstanding", testOutstanding},
		{"CallbackOnce", testCallbackOnce},
		{"AwaitResumes", testAwaitResumes},
		{"AwaitDelivered", testAwaitDelivered},
		{"WaitTimeout", testWaitTimeout},
		{"SignalBuffered", testSignalBuffered},
		{"EventsEnd", testEventsEnd},
		{"ForkJoin", testForkJoin},
		{"BranchLease", testBranchLease},
		{"ForkCancel", testForkCancel},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.fn(&fixture{
				t:   t,
				s:   newStore(t),
				ctx: t.Context(),
				now: time.Now().UTC().Truncate(time.Millisecond),
			})
		})
	}
}

// fixture is one subtest's store and clock.
type fixture struct {
	t   *testing.T
	s   driver.Store
	ctx context.Context
	now time.Time // millisecond-aligned, close to the real clock
}

// at returns the fixture's clock moved by d.
func (f *fixture) at(d time.Duration) time.Time { return f.now.Add(d) }

func (f *fixture) newTask() *driver.NewTask {
	return &driver.NewTask{
		ID:           driver.NewID(),
		Owner:        owner,
		Tool:         tool,
		Args:         json.RawMessage(`{"to":"ops","n":3}`),
		TTL:          ttl,
		PollInterval: poll,
		Now:          f.now,
	}
}

// create creates a fresh task owned by owner and returns its id.
func (f *fixture) create() string {
	f.t.Helper()
	nt := f.newTask()
	if _, err := f.s.Create(f.ctx, nt); err != nil {
		f.t.Fatalf("Create: %v", err)
	}
	return nt.ID
}

func (f *fixture) get(id string) *driver.Task {
	f.t.Helper()
	tk, err := f.s.Get(f.ctx, owner, id)
	if err != nil {
		f.t.Fatalf("Get(%s): %v", id, err)
	}
	return tk
}

// claim claims id at now and requires a lease.
func (f *fixture) claim(id string, now time.Time) *driver.Claim {
	f.t.Helper()
	c, err := f.s.Claim(f.ctx, id, now, lease)
	if err != nil {
		f.t.Fatalf("Claim(%s): %v", id, err)
	}
	if c.Gen <= 0 {
		f.t.Fatalf("Claim(%s): Gen = %d (status %s), want a lease (Gen > 0)", id, c.Gen, c.Task.Status)
	}
	return c
}

// claimNoLease claims id at now and requires the answer without a lease.
func (f *fixture) claimNoLease(id string, now time.Time) *driver.Claim {
	f.t.Helper()
	c, err := f.s.Claim(f.ctx, id, now, lease)
	if err != nil {
		f.t.Fatalf("Claim(%s): %v", id, err)
	}
	if c.Gen != 0 {
		f.t.Fatalf("Claim(%s): Gen = %d, want 0 (no lease)", id, c.Gen)
	}
	if c.Task == nil {
		f.t.Fatalf("Claim(%s): nil Task", id)
	}
	return c
}

func (f *fixture) commit(c *driver.Claim, ch *driver.Change) {
	f.t.Helper()
	if err := f.s.Commit(f.ctx, c, ch); err != nil {
		f.t.Fatalf("Commit(%s): %v", c.Task.ID, err)
	}
}

func (f *fixture) commitFenced(c *driver.Claim, ch *driver.Change) {
	f.t.Helper()
	if err := f.s.Commit(f.ctx, c, ch); !errors.Is(err, driver.ErrFenced) {
		f.t.Fatalf("Commit(%s) = %v, want ErrFenced", c.Task.ID, err)
	}
}

// park creates a task, claims it and parks it for reqs; it returns the id
// and the (still current) claim.
func (f *fixture) park(reqs map[string]json.RawMessage, anyKey bool, deadline time.Time) (string, *driver.Claim) {
	f.t.Helper()
	id := f.create()
	c := f.claim(id, f.now)
	f.commit(c, &driver.Change{Now: f.now, Park: reqs, ParkAny: anyKey, WakeAt: deadline})
	if c.Task.Status != driver.StatusInputRequired {
		f.t.Fatalf("after Park: claim status = %s, want input_required", c.Task.Status)
	}
	return id, c
}

func (f *fixture) update(id string, resp map[string]json.RawMessage, now time.Time) bool {
	f.t.Helper()
	resumed, err := f.s.Update(f.ctx, owner, id, resp, now)
	if err != nil {
		f.t.Fatalf("Update(%s): %v", id, err)
	}
	return resumed
}

func (f *fixture) cancel(id string, now time.Time) driver.Status {
	f.t.Helper()
	st, _ := f.cancelEnded(id, now)
	return st
}

// cancelEnded cancels id as its owner and returns the status afterwards
// and whether this call ended the task.
func (f *fixture) cancelEnded(id string, now time.Time) (driver.Status, bool) {
	f.t.Helper()
	st, ended, err := f.s.Cancel(f.ctx, owner, id, now)
	if err != nil {
		f.t.Fatalf("Cancel(%s): %v", id, err)
	}
	if ended && st != driver.StatusCancelled {
		f.t.Errorf("Cancel(%s) = %s and ended: a cancel that ends a task makes it cancelled", id, st)
	}
	return st, ended
}

func (f *fixture) wantStatus(id string, want driver.Status) *driver.Task {
	f.t.Helper()
	tk := f.get(id)
	if tk.Status != want {
		f.t.Fatalf("Get(%s).Status = %s, want %s", id, tk.Status, want)
	}
	return tk
}

// dueSlack is how long after its attention time (lease end, wake time) a
// live task may wait to show up in Due: room for a backend's grace period.
const dueSlack = 10 * time.Minute

// wantDue requires id among the tasks Due reports by attention time at
// (plus dueSlack): a live task that the sweeper cannot find is lost when
// its worker or its queue message dies.
func (f *fixture) wantDue(id string, at time.Time, why string) {
	f.t.Helper()
	ids, err := dueIDs(f, at.Add(dueSlack), 10000)
	if err != nil {
		f.t.Fatalf("Due: %v", err)
	}
	if !slices.Contains(ids, id) {
		f.t.Errorf("%s: task not in Due(%v): the sweeper would never recover it", why, at.Add(dueSlack))
	}
}

func (f *fixture) wantInputRequests(id string, want map[string]json.RawMessage) {
	f.t.Helper()
	tk := f.get(id)
	if !rawMapEqual(tk.InputRequests, want) {
		f.t.Fatalf("Get(%s).InputRequests = %s, want %s", id, fmtRawMap(tk.InputRequests), fmtRawMap(want))
	}
}

func (f *fixture) wantResponses(c *driver.Claim, want map[string]json.RawMessage) {
	f.t.Helper()
	if !rawMapEqual(c.Responses, want) {
		f.t.Fatalf("Claim(%s).Responses = %s, want %s", c.Task.ID, fmtRawMap(c.Responses), fmtRawMap(want))
	}
}

// jsonEqual reports whether a and b are the same JSON value (a store may
// re-encode JSON; it must not change its meaning).
func jsonEqual(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return string(a) == string(b)
	}
	return reflect.DeepEqual(x, y)
}

func rawMapEqual(a, b map[string]json.RawMessage) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || !jsonEqual(v, w) {
			return false
		}
	}
	return true
}

func fmtRawMap(m map[string]json.RawMessage) string {
	keys := slices.Sorted(maps.Keys(m))
	s := "{"
	for i, k := range keys {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s: %s", k, m[k])
	}
	return s + "}"
}

func entriesEqual(a, b []driver.Entry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Name != y.Name || x.Kind != y.Kind || !jsonEqual(x.Value, y.Value) || x.Err != y.Err ||
			!x.Until.Equal(y.Until) || !slices.Equal(x.Keys, y.Keys) || x.Any != y.Any {
			return false
		}
	}
	return true
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

// requests is a typical pair of outstanding input requests.
func requests() map[string]json.RawMessage {
	return map[string]json.RawMessage{
		"confirm": raw(`{"method":"elicitation/create","params":{"message":"Send it?"}}`),
		"pick":    raw(`{"method":"elicitation/create","params":{"message":"Which one?"}}`),
	}
}

// --- cases ---

func testCreateGet(f *fixture) {
	nt := f.newTask()
	nt.TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	created, err := f.s.Create(f.ctx, nt)
	if err != nil {
		f.t.Fatalf("Create: %v", err)
	}
	check := func(what string, tk *driver.Task) {
		f.t.Helper()
		if tk.ID != nt.ID || tk.Owner != owner || tk.Tool != tool {
			f.t.Errorf("%s: ID/Owner/Tool = %q/%q/%q, want %q/%q/%q", what, tk.ID, tk.Owner, tk.Tool, nt.ID, owner, tool)
		}
		if tk.Status != driver.StatusWorking {
			f.t.Errorf("%s: Status = %s, want working", what, tk.Status)
		}
		if !tk.CreatedAt.Equal(f.now) || !tk.UpdatedAt.Equal(f.now) {
			f.t.Errorf("%s: CreatedAt/UpdatedAt = %v/%v, want %v", what, tk.CreatedAt, tk.UpdatedAt, f.now)
		}
		if tk.TTL != ttl || tk.PollInterval != poll {
			f.t.Errorf("%s: TTL/PollInterval = %v/%v, want %v/%v", what, tk.TTL, tk.PollInterval, ttl, poll)
		}
		if !tk.ExpiresAt().Equal(f.now.Add(ttl)) {
			f.t.Errorf("%s: ExpiresAt = %v, want %v", what, tk.ExpiresAt(), f.now.Add(ttl))
		}
		if tk.TraceParent != nt.TraceParent {
			f.t.Errorf("%s: TraceParent = %q, want %q", what, tk.TraceParent, nt.TraceParent)
		}
	}
	check("Create", created)
	got := f.get(nt.ID)
	check("Get", got)
	if !jsonEqual(got.Args, nt.Args) {
		f.t.Errorf("Get: Args = %s, want %s", got.Args, nt.Args)
	}
	if got.StatusMessage != "" || got.Result != nil || got.Error != nil || len(got.InputRequests) != 0 ||
		got.CancelRequested || !got.LeaseUntil.IsZero() || !got.WakeAt.IsZero() {
		f.t.Errorf("Get: a new task carries state: %+v", got)
	}
	peek, err := f.s.Peek(f.ctx, nt.ID)
	if err != nil {
		f.t.Fatalf("Peek: %v", err)
	}
	check("Peek", peek)
}

func testGetInvisible(f *fixture) {
	id := f.create()
	for _, who := range []string{stranger, ""} {
		if _, err := f.s.Get(f.ctx, who, id); !errors.Is(err, driver.ErrNotFound) {
			f.t.Errorf("Get by %q = %v, want ErrNotFound", who, err)
		}
	}
	unknown := driver.NewID()
	if _, err := f.s.Get(f.ctx, owner, unknown); !errors.Is(err, driver.ErrNotFound) {
		f.t.Errorf("Get of an unknown id = %v, want ErrNotFound", err)
	}
	if _, err := f.s.Peek(f.ctx, unknown); !errors.Is(err, driver.ErrNotFound) {
		f.t.Errorf("Peek of an unknown id = %v, want ErrNotFound", err)
	}
	if _, err := f.s.Claim(f.ctx, unknown, f.now, lease); !errors.Is(err, driver.ErrNotFound) {
		f.t.Errorf("Claim of an unknown id = %v, want ErrNotFound", err)
	}
	// The owner still sees it.
	f.wantStatus(id, driver.StatusWorking)
}

// foreignIDs are ids NewID never issues: a store must not take them for
// task ids (they could name other keys that share its key space).
var foreignIDs = []string{
	"", "queue", "due", "{queue}", "x}:p", driver.NewID() + "x", driver.NewID()[1:],
	"AAAAAAAAAAAAAAAAAAAAAB", // 22 characters, but not 16 bytes
	"AAAAAAAAAAAAAAAAAAAA.A", // outside the alphabet
}

// An id that ValidID rejects names no task: Create refuses it and every
// other operation answers ErrNotFound.
func testForeignIDs(f *fixture) {
	for _, id := range foreignIDs {
		if driver.ValidID(id) {
			f.t.Fatalf("ValidID(%q) = true", id)
		}
		nt := f.newTask()
		nt.ID = id
		if _, err := f.s.Create(f.ctx, nt); err == nil {
			f.t.Errorf("Create(%q) succeeded, want an error", id)
		}
		if _, err := f.s.Get(f.ctx, owner, id); !errors.Is(err, driver.ErrNotFound) {
			f.t.Errorf("Get(%q) = %v, want ErrNotFound", id, err)
		}
		if _, err := f.s.Peek(f.ctx, id); !errors.Is(err, driver.ErrNotFound) {
			f.t.Errorf("Peek(%q) = %v, want ErrNotFound", id, err)
		}
		if _, err := f.s.Update(f.ctx, owner, id, map[string]json.RawMessage{"k": raw(`1`)}, f.now); !errors.Is(err, driver.ErrNotFound) {
			f.t.Errorf("Update(%q) = %v, want ErrNotFound", id, err)
		}
		if _, _, err := f.s.Cancel(f.ctx, owner, id, f.now); !errors.Is(err, driver.ErrNotFound) {
			f.t.Errorf("Cancel(%q) = %v, want ErrNotFound", id, err)
		}
		if _, err := f.s.Claim(f.ctx, id, f.now, lease); !errors.Is(err, driver.ErrNotFound) {
			f.t.Errorf("Claim(%q) = %v, want ErrNotFound", id, err)
		}
		c := &driver.Claim{Task: &driver.Task{ID: id, Owner: owner}, Gen: 1}
		if err := f.s.Commit(f.ctx, c, &driver.Change{Now: f.now, Complete: raw(`{}`)}); !errors.Is(err, driver.ErrNotFound) {
			f.t.Errorf("Commit(%q) = %v, want ErrNotFound", id, err)
		}
	}
	if !driver.ValidID(driver.NewID()) {
		f.t.Fatalf("ValidID rejects an id from NewID")
	}
}

func testCreateDuplicate(f *fixture) {
	nt := f.newTask()
	if _, err := f.s.Create(f.ctx, nt); err != nil {
		f.t.Fatalf("Create: %v", err)
	}
	dup := *nt
	dup.Owner, dup.Tool, dup.Args = stranger, "other_tool", raw(`{"evil":true}`)
	if _, err := f.s.Create(f.ctx, &dup); !errors.Is(err, driver.ErrExists) {
		f.t.Fatalf("duplicate Create = %v, want ErrExists", err)
	}
	got := f.get(nt.ID)
	if got.Owner != owner || got.Tool != tool || !jsonEqual(got.Args, nt.Args) {
		f.t.Errorf("duplicate Create changed the task: owner %q tool %q args %s", got.Owner, got.Tool, got.Args)
	}
	if _, err := f.s.Get(f.ctx, stranger, nt.ID); !errors.Is(err, driver.ErrNotFound) {
		f.t.Errorf("Get by the duplicate's owner = %v, want ErrNotFound", err)
	}
}

func testCreateSeeded(f *fixture) {
	nt := f.newTask()
	nt.Journal = []driver.Entry{
		{Name: "fetch", Kind: driver.KindDo, Value: raw(`{"rows":[1,2]}`)},
		{Name: "confirm", Kind: driver.KindInput, Keys: []string{"confirm"}},
	}
	nt.Responses = map[string]json.RawMessage{"confirm": raw(`{"action":"accept"}`)}
	if _, err := f.s.Create(f.ctx, nt); err != nil {
		f.t.Fatalf("Create: %v", err)
	}
	c := f.claim(nt.ID, f.now)
	if !entriesEqual(c.Journal, nt.Journal) {
		f.t.Errorf("Claim.Journal = %+v, want the seeded %+v", c.Journal, nt.Journal)
	}
	f.wantResponses(c, nt.Responses)
}

func testTTL(f *fixture) {
	// TTL expiry runs on the store's own clock: use the real one.
	const short = 2 * time.Second
	nt := f.newTask()
	nt.TTL = short
	nt.Now = time.Now()
	created, err := f.s.Create(f.ctx, nt)
	if err != nil {
		f.t.Fatalf("Create: %v", err)
	}
	// Touch every kind of state the task can have before it expires.
	c, err := f.s.Claim(f.ctx, nt.ID, time.Now(), lease)
	if err != nil {
		f.t.Fatalf("Claim right after Create: %v", err)
	}
	if err := f.s.Commit(f.ctx, c, &driver.Change{Now: time.Now(),
		Append: []driver.Entry{{Name: "a", Kind: driver.KindDo, Value: raw(`1`)}},
		Park:   map[string]json.RawMessage{"k": raw(`{}`)}}); err != nil {
		f.t.Fatalf("Commit right after Create: %v", err)
	}
	expires := created.ExpiresAt()
	deadline := time.Now().Add(short + 15*time.Second)
	seen := false
	for {
		_, err := f.s.Get(f.ctx, owner, nt.ID)
		// Taken after the answer: a "not found" that arrived before the
		// expiry time proves the task vanished early.
		after := time.Now()
		if err == nil {
			seen = true
		} else if errors.Is(err, driver.ErrNotFound) {
			if after.Before(expires) {
				f.t.Fatalf("task gone at %v, before it expires at %v", after, expires)
			}
			break
		} else {
			f.t.Fatalf("Get: %v", err)
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("task still readable at %v, long after it expired at %v", time.Now(), expires)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !seen {
		f.t.Fatalf("task never readable during its TTL")
	}
	if _, err := f.s.Peek(f.ctx, nt.ID); !errors.Is(err, driver.ErrNotFound) {
		f.t.Errorf("Peek after expiry = %v, want ErrNotFound", err)
	}
	if _, err := f.s.Claim(f.ctx, nt.ID, time.Now(), lease); !errors.Is(err, driver.ErrNotFound) {
		f.t.Errorf("Claim after expiry = %v, want ErrNotFound", err)
	}
	if _, err := f.s.Update(f.ctx, owner, nt.ID, map[string]json.RawMessage{"k": raw(`1`)}, time.Now()); !errors.Is(err, driver.ErrNotFound) {
		f.t.Errorf("Update after expiry = %v, want ErrNotFound", err)
	}
	if _, _, err := f.s.Cancel(f.ctx, owner, nt.ID, time.Now()); !errors.Is(err, driver.ErrNotFound) {
		f.t.Errorf("Cancel after expiry = %v, want ErrNotFound", err)
	}
}

func testClaimFresh(f *fixture) {
	id := f.create()
	c := f.claim(id, f.now)
	if c.Attempts != 1 {
		f.t.Errorf("Attempts = %d, want 1", c.Attempts)
	}
	if len(c.Journal) != 0 || len(c.Responses) != 0 {
		f.t.Errorf("Journal/Responses = %v/%v, want empty", c.Journal, c.Responses)
	}
	tk := c.Task
	if tk.ID != id || tk.Owner != owner || tk.Tool != tool || tk.Status != driver.StatusWorking || !jsonEqual(tk.Args, raw(`{"to":"ops","n":3}`)) {
		f.t.Errorf("Claim.Task = %+v, want the created task in working", tk)
	}
	if !tk.LeaseUntil.Equal(f.at(lease)) {
		f.t.Errorf("Claim.Task.LeaseUntil = %v, want %v", tk.LeaseUntil, f.at(lease))
	}
	if got := f.get(id); !got.LeaseUntil.Equal(f.at(lease)) || got.Status != driver.StatusWorking {
		f.t.Errorf("Get after Claim: status %s LeaseUntil %v, want working, %v", got.Status, got.LeaseUntil, f.at(lease))
	}
	ok, err := f.s.CancelRequested(f.ctx, c)
	if err != nil || ok {
		f.t.Errorf("CancelRequested on a fresh claim = %v, %v; want false, nil", ok, err)
	}
	f.wantDue(id, tk.LeaseUntil, "a leased task")
}

func testClaimWhileLeased(f *fixture) {
	id := f.create()
	c := f.claim(id, f.now)
	for _, at := range []time.Time{f.now, f.at(lease / 2), f.at(lease - time.Millisecond)} {
		if _, err := f.s.Claim(f.ctx, id, at, lease); !errors.Is(err, driver.ErrLeased) {
			f.t.Errorf("Claim at %v while leased until %v = %v, want ErrLeased", at, c.Task.LeaseUntil, err)
		}
	}
	f.wantDue(id, c.Task.LeaseUntil, "after refused claims")
	// A refused claim takes nothing away from the holder.
	f.commit(c, &driver.Change{Now: f.at(time.Second), Append: []driver.Entry{{Name: "s", Kind: driver.KindDo, Value: raw(`"x"`)}}})
}

func testStaleClaim(f *fixture) {
	id := f.create()
	c1 := f.claim(id, f.now)
	c2 := f.claim(id, f.at(lease+time.Millisecond))
	if c2.Gen <= c1.Gen {
		f.t.Errorf("second Gen %d, want > first Gen %d", c2.Gen, c1.Gen)
	}
	if c2.Attempts != 2 {
		f.t.Errorf("second claim Attempts = %d, want 2 (each claim charges one)", c2.Attempts)
	}
	msg := "stale writer"
	later := f.at(lease + time.Second)
	stale := []struct {
		name string
		ch   *driver.Change
	}{
		{"keep", &driver.Change{Now: later, Append: []driver.Entry{{Name: "x", Kind: driver.KindDo, Value: raw(`1`)}}, StatusMessage: &msg}},
		{"complete", &driver.Change{Now: later, Complete: raw(`{"content":[]}`)}},
		{"fail", &driver.Change{Now: later, Fail: &driver.ErrorObject{Code: -32603, Message: "stale"}}},
		{"cancel", &driver.Change{Now: later, Cancel: true}},
		{"release", &driver.Change{Now: later, Release: true}},
		{"park", &driver.Change{Now: later, Park: map[string]json.RawMessage{"k": raw(`{}`)}}},
	}
	for _, st := range stale {
		f.commitFenced(c1, st.ch)
		// A fenced write changes nothing, the sweeper's index included:
		// if the live holder dies, the task must still be found.
		f.wantDue(id, c2.Task.LeaseUntil, "after a fenced "+st.name+" commit")
	}
	got := f.wantStatus(id, driver.StatusWorking)
	if got.StatusMessage != "" || got.Result != nil || got.Error != nil || len(got.InputRequests) != 0 ||
		!got.UpdatedAt.Equal(f.now) || !got.LeaseUntil.Equal(c2.Task.LeaseUntil) {
		f.t.Errorf("fenced commits changed the task: %+v", got)
	}
	// The live claim still works, and sees none of the stale journal.
	f.commit(c2, &driver.Change{Now: later, Release: true})
	c3 := f.claim(id, later)
	if len(c3.Journal) != 0 {
		f.t.Errorf("journal after fenced appends = %+v, want empty", c3.Journal)
	}
	if c3.Gen <= c2.Gen {
		f.t.Errorf("third Gen %d, want > second Gen %d", c3.Gen, c2.Gen)
	}
}

func testJournalOrder(f *fixture) {
	id := f.create()
	until := f.at(time.Hour)
	e := []driver.Entry{
		{Name: "fetch", Kind: driver.KindDo, Value: raw(`{"rows":[1,2,3]}`)},
		{Name: "flaky", Kind: driver.KindDo, Err: "gave up"},
		{Name: "nap", Kind: driver.KindSleep, Until: until},
		{Name: "ask", Kind: driver.KindInput, Keys: []string{"a", "b"}, Any: true, Until: until},
		{Name: "send", Kind: driver.KindDo, Value: raw(`"ok"`)},
	}
	c := f.claim(id, f.now)
	f.commit(c, &driver.Change{Now: f.now, Append: e[:2]})
	if !entriesEqual(c.Journal, e[:2]) {
		f.t.Fatalf("claim journal after first commit = %+v, want %+v", c.Journal, e[:2])
	}
	f.commit(c, &driver.Change{Now: f.now, Append: e[2:4]})
	f.commit(c, &driver.Change{Now: f.now, Append: e[4:], Release: true})
	if !entriesEqual(c.Journal, e) {
		f.t.Fatalf("claim journal after commits = %+v, want %+v", c.Journal, e)
	}
	next := f.claim(id, f.now)
	if !entriesEqual(next.Journal, e) {
		f.t.Fatalf("next Claim journal = %+v, want %+v", next.Journal, e)
	}
}

func testSetAttempts(f *fixture) {
	id := f.create()
	c := f.claim(id, f.now)
	five := 5
	f.commit(c, &driver.Change{Now: f.now, SetAttempts: &five})
	if c.Attempts != 5 {
		f.t.Errorf("claim Attempts after SetAttempts(5) = %d, want 5", c.Attempts)
	}
	f.commit(c, &driver.Change{Now: f.now, Release: true})
	c = f.claim(id, f.now)
	if c.Attempts != 6 {
		f.t.Errorf("Attempts on the claim after SetAttempts(5) = %d, want 6", c.Attempts)
	}
	zero := 0
	f.commit(c, &driver.Change{Now: f.now, SetAttempts: &zero, Release: true})
	c = f.claim(id, f.now)
	if c.Attempts != 1 {
		f.t.Errorf("Attempts on the claim after SetAttempts(0) = %d, want 1", c.Attempts)
	}
}

func testStatusMessage(f *fixture) {
	id := f.create()
	c := f.claim(id, f.now)
	msg := "fetched 3 rows"
	f.commit(c, &driver.Change{Now: f.at(time.Second), StatusMessage: &msg})
	if c.Task.StatusMessage != msg || c.Task.Status != driver.StatusWorking {
		f.t.Errorf("claim after commit: status %s message %q, want working %q", c.Task.Status, c.Task.StatusMessage, msg)
	}
	got := f.wantStatus(id, driver.StatusWorking)
	if got.StatusMessage != msg || !got.UpdatedAt.Equal(f.at(time.Second)) || !got.CreatedAt.Equal(f.now) {
		f.t.Errorf("Get: message %q updated %v created %v, want %q %v %v",
			got.StatusMessage, got.UpdatedAt, got.CreatedAt, msg, f.at(time.Second), f.now)
	}
	// A commit without StatusMessage keeps it.
	f.commit(c, &driver.Change{Now: f.at(2 * time.Second), Release: true})
	if got := f.get(id); got.StatusMessage != msg {
		f.t.Errorf("StatusMessage after a commit without one = %q, want %q", got.StatusMessage, msg)
	}
}

// A task that ends shows no status message of its running days: every
// terminal transition clears it, unless a Commit that asks for the terminal
// state sets one with it.
func testTerminalClearsStatusMessage(f *fixture) {
	running, done := "waiting for confirmation", "sent to 3 recipients"
	started := func(f *fixture) (string, *driver.Claim) {
		f.t.Helper()
		id := f.create()
		c := f.claim(id, f.now)
		f.commit(c, &driver.Change{Now: f.now, StatusMessage: &running})
		return id, c
	}
	want := func(f *fixture, id string, st driver.Status, msg string, c *driver.Claim) {
		f.t.Helper()
		if got := f.wantStatus(id, st); got.StatusMessage != msg {
			f.t.Errorf("%s task: StatusMessage %q, want %q", st, got.StatusMessage, msg)
		}
		if c != nil && c.Task.StatusMessage != msg {
			f.t.Errorf("%s task: the claim's StatusMessage %q, want %q", st, c.Task.StatusMessage, msg)
		}
	}
	cases := []struct {
		name string
		run  func(f *fixture)
	}{
		{"Complete", func(f *fixture) {
			id, c := started(f)
			f.commit(c, &driver.Change{Now: f.at(time.Second), Complete: raw(`{}`)})
			want(f, id, driver.StatusCompleted, "", c)
		}},
		{"CompleteWithMessage", func(f *fixture) {
			id, c := started(f)
			f.commit(c, &driver.Change{Now: f.at(time.Second), Complete: raw(`{}`), StatusMessage: &done})
			want(f, id, driver.StatusCompleted, done, c)
		}},
		{"Fail", func(f *fixture) {
			id, c := started(f)
			f.commit(c, &driver.Change{Now: f.at(time.Second), Fail: &driver.ErrorObject{Code: -32603, Message: "boom"}})
			want(f, id, driver.StatusFailed, "", c)
		}},
		{"CommitCancel", func(f *fixture) {
			id, c := started(f)
			f.commit(c, &driver.Change{Now: f.at(time.Second), Cancel: true})
			want(f, id, driver.StatusCancelled, "", c)
		}},
		{"CancelParked", func(f *fixture) {
			id, c := started(f)
			f.commit(c, &driver.Change{Now: f.now, Park: requests()})
			f.cancel(id, f.at(time.Second))
			want(f, id, driver.StatusCancelled, "", nil)
		}},
		{"CancelRequestedThenCommit", func(f *fixture) {
			id, c := started(f)
			f.cancel(id, f.at(time.Second))
			want(f, id, driver.StatusWorking, running, nil) // still running
			next := "next part"
			f.commit(c, &driver.Change{Now: f.at(2 * time.Second), Release: true, StatusMessage: &next})
			want(f, id, driver.StatusCancelled, "", c)
		}},
		{"CancelRequestedThenClaim", func(f *fixture) {
			id, _ := started(f)
			f.cancel(id, f.at(time.Second))
			nc := f.claimNoLease(id, f.at(lease+time.Millisecond))
			want(f, id, driver.StatusCancelled, "", nc)
		}},
	}
	for _, c := range cases {
		f.t.Run(c.name, func(t *testing.T) { c.run(&fixture{t: t, s: f.s, ctx: f.ctx, now: f.now}) })
	}
}

func testSleeping(f *fixture) {
	id := f.create()
	c := f.claim(id, f.now)
	wake := f.at(10 * time.Minute)
	f.commit(c, &driver.Change{Now: f.now, Release: true, WakeAt: wake})
	got := f.wantStatus(id, driver.StatusWorking)
	if !got.WakeAt.Equal(wake) || !got.LeaseUntil.IsZero() {
		f.t.Errorf("Get after Release: WakeAt %v LeaseUntil %v, want %v and none", got.WakeAt, got.LeaseUntil, wake)
	}
	f.wantDue(id, wake, "a sleeping task")
	nc := f.claimNoLease(id, f.at(time.Minute))
	if nc.Task.Status != driver.StatusWorking || !nc.Task.WakeAt.Equal(wake) {
		f.t.Errorf("Claim of a sleeping task: status %s WakeAt %v, want working %v", nc.Task.Status, nc.Task.WakeAt, wake)
	}
	f.wantDue(id, wake, "a sleeping task after an early Claim")
	// At its wake time it runs again.
	c = f.claim(id, wake)
	if c.Gen <= 0 {
		f.t.Errorf("Claim at WakeAt: Gen %d", c.Gen)
	}
}

func testPark(f *fixture) {
	reqs := requests()
	id, c := f.park(reqs, false, time.Time{})
	got := f.wantStatus(id, driver.StatusInputRequired)
	if !rawMapEqual(got.InputRequests, reqs) {
		f.t.Errorf("InputRequests = %s, want %s", fmtRawMap(got.InputRequests), fmtRawMap(reqs))
	}
	if !got.LeaseUntil.IsZero() || !got.WakeAt.IsZero() {
		f.t.Errorf("parked task: LeaseUntil %v WakeAt %v, want none", got.LeaseUntil, got.WakeAt)
	}
	// Parked without a deadline: no claim, at any time.
	for _, at := range []time.Time{f.now, f.at(lease + time.Millisecond), f.at(ttl / 2)} {
		nc := f.claimNoLease(id, at)
		if nc.Task.Status != driver.StatusInputRequired || !nc.Task.WakeAt.IsZero() {
			f.t.Errorf("Claim of a parked task at %v: status %s WakeAt %v, want input_required, none", at, nc.Task.Status, nc.Task.WakeAt)
		}
	}
	ok, err := f.s.CancelRequested(f.ctx, c)
	if err != nil || ok {
		f.t.Errorf("CancelRequested after Park = %v, %v; want false, nil", ok, err)
	}
}

func testUpdatePartial(f *fixture) {
	reqs := requests()
	id, _ := f.park(reqs, false, time.Time{})
	if f.update(id, map[string]json.RawMessage{"confirm": raw(`{"action":"accept"}`)}, f.at(time.Second)) {
		f.t.Errorf("Update of one of two keys resumed the task")
	}
	f.wantStatus(id, driver.StatusInputRequired)
	f.wantInputRequests(id, map[string]json.RawMessage{"pick": reqs["pick"]})
	if got := f.get(id); !got.UpdatedAt.Equal(f.at(time.Second)) {
		f.t.Errorf("UpdatedAt after an accepted Update = %v, want %v", got.UpdatedAt, f.at(time.Second))
	}

	// Already answered and unknown keys are ignored.
	if f.update(id, map[string]json.RawMessage{
		"confirm": raw(`{"action":"decline"}`),
		"nosuch":  raw(`{"x":1}`),
	}, f.at(2*time.Second)) {
		f.t.Errorf("Update of answered/unknown keys resumed the task")
	}
	f.wantStatus(id, driver.StatusInputRequired)
	f.wantInputRequests(id, map[string]json.RawMessage{"pick": reqs["pick"]})
	nc := f.claimNoLease(id, f.at(2*time.Second))
	if nc.Task.Status != driver.StatusInputRequired {
		f.t.Errorf("Claim while one key is outstanding: status %s", nc.Task.Status)
	}

	// The last key resumes it.
	if !f.update(id, map[string]json.RawMessage{"pick": raw(`{"choice":2}`)}, f.at(3*time.Second)) {
		f.t.Errorf("Update of the last key did not resume the task")
	}
	f.wantStatus(id, driver.StatusWorking)
	f.wantInputRequests(id, nil)
	f.wantDue(id, f.at(3*time.Second), "a task resumed by Update")
	// Late answers are ignored too.
	if f.update(id, map[string]json.RawMessage{"pick": raw(`{"choice":9}`)}, f.at(4*time.Second)) {
		f.t.Errorf("Update of a resumed task reported resumed")
	}
	c := f.claim(id, f.at(4*time.Second))
	f.wantResponses(c, map[string]json.RawMessage{
		"confirm": raw(`{"action":"accept"}`),
		"pick":    raw(`{"choice":2}`),
	})
}

func testUpdateAll(f *fixture) {
	id, _ := f.park(requests(), false, time.Time{})
	resp := map[string]json.RawMessage{"confirm": raw(`true`), "pick": raw(`"b"`)}
	if !f.update(id, resp, f.now) {
		f.t.Errorf("Update of every key did not resume the task")
	}
	f.wantStatus(id, driver.StatusWorking)
	f.wantResponses(f.claim(id, f.now), resp)
}

func testUpdateAny(f *fixture) {
	id, _ := f.park(requests(), true, time.Time{})
	if !f.update(id, map[string]json.RawMessage{"pick": raw(`"first"`)}, f.now) {
		f.t.Fatalf("ParkAny: the first answer did not resume the task")
	}
	f.wantStatus(id, driver.StatusWorking)
	f.wantInputRequests(id, nil)
	// The other request was withdrawn: answering it now is ignored.
	if f.update(id, map[string]json.RawMessage{"confirm": raw(`true`)}, f.now) {
		f.t.Errorf("answer to a withdrawn request resumed the task again")
	}
	f.wantResponses(f.claim(id, f.now), map[string]json.RawMessage{"pick": raw(`"first"`)})
}

func testUpdatePastDeadline(f *fixture) {
	reqs := requests()
	deadline := f.at(time.Minute)
	id, _ := f.park(reqs, false, deadline)
	if got := f.get(id); !got.WakeAt.Equal(deadline) {
		f.t.Errorf("parked WakeAt = %v, want %v", got.WakeAt, deadline)
	}
	// Before the deadline: answers count, and there is nothing to claim.
	if f.update(id, map[string]json.RawMessage{"confirm": raw(`true`)}, f.at(10*time.Second)) {
		f.t.Errorf("Update of one of two keys resumed the task")
	}
	nc := f.claimNoLease(id, f.at(30*time.Second))
	if nc.Task.Status != driver.StatusInputRequired || !nc.Task.WakeAt.Equal(deadline) {
		f.t.Errorf("Claim before the deadline: status %s WakeAt %v, want input_required %v", nc.Task.Status, nc.Task.WakeAt, deadline)
	}
	// After the deadline: refused.
	late := deadline.Add(time.Millisecond)
	resumed, err := f.s.Update(f.ctx, owner, id, map[string]json.RawMessage{"pick": raw(`"late"`)}, late)
	if resumed {
		f.t.Errorf("Update past the deadline resumed the task (err %v)", err)
	}
	if errors.Is(err, driver.ErrNotFound) {
		f.t.Errorf("Update past the deadline = ErrNotFound; the task exists")
	}
	f.wantStatus(id, driver.StatusInputRequired)
	f.wantInputRequests(id, map[string]json.RawMessage{"pick": reqs["pick"]})
	// The worker claims it to handle the timeout, and sees only the answer
	// given in time.
	c := f.claim(id, late)
	f.wantResponses(c, map[string]json.RawMessage{"confirm": raw(`true`)})
	// An endpoint whose clock runs behind the worker's still cannot slip an
	// answer in once a worker has claimed the task past its deadline: the
	// replay would otherwise see a response its first run did not.
	if f.update(id, map[string]json.RawMessage{"pick": raw(`"behind"`)}, f.at(10*time.Second)) {
		f.t.Errorf("Update from a clock behind the deadline resumed a task claimed past it")
	}
	c2 := f.claim(id, late.Add(time.Hour))
	f.wantResponses(c2, map[string]json.RawMessage{"confirm": raw(`true`)})
}

// A resuming update makes the task due for the sweeper at once, in the
// same atomic step as far as recovery goes: if the caller's enqueue is then
// lost, the sweeper still finds the task.
func testUpdateResumeIsDue(f *fixture) {
	id, _ := f.park(map[string]json.RawMessage{"k": raw(`{"method":"elicitation/create"}`)}, false, time.Time{})
	if !f.update(id, map[string]json.RawMessage{"k": raw(`{"action":"accept"}`)}, f.at(time.Second)) {
		f.t.Fatalf("Update of the only key did not resume the task")
	}
	f.wantDue(id, f.at(time.Second), "after a resuming update")
}

func testUpdateNotParked(f *fixture) {
	id := f.create()
	if f.update(id, map[string]json.RawMessage{"confirm": raw(`true`)}, f.now) {
		f.t.Errorf("Update of a working task reported resumed")
	}
	f.wantStatus(id, driver.StatusWorking)
	f.wantResponses(f.claim(id, f.now), nil)
}

func testUpdateCancelByOthers(f *fixture) {
	reqs := requests()
	id, _ := f.park(reqs, false, time.Time{})
	resp := map[string]json.RawMessage{"confirm": raw(`true`), "pick": raw(`"x"`)}
	for _, who := range []string{stranger, ""} {
		if _, err := f.s.Update(f.ctx, who, id, resp, f.now); !errors.Is(err, driver.ErrNotFound) {
			f.t.Errorf("Update by %q = %v, want ErrNotFound", who, err)
		}
		if _, _, err := f.s.Cancel(f.ctx, who, id, f.now); !errors.Is(err, driver.ErrNotFound) {
			f.t.Errorf("Cancel by %q = %v, want ErrNotFound", who, err)
		}
	}
	unknown := driver.NewID()
	if _, err := f.s.Update(f.ctx, owner, unknown, resp, f.now); !errors.Is(err, driver.ErrNotFound) {
		f.t.Errorf("Update of an unknown id = %v, want ErrNotFound", err)
	}
	if _, _, err := f.s.Cancel(f.ctx, owner, unknown, f.now); !errors.Is(err, driver.ErrNotFound) {
		f.t.Errorf("Cancel of an unknown id = %v, want ErrNotFound", err)
	}
	// Nothing changed.
	f.wantStatus(id, driver.StatusInputRequired)
	f.wantInputRequests(id, reqs)
	if got := f.get(id); got.CancelRequested {
		f.t.Errorf("a stranger's Cancel set CancelRequested")
	}
}

// Only the owner's update may move a task's entry in the due index: an
// update by anyone else (refused as not found) leaves it where it was.
// (The task is parked with a deadline: one parked without a deadline has
// no attention time before its expiry, and a store may leave it out of
// Due until an answer resumes it.)
func testUpdateByOthersLeavesDueIndex(f *fixture) {
	reqs := requests()
	id, _ := f.park(reqs, false, f.at(ttl/2))
	before := dueAt(f, id, f.at(2*ttl))
	resp := map[string]json.RawMessage{"confirm": raw(`true`), "pick": raw(`"x"`)}
	for _, who := range []string{stranger, ""} {
		if _, err := f.s.Update(f.ctx, who, id, resp, f.at(time.Second)); !errors.Is(err, driver.ErrNotFound) {
			f.t.Errorf("Update by %q = %v, want ErrNotFound", who, err)
		}
		if after := dueAt(f, id, f.at(2*ttl)); !after.Equal(before) {
			f.t.Errorf("Update by %q moved the owner's due time from %v to %v", who, before, after)
		}
	}
	f.wantStatus(id, driver.StatusInputRequired)
	f.wantInputRequests(id, reqs)
}

func testCancelParked(f *fixture) {
	id, c := f.park(requests(), false, f.at(time.Hour))
	if st := f.cancel(id, f.at(time.Second)); st != driver.StatusCancelled {
		f.t.Fatalf("Cancel of a parked task = %s, want cancelled", st)
	}
	got := f.wantStatus(id, driver.StatusCancelled)
	if len(got.InputRequests) != 0 {
		f.t.Errorf("cancelled task still has InputRequests %s", fmtRawMap(got.InputRequests))
	}
	if f.update(id, map[string]json.RawMessage{"confirm": raw(`true`)}, f.at(2*time.Second)) {
		f.t.Errorf("Update of a cancelled task resumed it")
	}
	f.commitFenced(c, &driver.Change{Now: f.at(2 * time.Second), Release: true})
	nc := f.claimNoLease(id, f.at(2*time.Hour))
	if nc.Task.Status != driver.StatusCancelled {
		f.t.Errorf("Claim of a cancelled task: status %s", nc.Task.Status)
	}
	f.wantStatus(id, driver.StatusCancelled)
}

func testCancelUnleased(f *fixture) {
	f.t.Run("Queued", func(t *testing.T) {
		f := &fixture{t: t, s: f.s, ctx: f.ctx, now: f.now}
		id := f.create()
		if st := f.cancel(id, f.now); st != driver.StatusCancelled {
			t.Fatalf("Cancel of a queued task = %s, want cancelled", st)
		}
		f.wantStatus(id, driver.StatusCancelled)
		if nc := f.claimNoLease(id, f.now); nc.Task.Status != driver.StatusCancelled {
			t.Errorf("Claim of a cancelled task: status %s", nc.Task.Status)
		}
	})
	f.t.Run("Sleeping", func(t *testing.T) {
		f := &fixture{t: t, s: f.s, ctx: f.ctx, now: f.now}
		id := f.create()
		c := f.claim(id, f.now)
		f.commit(c, &driver.Change{Now: f.now, Release: true, WakeAt: f.at(time.Hour)})
		if st := f.cancel(id, f.at(time.Second)); st != driver.StatusCancelled {
			t.Fatalf("Cancel of a sleeping task = %s, want cancelled", st)
		}
		f.wantStatus(id, driver.StatusCancelled)
		f.commitFenced(c, &driver.Change{Now: f.at(time.Second), Release: true})
	})
	f.t.Run("LeaseExpired", func(t *testing.T) {
		f := &fixture{t: t, s: f.s, ctx: f.ctx, now: f.now}
		id := f.create()
		c := f.claim(id, f.now)
		if st := f.cancel(id, f.at(lease+time.Millisecond)); st != driver.StatusCancelled {
			t.Fatalf("Cancel of a task whose lease expired = %s, want cancelled", st)
		}
		f.wantStatus(id, driver.StatusCancelled)
		f.commitFenced(c, &driver.Change{Now: f.at(lease + time.Second), Complete: raw(`{}`)})
		f.wantStatus(id, driver.StatusCancelled)
	})
}

func testCancelLeased(f *fixture) {
	msg := "still going"
	ends := []struct {
		name string
		ch   func(now time.Time) *driver.Change
	}{
		{"Keep", func(now time.Time) *driver.Change {
			return &driver.Change{Now: now, Append: []driver.Entry{{Name: "s", Kind: driver.KindDo, Value: raw(`1`)}}, StatusMessage: &msg}
		}},
		{"Release", func(now time.Time) *driver.Change { return &driver.Change{Now: now, Release: true} }},
		{"ReleaseWithWake", func(now time.Time) *driver.Change {
			return &driver.Change{Now: now, Release: true, WakeAt: now.Add(time.Hour)}
		}},
		{"Park", func(now time.Time) *driver.Change {
			return &driver.Change{Now: now, Park: requests()}
		}},
	}
	for _, e := range ends {
		f.t.Run(e.name, func(t *testing.T) {
			f := &fixture{t: t, s: f.s, ctx: f.ctx, now: f.now}
			id := f.create()
			c := f.claim(id, f.now)
			st := f.cancel(id, f.at(time.Second))
			if st.Terminal() {
				t.Fatalf("Cancel of a leased task = %s, want its non-terminal status", st)
			}
			if st != driver.StatusWorking {
				t.Errorf("Cancel of a leased task = %s, want working", st)
			}
			got := f.wantStatus(id, driver.StatusWorking)
			if !got.CancelRequested {
				t.Errorf("Get after Cancel: CancelRequested false")
			}
			peek, err := f.s.Peek(f.ctx, id)
			if err != nil || !peek.CancelRequested {
				t.Errorf("Peek after Cancel: %v, CancelRequested=%v; want true", err, peek != nil && peek.CancelRequested)
			}
			ok, err := f.s.CancelRequested(f.ctx, c)
			if err != nil || !ok {
				t.Errorf("Store.CancelRequested = %v, %v; want true", ok, err)
			}
			f.wantDue(id, c.Task.LeaseUntil, "a leased task with cancellation requested")
			// Asking again changes nothing.
			if st := f.cancel(id, f.at(2*time.Second)); st != driver.StatusWorking {
				t.Errorf("second Cancel = %s, want working", st)
			}
			f.commit(c, e.ch(f.at(3*time.Second)))
			if c.Task.Status != driver.StatusCancelled {
				t.Errorf("claim status after the holder's commit = %s, want cancelled", c.Task.Status)
			}
			tk := f.wantStatus(id, driver.StatusCancelled)
			if len(tk.InputRequests) != 0 {
				t.Errorf("cancelled task has InputRequests %s", fmtRawMap(tk.InputRequests))
			}
			if st := f.cancel(id, f.at(4*time.Second)); st != driver.StatusCancelled {
				t.Errorf("Cancel after cancellation = %s, want cancelled", st)
			}
			f.commitFenced(c, &driver.Change{Now: f.at(4 * time.Second), Complete: raw(`{}`)})
		})
	}
}

func testCancelThenLeaseExpired(f *fixture) {
	id := f.create()
	c := f.claim(id, f.now)
	if st := f.cancel(id, f.at(time.Second)); st != driver.StatusWorking {
		f.t.Fatalf("Cancel of a leased task = %s, want working", st)
	}
	// The holder died; the next claim finds the request and ends the task.
	nc := f.claimNoLease(id, f.at(lease+time.Millisecond))
	if nc.Task.Status != driver.StatusCancelled {
		f.t.Fatalf("Claim after the lease expired: status %s, want cancelled", nc.Task.Status)
	}
	f.wantStatus(id, driver.StatusCancelled)
	f.commitFenced(c, &driver.Change{Now: f.at(lease + time.Second), Release: true})
	f.wantStatus(id, driver.StatusCancelled)
}

// Cancel and Claim say when they made a task terminal themselves (the
// engine logs that transition once); asking again, or a task that ended
// otherwise, reports nothing ended.
func testCancelReportsEnded(f *fixture) {
	id, _ := f.park(requests(), false, time.Time{})
	if st, ended := f.cancelEnded(id, f.at(time.Second)); st != driver.StatusCancelled || !ended {
		f.t.Errorf("Cancel of a parked task = %s, ended %v; want cancelled, ended", st, ended)
	}
	if _, ended := f.cancelEnded(id, f.at(2*time.Second)); ended {
		f.t.Errorf("a second Cancel reported ending the task")
	}

	id = f.create()
	c := f.claim(id, f.now)
	if st, ended := f.cancelEnded(id, f.at(time.Second)); st != driver.StatusWorking || ended {
		f.t.Errorf("Cancel of a leased task = %s, ended %v; want working, not ended", st, ended)
	}
	if c.Ended {
		f.t.Errorf("a lease-taking Claim reported Ended")
	}
	nc := f.claimNoLease(id, f.at(lease+time.Millisecond))
	if nc.Task.Status != driver.StatusCancelled || !nc.Ended {
		f.t.Errorf("Claim after the lease expired: %s, Ended %v; want cancelled, Ended", nc.Task.Status, nc.Ended)
	}
	if again := f.claimNoLease(id, f.at(lease+time.Second)); again.Ended {
		f.t.Errorf("a second Claim of the cancelled task reported Ended")
	}

	id = f.create()
	c = f.claim(id, f.now)
	f.commit(c, &driver.Change{Now: f.now, Complete: raw(`{}`)})
	if st, ended := f.cancelEnded(id, f.at(time.Second)); st != driver.StatusCompleted || ended {
		f.t.Errorf("Cancel of a completed task = %s, ended %v; want completed, not ended", st, ended)
	}
}

func testTerminal(f *fixture) {
	result := raw(`{"content":[{"type":"text","text":"done"}],"isError":false}`)
	failure := &driver.ErrorObject{Code: -32603, Message: "boom", Data: raw(`{"step":"fetch"}`)}
	ends := []struct {
		name string
		ch   driver.Change
		want driver.Status
	}{
		{"Complete", driver.Change{Complete: result}, driver.StatusCompleted},
		{"Fail", driver.Change{Fail: failure}, driver.StatusFailed},
		{"Cancel", driver.Change{Cancel: true}, driver.StatusCancelled},
	}
	for _, e := range ends {
		f.t.Run(e.name, func(t *testing.T) {
			f := &fixture{t: t, s: f.s, ctx: f.ctx, now: f.now}
			id := f.create()
			c := f.claim(id, f.now)
			ch := e.ch
			ch.Now = f.at(time.Second)
			f.commit(c, &ch)
			if c.Task.Status != e.want {
				t.Errorf("claim status after commit = %s, want %s", c.Task.Status, e.want)
			}
			check := func(when string) {
				t.Helper()
				got := f.wantStatus(id, e.want)
				if !got.UpdatedAt.Equal(f.at(time.Second)) {
					t.Errorf("%s: UpdatedAt = %v, want %v", when, got.UpdatedAt, f.at(time.Second))
				}
				if !got.LeaseUntil.IsZero() || !got.WakeAt.IsZero() || len(got.InputRequests) != 0 {
					t.Errorf("%s: terminal task keeps LeaseUntil %v / WakeAt %v / InputRequests %v", when, got.LeaseUntil, got.WakeAt, got.InputRequests)
				}
				switch e.want {
				case driver.StatusCompleted:
					if !jsonEqual(got.Result, result) || got.Error != nil {
						t.Errorf("%s: Result %s Error %v, want %s and none", when, got.Result, got.Error, result)
					}
				case driver.StatusFailed:
					if got.Error == nil || got.Error.Code != failure.Code || got.Error.Message != failure.Message ||
						!jsonEqual(got.Error.Data, failure.Data) || got.Result != nil {
						t.Errorf("%s: Error %+v Result %s, want %+v and none", when, got.Error, got.Result, failure)
					}
				default:
					if got.Result != nil || got.Error != nil {
						t.Errorf("%s: cancelled task has Result %s / Error %v", when, got.Result, got.Error)
					}
				}
			}
			check("after the commit")

			later := f.at(lease + time.Hour)
			if st := f.cancel(id, f.at(2*time.Second)); st != e.want {
				t.Errorf("Cancel of a %s task = %s", e.want, st)
			}
			if st := f.cancel(id, later); st != e.want {
				t.Errorf("Cancel of a %s task later = %s", e.want, st)
			}
			if f.update(id, map[string]json.RawMessage{"confirm": raw(`true`)}, f.at(2*time.Second)) {
				t.Errorf("Update of a %s task resumed it", e.want)
			}
			for _, ch := range []driver.Change{
				{Release: true}, {Complete: raw(`{"content":[]}`)}, {Fail: &driver.ErrorObject{Code: 1, Message: "x"}},
				{Cancel: true}, {Park: requests()}, {Append: []driver.Entry{{Name: "z", Kind: driver.KindDo}}},
			} {
				ch.Now = f.at(3 * time.Second)
				f.commitFenced(c, &ch)
			}
			for _, at := range []time.Time{f.at(3 * time.Second), later} {
				nc := f.claimNoLease(id, at)
				if nc.Task.Status != e.want {
					t.Errorf("Claim of a %s task at %v: status %s", e.want, at, nc.Task.Status)
				}
			}
			check("after every later attempt")
		})
	}
}

func testCommitWithoutLease(f *fixture) {
	// The lease-less answers Claim gives (parked, sleeping, terminal) are
	// not claims: a Commit with one is fenced and changes nothing.
	parked, _ := f.park(requests(), false, time.Time{})
	sleeping := f.create()
	c := f.claim(sleeping, f.now)
	f.commit(c, &driver.Change{Now: f.now, Release: true, WakeAt: f.at(time.Hour)})
	done := f.create()
	c = f.claim(done, f.now)
	f.commit(c, &driver.Change{Now: f.now, Complete: raw(`{"content":[]}`)})
	for _, tc := range []struct {
		id   string
		want driver.Status
	}{{parked, driver.StatusInputRequired}, {sleeping, driver.StatusWorking}, {done, driver.StatusCompleted}} {
		nc := f.claimNoLease(tc.id, f.at(time.Second))
		nc.Task.ID = tc.id
		before := f.get(tc.id)
		msg := "sneaky"
		for _, ch := range []driver.Change{
			{Complete: raw(`{"content":[],"sneaky":true}`)}, {Release: true}, {StatusMessage: &msg},
			{Append: []driver.Entry{{Name: "z", Kind: driver.KindDo}}},
		} {
			ch.Now = f.at(2 * time.Second)
			f.commitFenced(nc, &ch)
		}
		after := f.get(tc.id)
		if after.Status != tc.want || after.StatusMessage != before.StatusMessage ||
			!after.UpdatedAt.Equal(before.UpdatedAt) || !jsonEqual(after.Result, before.Result) {
			f.t.Errorf("commit with a lease-less claim changed task %s: %+v, was %+v", tc.id, after, before)
		}
	}
}

// dueIDs lists the ids Due reports.
func dueIDs(f *fixture, at time.Time, limit int) ([]string, error) {
	due, err := f.s.Due(f.ctx, at, limit)
	ids := make([]string, len(due))
	for i, d := range due {
		ids[i] = d.ID
	}
	return ids, err
}

// dueAt returns the due time Due reports for id by at, as a sweeper reads
// it; the task must be there.
func dueAt(f *fixture, id string, at time.Time) time.Time {
	f.t.Helper()
	due, err := f.s.Due(f.ctx, at, 10000)
	if err != nil {
		f.t.Fatalf("Due: %v", err)
	}
	for _, d := range due {
		if d.ID == id {
			return d.At
		}
	}
	f.t.Fatalf("task %s not in Due(%v)", id, at)
	return time.Time{}
}

// Reschedule is a compare-and-set: it moves a due time only from the one
// Due reported, so a sweeper never overwrites a newer time.
func testReschedule(f *fixture) {
	id := f.create()
	seen := dueAt(f, id, f.at(time.Hour))
	// A transition sets a new time; the sweeper's stale reschedule loses.
	if err := f.s.Schedule(f.ctx, id, f.at(time.Minute)); err != nil {
		f.t.Fatal(err)
	}
	if ok, err := f.s.Reschedule(f.ctx, id, seen, f.at(24*time.Hour)); err != nil || ok {
		f.t.Errorf("stale Reschedule = %v, %v; want refused", ok, err)
	}
	f.wantDue(id, f.at(time.Minute), "after a refused stale reschedule")
	// From the current time it applies, and a zero target removes it.
	if ok, err := f.s.Reschedule(f.ctx, id, f.at(time.Minute).Truncate(time.Millisecond), f.at(2*time.Minute)); err != nil || !ok {
		f.t.Errorf("Reschedule from the current time = %v, %v; want applied", ok, err)
	}
	if ok, err := f.s.Reschedule(f.ctx, id, f.at(2*time.Minute).Truncate(time.Millisecond), time.Time{}); err != nil || !ok {
		f.t.Errorf("Reschedule to zero = %v, %v; want applied", ok, err)
	}
	if ids, _ := dueIDs(f, f.at(time.Hour), 1000); slices.Contains(ids, id) {
		f.t.Errorf("task still due after Reschedule to zero")
	}
}

// A sweeper that read a parked task's due time before an update resumed it
// must not push the resumed task's time back (its compare-and-set fails),
// and updates of unknown tasks leave no trace in the due index. (Parked
// with a deadline, so that it has a due time: see
// testUpdateByOthersLeavesDueIndex.)
func testRescheduleVsResume(f *fixture) {
	id, _ := f.park(map[string]json.RawMessage{"a": raw(`{}`), "b": raw(`{}`)}, false, f.at(ttl/2))
	f.update(id, map[string]json.RawMessage{"a": raw(`{"action":"accept"}`)}, f.at(time.Second))
	read := dueAt(f, id, f.at(time.Hour))
	if !f.update(id, map[string]json.RawMessage{"b": raw(`{"action":"accept"}`)}, f.at(2*time.Second)) {
		f.t.Fatalf("the second answer did not resume the task")
	}
	if ok, err := f.s.Reschedule(f.ctx, id, read, f.get(id).ExpiresAt()); err != nil || ok {
		f.t.Errorf("a sweeper's stale Reschedule after a resume = %v, %v; want refused", ok, err)
	}
	f.wantDue(id, f.at(2*time.Second), "after a resume raced by a sweeper")

	ghost := driver.NewID()
	if _, err := f.s.Update(f.ctx, owner, ghost, map[string]json.RawMessage{"k": raw(`{}`)}, f.now); !errors.Is(err, driver.ErrNotFound) {
		f.t.Errorf("Update of an unknown task: %v", err)
	}
	if ids, _ := dueIDs(f, f.at(24*time.Hour), 10000); slices.Contains(ids, ghost) {
		f.t.Errorf("an update of an unknown task left an entry in the due index")
	}
}

func testDueSchedule(f *fixture) {
	id := f.create()
	contains := func(at time.Time) bool {
		f.t.Helper()
		ids, err := dueIDs(f, at, 1000)
		if err != nil {
			f.t.Fatalf("Due: %v", err)
		}
		return slices.Contains(ids, id)
	}
	if !contains(f.at(time.Hour)) {
		f.t.Errorf("a created task is not in Due(now+1h)")
	}
	if err := f.s.Schedule(f.ctx, id, time.Time{}); err != nil {
		f.t.Fatalf("Schedule(zero): %v", err)
	}
	if contains(f.at(time.Hour)) {
		f.t.Errorf("task still due after Schedule(zero)")
	}
	at := f.at(2 * time.Hour)
	if err := f.s.Schedule(f.ctx, id, at); err != nil {
		f.t.Fatalf("Schedule: %v", err)
	}
	if contains(f.at(time.Hour)) {
		f.t.Errorf("task scheduled for now+2h is in Due(now+1h)")
	}
	if !contains(at) {
		f.t.Errorf("task scheduled for now+2h is not in Due(now+2h)")
	}
	// The limit holds.
	f.create()
	f.create()
	ids, err := dueIDs(f, f.at(3*time.Hour), 2)
	if err != nil {
		f.t.Fatalf("Due: %v", err)
	}
	if len(ids) != 2 {
		f.t.Errorf("Due(limit 2) with 3 due tasks returned %d ids", len(ids))
	}
}

// copyClaim gives a goroutine its own Claim: Commit updates the claim in
// place.
func copyClaim(c *driver.Claim) *driver.Claim {
	cc := *c
	tk := *c.Task
	cc.Task = &tk
	cc.Journal = slices.Clone(c.Journal)
	return &cc
}

// raceRounds is how many tasks each race runs on: the winner varies.
const raceRounds = 4

func testRaceUpdateCancelComplete(f *fixture) {
	for round := range raceRounds {
		f.t.Run(fmt.Sprint("round", round), func(t *testing.T) {
			raceUpdateCancelComplete(&fixture{t: t, s: f.s, ctx: f.ctx, now: f.now})
		})
	}
}

// raceUpdateCancelComplete parks a task for any of two answers, then races
// Updates (the first resumes it), Cancels (which end it at once: it is never
// leased) and Completes under the worker's claim (whose generation is
// still current).
func raceUpdateCancelComplete(f *fixture) {
	reqs := requests()
	id, c := f.park(reqs, true, time.Time{})
	now := f.at(time.Second)

	var (
		mu          sync.Mutex
		completedBy []int              // goroutines whose Complete was accepted
		cancelSaw   []driver.Status    // what Cancel answered
		cancelEnded int                // Cancels that reported ending the task
		getSaw      []driver.Status    // terminal statuses seen by Get afterwards
		resumes     int                // Updates that reported resumed
		errs        []error            // unexpected errors
		results     = map[int]string{} // goroutine -> its Complete payload
	)
	payload := func(i int) json.RawMessage { return raw(fmt.Sprintf(`{"content":[],"winner":%d}`, i)) }
	keys := slices.Sorted(maps.Keys(reqs))

	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() {
			<-start
			var err error
			switch i % 3 {
			case 0:
				var resumed bool
				resumed, err = f.s.Update(f.ctx, owner, id, map[string]json.RawMessage{keys[(i/3)%len(keys)]: raw(fmt.Sprint(i))}, now)
				if err == nil && resumed {
					mu.Lock()
					resumes++
					mu.Unlock()
				}
			case 1:
				var st driver.Status
				var ended bool
				st, ended, err = f.s.Cancel(f.ctx, owner, id, now)
				if err == nil {
					mu.Lock()
					cancelSaw = append(cancelSaw, st)
					if ended {
						cancelEnded++
					}
					mu.Unlock()
				}
			case 2:
				err = f.s.Commit(f.ctx, copyClaim(c), &driver.Change{Now: now, Complete: payload(i)})
				if err == nil {
					mu.Lock()
					completedBy = append(completedBy, i)
					results[i] = string(payload(i))
					mu.Unlock()
				} else if errors.Is(err, driver.ErrFenced) {
					err = nil
				}
			}
			tk, gerr := f.s.Get(f.ctx, owner, id)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("goroutine %d: %w", i, err))
			}
			if gerr != nil {
				errs = append(errs, fmt.Errorf("goroutine %d: Get: %w", i, gerr))
			} else if tk.Status.Terminal() {
				getSaw = append(getSaw, tk.Status)
			}
		})
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		f.t.Errorf("unexpected error: %v", err)
	}

	final := f.get(id)
	if !final.Status.Terminal() {
		f.t.Fatalf("after the race the task is %s, want a terminal state (a Cancel of an unleased task ends it)", final.Status)
	}
	if len(completedBy) > 1 {
		f.t.Errorf("%d Complete commits were accepted, want at most 1: %v", len(completedBy), completedBy)
	}
	if resumes > 1 {
		f.t.Errorf("%d Updates reported resumed, want at most 1", resumes)
	}
	// Exactly one racer made the task terminal, and it knows it.
	if n := cancelEnded + len(completedBy); n != 1 {
		f.t.Errorf("%d Cancels reported ending the task and %d Completes were accepted: want exactly one transition", cancelEnded, len(completedBy))
	}
	switch final.Status {
	case driver.StatusCompleted:
		if len(completedBy) != 1 {
			f.t.Fatalf("task completed but %d Complete commits were accepted", len(completedBy))
		}
		if want := results[completedBy[0]]; !jsonEqual(final.Result, raw(want)) {
			f.t.Errorf("Result = %s, want the accepted commit's %s", final.Result, want)
		}
	case driver.StatusCancelled:
		if len(completedBy) != 0 {
			f.t.Errorf("task cancelled but Complete commits %v were accepted", completedBy)
		}
	default:
		f.t.Errorf("final status %s: no racer asked for it", final.Status)
	}
	for _, st := range cancelSaw {
		if st.Terminal() && st != final.Status {
			f.t.Errorf("a Cancel answered %s, but the task ended %s", st, final.Status)
		}
	}
	for _, st := range getSaw {
		if st != final.Status {
			f.t.Errorf("a Get saw %s, but the task ended %s", st, final.Status)
		}
	}
	f.t.Logf("race: final %s, %d cancels answered, %d completes accepted, %d resumes", final.Status, len(cancelSaw), len(completedBy), resumes)

	// And it never changes afterwards.
	later := f.at(lease + time.Hour)
	if st, ended := f.cancelEnded(id, later); st != final.Status || ended {
		f.t.Errorf("Cancel after the race = %s, ended %v; want %s, not ended", st, ended, final.Status)
	}
	if f.update(id, map[string]json.RawMessage{keys[0]: raw(`"late"`), keys[1]: raw(`"late"`)}, later) {
		f.t.Errorf("Update after the race resumed the task")
	}
	f.commitFenced(copyClaim(c), &driver.Change{Now: later, Fail: &driver.ErrorObject{Code: 1, Message: "late"}})
	if nc := f.claimNoLease(id, later); nc.Task.Status != final.Status || nc.Ended {
		f.t.Errorf("Claim after the race: status %s, ended %v; want %s, not ended", nc.Task.Status, nc.Ended, final.Status)
	}
	again := f.get(id)
	if again.Status != final.Status || !jsonEqual(again.Result, final.Result) || again.Error != nil ||
		!again.UpdatedAt.Equal(final.UpdatedAt) {
		f.t.Errorf("terminal task changed: %+v, was %+v", again, final)
	}
}

func testRaceClaim(f *fixture) {
	id := f.create()
	var (
		mu      sync.Mutex
		winners []*driver.Claim
		leased  int
		errs    []error
	)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range racers {
		wg.Go(func() {
			<-start
			c, err := f.s.Claim(f.ctx, id, f.now, lease)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, driver.ErrLeased):
				leased++
			case err != nil:
				errs = append(errs, err)
			case c.Gen > 0:
				winners = append(winners, c)
			default:
				errs = append(errs, fmt.Errorf("claim without a lease and without ErrLeased: status %s", c.Task.Status))
			}
		})
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		f.t.Errorf("unexpected: %v", err)
	}
	if len(winners) != 1 || leased != racers-1 {
		f.t.Fatalf("%d claims got a lease and %d got ErrLeased, want 1 and %d", len(winners), leased, racers-1)
	}
	w := winners[0]
	f.wantDue(id, w.Task.LeaseUntil, "after the claim race")
	if w.Attempts != 1 {
		f.t.Errorf("winner Attempts = %d, want 1 (refused claims charge nothing)", w.Attempts)
	}
	f.commit(w, &driver.Change{Now: f.now, Append: []driver.Entry{{Name: "only", Kind: driver.KindDo, Value: raw(`1`)}}, Release: true})
	next := f.claim(id, f.now)
	if next.Gen <= w.Gen || len(next.Journal) != 1 {
		f.t.Errorf("next claim: Gen %d (winner %d), journal %d entries; want higher Gen and 1 entry", next.Gen, w.Gen, len(next.Journal))
	}
}

// NewTask.MaxLive bounds an owner's live tasks: over it Create answers
// ErrTooManyTasks and creates nothing; every way a task ends (complete,
// fail, cancel at once, cancel through the worker, cancel by a later claim)
// frees its place; other owners and expired tasks do not count.
func testLiveLimit(f *fixture) {
	const limit = 2
	create := func(who string) (string, error) {
		f.t.Helper()
		nt := f.newTask()
		nt.Owner, nt.MaxLive = who, limit
		_, err := f.s.Create(f.ctx, nt)
		return nt.ID, err
	}
	mustCreate := func(why string) string {
		f.t.Helper()
		id, err := create(owner)
		if err != nil {
			f.t.Fatalf("Create %s: %v", why, err)
		}
		return id
	}
	mustRefuse := func(why string) {
		f.t.Helper()
		id, err := create(owner)
		if !errors.Is(err, driver.ErrTooManyTasks) {
			f.t.Fatalf("Create %s = %v, want ErrTooManyTasks", why, err)
		}
		if _, err := f.s.Get(f.ctx, owner, id); !errors.Is(err, driver.ErrNotFound) {
			f.t.Errorf("a refused Create left a task behind: Get = %v", err)
		}
		if ids, _ := dueIDs(f, f.at(24*time.Hour), 10000); slices.Contains(ids, id) {
			f.t.Errorf("a refused Create left an entry in the due index")
		}
	}
	a, b := mustCreate("one"), mustCreate("two")
	mustRefuse("over the limit")
	if _, err := create(stranger); err != nil {
		f.t.Errorf("another owner's Create = %v, want it unaffected", err)
	}
	// Tasks created without a limit are not counted.
	if _, err := f.s.Create(f.ctx, f.newTask()); err != nil {
		f.t.Fatalf("Create without a limit: %v", err)
	}
	mustRefuse("still over the limit")

	// Completing one frees a place.
	f.commit(f.claim(a, f.now), &driver.Change{Now: f.now, Complete: raw(`{}`)})
	c := mustCreate("after a completion")
	mustRefuse("full again")
	// So does failing.
	f.commit(f.claim(b, f.now), &driver.Change{Now: f.now, Fail: &driver.ErrorObject{Code: 1, Message: "x"}})
	d := mustCreate("after a failure")
	// Cancelling a queued task at once.
	f.cancel(c, f.now)
	e := mustCreate("after a cancel")
	mustRefuse("full again")
	// A running task whose cancellation was requested still counts, until
	// its holder commits ...
	hold := f.claim(d, f.now)
	f.cancel(d, f.at(time.Second))
	mustRefuse("while a cancelled task still runs")
	f.commit(hold, &driver.Change{Now: f.at(2 * time.Second), Release: true})
	mustCreate("after the holder's commit ended it")
	// ... or, its holder dead, the next claim ends it.
	f.claim(e, f.now)
	f.cancel(e, f.at(time.Second))
	mustRefuse("while a cancelled task is held")
	if nc := f.claimNoLease(e, f.at(lease+time.Millisecond)); nc.Task.Status != driver.StatusCancelled {
		f.t.Fatalf("Claim after the lease expired: %s, want cancelled", nc.Task.Status)
	}
	mustCreate("after a claim ended it")
	mustRefuse("full again")

	// Tasks past their TTL no longer count (by the creation's clock).
	const carol = "iss-a|carol"
	for i := range limit + 1 {
		nt := f.newTask()
		nt.Owner, nt.MaxLive, nt.TTL = carol, limit, time.Minute
		if i == limit {
			nt.Now = f.at(time.Minute + time.Millisecond)
		}
		if _, err := f.s.Create(f.ctx, nt); err != nil {
			f.t.Fatalf("Create %d of %s (the last after the others expired): %v", i, carol, err)
		}
	}
}

// Concurrent creations never exceed the limit.
func testLiveLimitRace(f *fixture) {
	const limit = 5
	var created atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range racers {
		wg.Go(func() {
			<-start
			nt := f.newTask()
			nt.MaxLive = limit
			_, err := f.s.Create(f.ctx, nt)
			switch {
			case err == nil:
				created.Add(1)
			case !errors.Is(err, driver.ErrTooManyTasks):
				f.t.Errorf("Create: %v", err)
			}
		})
	}
	close(start)
	wg.Wait()
	if n := created.Load(); n != limit {
		f.t.Errorf("%d of %d concurrent creations succeeded, want exactly the limit %d", n, racers, limit)
	}
}
