package storetest

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
)

// The lease cases: renewal (driver.LeaseRenewer, run only on a store that
// declares it) and the lost lease a claim reports (Claim.Lost, every
// store).

// renewer returns the store as a LeaseRenewer, or ends the case when it is
// none: renewing is optional (see driver.LeaseRenewer).
func (f *fixture) renewer() driver.LeaseRenewer {
	f.t.Helper()
	r, ok := f.s.(driver.LeaseRenewer)
	if !ok {
		f.t.Skip("the store is no driver.LeaseRenewer: its claims last the whole invocation")
	}
	return r
}

func (f *fixture) renew(c *driver.Claim, now time.Time) {
	f.t.Helper()
	if err := f.renewer().RenewLease(f.ctx, c, now, lease); err != nil {
		f.t.Fatalf("RenewLease(%s) at %v: %v", c.Task.ID, now, err)
	}
}

func (f *fixture) renewFenced(c *driver.Claim, now time.Time) {
	f.t.Helper()
	if err := f.renewer().RenewLease(f.ctx, c, now, lease); !errors.Is(err, driver.ErrFenced) {
		f.t.Fatalf("RenewLease(%s) at %v = %v, want ErrFenced", c.Task.ID, now, err)
	}
}

// wantLeased requires Claim at now to be refused with ErrLeased.
func (f *fixture) wantLeased(id string, now time.Time, why string) {
	f.t.Helper()
	if c, err := f.s.Claim(f.ctx, id, now, lease); !errors.Is(err, driver.ErrLeased) {
		f.t.Fatalf("%s: Claim at %v = %+v, %v; want ErrLeased", why, now, c, err)
	}
}

// A renewal moves the lease's end to its own time plus the lease, and
// changes nothing else a client sees: the task is refused to other claims
// until then, and Get shows the new end.
func testRenewExtends(f *fixture) {
	r := f.renewer()
	id := f.create()
	c := f.claim(id, f.now)
	msg := "halfway"
	f.commit(c, &driver.Change{Now: f.at(time.Second), StatusMessage: &msg,
		Append: []driver.Entry{{Name: "a", Kind: driver.KindDo, Value: raw(`1`)}}})
	before := f.get(id)
	renewed := f.at(lease / 2)
	f.renew(c, renewed)
	after := f.get(id)
	if want := renewed.Add(lease); !after.LeaseUntil.Equal(want) {
		f.t.Errorf("after RenewLease: LeaseUntil = %v, want %v", after.LeaseUntil, want)
	}
	if after.Status != driver.StatusWorking || after.StatusMessage != msg || !after.UpdatedAt.Equal(before.UpdatedAt) {
		f.t.Errorf("RenewLease changed what a client sees: %+v, was %+v", after, before)
	}
	f.wantLeased(id, f.at(lease+time.Millisecond), "past the first lease's end, within the renewed one")
	// Renewing again, even at an earlier time than the last renewal,
	// sets the end from that time: the holder's clock is the lease's.
	if err := r.RenewLease(f.ctx, c, renewed, lease); err != nil {
		f.t.Fatalf("RenewLease repeated: %v", err)
	}
	// The holder's writes go on under the renewed lease.
	f.commit(c, &driver.Change{Now: f.at(lease + time.Second), Append: []driver.Entry{{Name: "b", Kind: driver.KindDo, Value: raw(`2`)}}})
	f.wantDue(id, renewed.Add(lease), "a task under a renewed lease")
	c2 := f.claim(id, renewed.Add(lease+time.Millisecond))
	if !entriesEqual(c2.Journal, []driver.Entry{{Name: "a", Kind: driver.KindDo, Value: raw(`1`)}, {Name: "b", Kind: driver.KindDo, Value: raw(`2`)}}) {
		f.t.Errorf("journal after renewals = %+v, want a, b", c2.Journal)
	}
}

// A lease that ran out while nobody claimed the task is still its holder's:
// renewing it takes it back (fencing is by claim, not by time). Once
// another claim took the task, the old holder's renewal is fenced and
// changes nothing.
func testRenewFencing(f *fixture) {
	f.renewer()
	id := f.create()
	c1 := f.claim(id, f.now)
	late := f.at(2 * lease)
	f.renew(c1, late)
	f.wantLeased(id, late.Add(lease/2), "after a late renewal")
	c2 := f.claim(id, late.Add(lease+time.Millisecond))
	f.renewFenced(c1, late.Add(lease+time.Second))
	if got := f.get(id); !got.LeaseUntil.Equal(c2.Task.LeaseUntil) {
		f.t.Errorf("a fenced renewal moved the lease: LeaseUntil = %v, want the live claim's %v", got.LeaseUntil, c2.Task.LeaseUntil)
	}
	f.wantDue(id, c2.Task.LeaseUntil, "after a fenced renewal")
	f.commit(c2, &driver.Change{Now: late.Add(lease + 2*time.Second), Complete: raw(`{"content":[]}`)})
	f.renewFenced(c2, late.Add(lease+3*time.Second))
	f.wantStatus(id, driver.StatusCompleted)
}

