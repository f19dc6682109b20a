package storetest

import (
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
)

// The branch cases: parallel steps (driver.Brancher, run only on a store
// that declares it).

// brancher returns the store as a Brancher, or ends the case when it is
// none: parallel steps run in sequence on other stores (see tasks.All).
func (f *fixture) brancher() driver.Brancher {
	f.t.Helper()
	b, ok := f.s.(driver.Brancher)
	if !ok {
		f.t.Skip("the store is no driver.Brancher")
	}
	return b
}

// forked creates a task, claims it and starts a fork "index" of n
// branches, c at once; it returns the id and the claim.
func (f *fixture) forked(n, c int) (string, *driver.Claim) {
	f.t.Helper()
	f.brancher()
	id := f.create()
	cl := f.claim(id, f.now)
	spec, _ := json.Marshal(map[string]int{"n": n, "c": c})
	f.commit(cl, &driver.Change{Now: f.now, Release: true, Await: "index", WakeAt: f.at(ttl),
		Append: []driver.Entry{{Name: "index", Kind: driver.KindFork, Value: spec}},
		Fork:   &driver.Fork{Name: "index", Number: 1, Branches: n, Concurrency: c}})
	return id, cl
}

// claimBranch claims branch i of id's first fork at now and requires the
// claim.
func (f *fixture) claimBranch(id string, i int, now time.Time) *driver.Claim {
	f.t.Helper()
	bc, err := f.brancher().ClaimBranch(f.ctx, driver.BranchID(id, 1, i), now, lease)
	if err != nil {
		f.t.Fatalf("ClaimBranch(%d): %v", i, err)
	}
	if bc.State != driver.BranchClaimed || bc.Claim == nil || bc.Claim.Gen <= 0 {
		f.t.Fatalf("ClaimBranch(%d) at %v: state %v, want claimed", i, now, bc.State)
	}
	return bc.Claim
}

// branchState claims branch i and requires state (and until, if not zero).
func (f *fixture) branchState(id string, i int, now time.Time, want driver.BranchState, until time.Time) {
	f.t.Helper()
	bc, err := f.brancher().ClaimBranch(f.ctx, driver.BranchID(id, 1, i), now, lease)
	if err != nil {
		f.t.Fatalf("ClaimBranch(%d): %v", i, err)
	}
	if bc.State != want || (!until.IsZero() && !bc.Until.Equal(until)) {
		f.t.Errorf("ClaimBranch(%d) at %v: state %v until %v, want %v until %v", i, now, bc.State, bc.Until, want, until)
	}
}

func (f *fixture) commitBranch(id string, i int, c *driver.Claim, ch *driver.BranchChange) *driver.BranchCommit {
	f.t.Helper()
	res, err := f.brancher().CommitBranch(f.ctx, driver.BranchID(id, 1, i), c.Gen, ch)
	if err != nil {
		f.t.Fatalf("CommitBranch(%d): %v", i, err)
	}
	return res
}

// A fork dispatches its first branches; each is claimed once under a
// lease with the task's record and journal, finishes once (a stale commit
// is fenced) and dispatches the next; the last one resumes the awaiting
// task, and Joined returns every outcome in order.
func testForkJoin(f *fixture) {
	b := f.brancher()
	id, _ := f.forked(3, 2)
	got := f.wantStatus(id, driver.StatusWorking)
	if got.Awaiting != "index" {
		f.t.Errorf("forked task: Awaiting %q, want index", got.Awaiting)
	}
	f.claimNoLease(id, f.at(time.Second))
	ids, open, err := b.Stalled(f.ctx, id, f.at(time.Second))
	if err != nil || !open || !slices.Equal(ids, []string{driver.BranchID(id, 1, 0), driver.BranchID(id, 1, 1)}) {
		f.t.Errorf("Stalled = %v, %v, %v; want the two dispatched branches, open", ids, open, err)
	}
	f.branchState(id, 2, f.at(time.Second), driver.BranchIdle, time.Time{}) // not dispatched yet
	if _, err := b.ClaimBranch(f.ctx, driver.BranchID(id, 1, 3), f.now, lease); !errors.Is(err, driver.ErrNotFound) {
		f.t.Errorf("ClaimBranch of a branch past the fork = %v, want ErrNotFound", err)
	}
	if _, err := b.ClaimBranch(f.ctx, driver.BranchID(driver.NewID(), 1, 0), f.now, lease); !errors.Is(err, driver.ErrNotFound) {
		f.t.Errorf("ClaimBranch of an unknown task's branch = %v, want ErrNotFound", err)
	}
	c0 := f.claimBranch(id, 0, f.at(time.Second))
	if c0.Task.ID != id || c0.Task.Tool != tool || c0.Attempts != 1 || len(c0.Journal) != 1 || c0.Journal[0].Kind != driver.KindFork {
		f.t.Errorf("branch claim: task %s tool %s attempts %d journal %v", c0.Task.ID, c0.Task.Tool, c0.Attempts, c0.Journal)
	}
	f.branchState(id, 0, f.at(2*time.Second), driver.BranchLeased, f.at(time.Second+lease))
	if ids, _, _ := b.Stalled(f.ctx, id, f.at(2*time.Second)); !slices.Equal(ids, []string{driver.BranchID(id, 1, 1)}) {
		f.t.Errorf("Stalled with branch 0 leased = %v, want branch 1 only", ids)
	}
	if outs, err := b.Joined(f.ctx, id, 1); err != nil || outs != nil {
		f.t.Errorf("Joined before the branches finished = %v, %v; want nil", outs, err)
	}
	res := f.commitBranch(id, 0, c0, &driver.BranchChange{Now: f.at(3 * time.Second), Value: raw(`"a"`), Attempt: 1, Took: time.Second})
	if !slices.Equal(res.Next, []string{driver.BranchID(id, 1, 2)}) || res.Resumed {
		f.t.Errorf("first branch's commit: %+v, want branch 2 next, not resumed", res)
	}
	if _, err := b.CommitBranch(f.ctx, driver.BranchID(id, 1, 0), c0.Gen, &driver.BranchChange{Now: f.at(4 * time.Second), Value: raw(`"b"`)}); !errors.Is(err, driver.ErrFenced) {
		f.t.Errorf("a second commit of a finished branch = %v, want ErrFenced", err)
	}
	f.branchState(id, 0, f.at(4*time.Second), driver.BranchIdle, time.Time{})
	c1 := f.claimBranch(id, 1, f.at(4*time.Second))
	c2 := f.claimBranch(id, 2, f.at(4*time.Second))
	if res := f.commitBranch(id, 1, c1, &driver.BranchChange{Now: f.at(5 * time.Second), Err: "boom", Attempt: 3}); len(res.Next) != 0 || res.Resumed {
		f.t.Errorf("second branch's commit: %+v, want nothing next, not resumed", res)
	}
	f.wantStatus(id, driver.StatusWorking)
	if res := f.commitBranch(id, 2, c2, &driver.BranchChange{Now: f.at(6 * time.Second), Value: raw(`{"c":3}`)}); !res.Resumed {
		f.t.Errorf("last branch's commit: %+v, want resumed", res)
	}
	got = f.wantStatus(id, driver.StatusWorking)
	if got.Awaiting != "" || !got.WakeAt.IsZero() {
		f.t.Errorf("joined task: Awaiting %q WakeAt %v, want none", got.Awaiting, got.WakeAt)
	}
	f.wantDue(id, f.at(6*time.Second), "a task its join resumed")
	outs, err := b.Joined(f.ctx, id, 1)
	want := []driver.BranchOutcome{{Value: raw(`"a"`)}, {Err: "boom"}, {Value: raw(`{"c":3}`)}}
	if err != nil || len(outs) != 3 || !jsonEqual(outs[0].Value, want[0].Value) || outs[1].Err != "boom" || outs[1].Value != nil || !jsonEqual(outs[2].Value, want[2].Value) {
		f.t.Errorf("Joined = %+v, %v; want %+v", outs, err, want)
	}
	if ids, open, err := b.Stalled(f.ctx, id, f.at(7*time.Second)); err != nil || open || len(ids) != 0 {
		f.t.Errorf("Stalled after the join = %v, %v, %v; want nothing", ids, open, err)
	}
	c := f.claim(id, f.at(7*time.Second))
	// Awaiting a join that was delivered releases the task at once.
	f.await(c, "index", f.at(ttl), f.at(8*time.Second))
	if !c.Task.WakeAt.IsZero() {
		f.t.Errorf("await of a delivered join: WakeAt %v, want zero", c.Task.WakeAt)
	}
}