// A renewal after its holder released, parked, slept or ended the task is
// fenced and changes nothing: the task stays free for the next claim (a
// renewal racing the holder's last write never holds a released task).
func testRenewAfterRelease(f *fixture) {
	f.renewer()
	ends := []struct {
		name string
		ch   driver.Change
		// next: the task can be claimed right after (else it is parked or
		// asleep, or ended)
		next bool
	}{
		{"Release", driver.Change{Release: true}, true},
		{"Sleep", driver.Change{Release: true, WakeAt: time.Now().Add(time.Hour)}, false},
		{"Park", driver.Change{Park: requests()}, false},
		{"Fail", driver.Change{Fail: &driver.ErrorObject{Code: -32603, Message: "no"}}, false},
	}
	for _, e := range ends {
		f.t.Run(e.name, func(t *testing.T) {
			f := &fixture{t: t, s: f.s, ctx: f.ctx, now: f.now}
			id := f.create()
			c := f.claim(id, f.now)
			ch := e.ch
			ch.Now = f.at(time.Second)
			f.commit(c, &ch)
			before := f.get(id)
			f.renewFenced(c, f.at(2*time.Second))
			if after := f.get(id); after.Status != before.Status || !after.LeaseUntil.Equal(before.LeaseUntil) || !after.WakeAt.Equal(before.WakeAt) {
				t.Errorf("a renewal after the last write changed the task: %+v, was %+v", after, before)
			}
			if e.next {
				if c2 := f.claim(id, f.at(3*time.Second)); !c2.Lost.IsZero() {
					t.Errorf("claim after a release: Lost = %v, want zero (nobody was lost)", c2.Lost)
				}
			}
		})
	}
}

// RenewLease of a task that does not exist (an unknown id, one ValidID
// refuses) answers ErrNotFound.
func testRenewUnknown(f *fixture) {
	r := f.renewer()
	for _, id := range []string{driver.NewID(), "not-an-id"} {
		c := &driver.Claim{Task: &driver.Task{ID: id}, Gen: 1}
		if err := r.RenewLease(f.ctx, c, f.now, lease); !errors.Is(err, driver.ErrNotFound) {
			f.t.Errorf("RenewLease(%q) = %v, want ErrNotFound", id, err)
		}
	}
}

// A claim reports the end of the lease it took over when that lease ran
// out with its holder still on it (a lost worker), and nothing when the
// task was free: new, released, or resumed from input.
func testClaimReportsLost(f *fixture) {
	id := f.create()
	c := f.claim(id, f.now)
	if !c.Lost.IsZero() {
		f.t.Errorf("first claim: Lost = %v, want zero", c.Lost)
	}
	c = f.claim(id, f.at(lease+time.Millisecond))
	if want := f.at(lease); !c.Lost.Equal(want) {
		f.t.Errorf("claim after the lease ran out: Lost = %v, want the lease's end %v", c.Lost, want)
	}
	f.commit(c, &driver.Change{Now: f.at(lease + time.Second), Release: true})
	if c = f.claim(id, f.at(lease+2*time.Second)); !c.Lost.IsZero() {
		f.t.Errorf("claim after a release: Lost = %v, want zero", c.Lost)
	}
	parked, _ := f.park(requests(), true, time.Time{})
	if !f.update(parked, map[string]json.RawMessage{"confirm": raw(`{"action":"accept"}`)}, f.at(time.Second)) {
		f.t.Fatalf("the answer did not resume the parked task")
	}
	if c := f.claim(parked, f.at(2*time.Second)); !c.Lost.IsZero() {
		f.t.Errorf("claim of a resumed task: Lost = %v, want zero", c.Lost)
	}
	if _, ok := f.s.(driver.LeaseRenewer); !ok {
		return
	}
	// A renewed lease that ran out is reported at its renewed end.
	renewed := f.at(lease + 10*time.Second)
	f.renew(c, renewed)
	if c := f.claim(id, renewed.Add(lease+time.Millisecond)); !c.Lost.Equal(renewed.Add(lease)) {
		f.t.Errorf("claim after a renewed lease ran out: Lost = %v, want %v", c.Lost, renewed.Add(lease))
	}
}