// A branch's lease is its own: renewed under its generation, taken over
// once it runs out (the claim reports the lost lease and fences the
// holder); a retry waits until its time and charges another attempt; a
// release uncharges the attempt.
func testBranchLease(f *fixture) {
	b := f.brancher()
	id, _ := f.forked(1, 1)
	bid := driver.BranchID(id, 1, 0)
	c := f.claimBranch(id, 0, f.now)
	if err := b.RenewBranch(f.ctx, bid, c.Gen, f.at(30*time.Second), lease); err != nil {
		f.t.Fatalf("RenewBranch: %v", err)
	}
	f.branchState(id, 0, f.at(time.Minute), driver.BranchLeased, f.at(30*time.Second+lease))
	nc := f.claimBranch(id, 0, f.at(30*time.Second+lease))
	if nc.Gen <= c.Gen || nc.Attempts != 2 || !nc.Lost.Equal(f.at(30*time.Second+lease)) {
		f.t.Errorf("take-over claim: gen %d (was %d) attempts %d lost %v", nc.Gen, c.Gen, nc.Attempts, nc.Lost)
	}
	if err := b.RenewBranch(f.ctx, bid, c.Gen, f.at(2*time.Minute), lease); !errors.Is(err, driver.ErrFenced) {
		f.t.Errorf("RenewBranch of a stale claim = %v, want ErrFenced", err)
	}
	if _, err := b.CommitBranch(f.ctx, bid, c.Gen, &driver.BranchChange{Now: f.at(2 * time.Minute), Value: raw(`1`)}); !errors.Is(err, driver.ErrFenced) {
		f.t.Errorf("CommitBranch of a stale claim = %v, want ErrFenced", err)
	}
	if yes, err := b.BranchCancelled(f.ctx, bid, c.Gen); err != nil || !yes {
		f.t.Errorf("BranchCancelled of a stale claim = %v, %v; want true", yes, err)
	}
	if yes, err := b.BranchCancelled(f.ctx, bid, nc.Gen); err != nil || yes {
		f.t.Errorf("BranchCancelled of the holder = %v, %v; want false", yes, err)
	}
	retry := f.at(5 * time.Minute)
	f.commitBranch(id, 0, nc, &driver.BranchChange{Now: f.at(3 * time.Minute), Err: "flaky", Retry: retry, Attempt: 2})
	f.branchState(id, 0, f.at(4*time.Minute), driver.BranchWaiting, retry)
	if ids, _, _ := b.Stalled(f.ctx, id, f.at(4*time.Minute)); len(ids) != 0 {
		f.t.Errorf("Stalled with a retry not due = %v, want none", ids)
	}
	if ids, _, _ := b.Stalled(f.ctx, id, retry); !slices.Equal(ids, []string{bid}) {
		f.t.Errorf("Stalled with the retry due = %v, want the branch", ids)
	}
	c3 := f.claimBranch(id, 0, retry)
	if c3.Attempts != 3 {
		f.t.Errorf("claim of the retry: attempts %d, want 3", c3.Attempts)
	}
	f.commitBranch(id, 0, c3, &driver.BranchChange{Now: retry, Release: true})
	if c4 := f.claimBranch(id, 0, retry); c4.Attempts != 3 {
		f.t.Errorf("claim after a release: attempts %d, want 3 (the released attempt uncharged)", c4.Attempts)
	}
}

// Cancelling a task that awaits its branches ends it at once: its
// branches are not claimed any more, and a running one sees the
// cancellation and is fenced.
func testForkCancel(f *fixture) {
	b := f.brancher()
	id, _ := f.forked(2, 2)
	c := f.claimBranch(id, 0, f.now)
	if st, ended := f.cancelEnded(id, f.at(time.Second)); !ended || st != driver.StatusCancelled {
		f.t.Errorf("cancelling a forked task: %s (ended %v), want cancelled at once", st, ended)
	}
	if yes, err := b.BranchCancelled(f.ctx, driver.BranchID(id, 1, 0), c.Gen); err != nil || !yes {
		f.t.Errorf("BranchCancelled after the cancel = %v, %v; want true", yes, err)
	}
	f.branchState(id, 1, f.at(time.Second), driver.BranchIdle, time.Time{})
	if _, err := b.CommitBranch(f.ctx, driver.BranchID(id, 1, 0), c.Gen, &driver.BranchChange{Now: f.at(2 * time.Second), Value: raw(`1`)}); !errors.Is(err, driver.ErrFenced) {
		f.t.Errorf("CommitBranch after the cancel = %v, want ErrFenced", err)
	}
	f.wantStatus(id, driver.StatusCancelled)
}
