package storetest

import (
	"encoding/json"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
)

// The offer cases: standing input requests that a task puts up with a
// journal entry of kind offer (Step.Offer) and takes down with one of kind
// withdraw.

// stopOffer is the request of the offer "stop" the cases put up.
var stopOffer = raw(`{"method":"elicitation/create","params":{"message":"Stop early?"}}`)

func offerEntry(key string, req json.RawMessage) driver.Entry {
	return driver.Entry{Name: key, Kind: driver.KindOffer, Value: req}
}

// offering creates a task, claims it and commits an offer of "stop" under
// the claim, keeping the lease; it returns the id and the claim.
func (f *fixture) offering() (string, *driver.Claim) {
	f.t.Helper()
	id := f.create()
	c := f.claim(id, f.now)
	f.commit(c, &driver.Change{Now: f.now, Append: []driver.Entry{offerEntry("stop", stopOffer)}})
	return id, c
}

// sleep commits a sleep until wake under c, watching the offers wakeOn.
func (f *fixture) sleep(c *driver.Claim, wake time.Time, wakeOn ...string) {
	f.t.Helper()
	f.commit(c, &driver.Change{Now: f.now, Release: true, Sleep: true, WakeAt: wake, WakeOn: wakeOn})
}

// An offer is answerable while a step runs, and the task stays working
// (it shows no input requests); the answer waits for the next claim.
// Unknown and repeated answers are ignored.
func testOfferWhileWorking(f *fixture) {
	id, c := f.offering()
	f.wantStatus(id, driver.StatusWorking)
	f.wantInputRequests(id, nil)
	if f.update(id, map[string]json.RawMessage{"stop": raw(`{"action":"accept"}`), "nosuch": raw(`1`)}, f.at(time.Second)) {
		f.t.Errorf("an answer to the offer of a running task reported resumed")
	}
	if f.update(id, map[string]json.RawMessage{"stop": raw(`{"action":"decline"}`)}, f.at(2*time.Second)) {
		f.t.Errorf("a second answer to the offer reported resumed")
	}
	f.wantStatus(id, driver.StatusWorking)
	if got := f.get(id); !got.UpdatedAt.Equal(f.at(time.Second)) {
		f.t.Errorf("UpdatedAt = %v, want %v (the accepted answer's time)", got.UpdatedAt, f.at(time.Second))
	}
	f.commit(c, &driver.Change{Now: f.at(3 * time.Second), Release: true})
	f.wantResponses(f.claim(id, f.at(3*time.Second)), map[string]json.RawMessage{"stop": raw(`{"action":"accept"}`)})
}

// A sleep with an offer outstanding waits in input_required with the offer
// as its input request, until its wake time; an answer to the offer
// resumes it at once and makes it due.
func testOfferSleep(f *fixture) {
	id, c := f.offering()
	wake := f.at(time.Hour)
	f.sleep(c, wake, "stop")
	if c.Task.Status != driver.StatusInputRequired || !c.Task.WakeAt.Equal(wake) {
		f.t.Errorf("claim after the sleep: %s until %v, want input_required until %v", c.Task.Status, c.Task.WakeAt, wake)
	}
	got := f.wantStatus(id, driver.StatusInputRequired)
	if !got.WakeAt.Equal(wake) || !got.LeaseUntil.IsZero() {
		f.t.Errorf("sleeping task: WakeAt %v LeaseUntil %v, want %v and none", got.WakeAt, got.LeaseUntil, wake)
	}
	f.wantInputRequests(id, map[string]json.RawMessage{"stop": stopOffer})
	f.wantDue(id, wake, "a task sleeping with an offer")
	if nc := f.claimNoLease(id, f.at(time.Minute)); nc.Task.Status != driver.StatusInputRequired || !nc.Task.WakeAt.Equal(wake) {
		f.t.Errorf("Claim before the wake time: %s until %v", nc.Task.Status, nc.Task.WakeAt)
	}
	if f.update(id, map[string]json.RawMessage{"nosuch": raw(`1`)}, f.at(time.Minute)) {
		f.t.Errorf("an answer to an unknown key woke the task")
	}
	if !f.update(id, map[string]json.RawMessage{"stop": raw(`{"action":"accept"}`)}, f.at(2*time.Minute)) {
		f.t.Fatalf("an answer to the offer did not wake the sleeping task")
	}
	f.wantStatus(id, driver.StatusWorking)
	f.wantInputRequests(id, nil)
	f.wantDue(id, f.at(2*time.Minute), "a task woken by an answer")
	nc := f.claim(id, f.at(2*time.Minute))
	f.wantResponses(nc, map[string]json.RawMessage{"stop": raw(`{"action":"accept"}`)})
}

// Without offers a Sleep is a plain Release until the wake time.
func testSleepWithoutOffers(f *fixture) {
	id := f.create()
	c := f.claim(id, f.now)
	wake := f.at(10 * time.Minute)
	f.sleep(c, wake)
	if c.Task.Status != driver.StatusWorking || !c.Task.WakeAt.Equal(wake) {
		f.t.Errorf("claim after the sleep: %s until %v, want working until %v", c.Task.Status, c.Task.WakeAt, wake)
	}
	got := f.wantStatus(id, driver.StatusWorking)
	if !got.WakeAt.Equal(wake) || len(got.InputRequests) != 0 {
		f.t.Errorf("sleeping task: WakeAt %v, InputRequests %s", got.WakeAt, fmtRawMap(got.InputRequests))
	}
	f.wantDue(id, wake, "a sleeping task")
	f.claimNoLease(id, f.at(time.Minute))
	f.claim(id, wake)
}

// An answer that arrived while the task ran cuts the sleep it then commits
// short, if the sleep watches that offer: the task is released to run now.
// One it does not watch (the handler already found it) leaves the sleep be.
func testOfferAnsweredBeforeSleep(f *fixture) {
	id, c := f.offering()
	f.update(id, map[string]json.RawMessage{"stop": raw(`true`)}, f.at(time.Second))
	f.sleep(c, f.at(time.Hour), "stop")
	if c.Task.Status != driver.StatusWorking || !c.Task.WakeAt.IsZero() {
		f.t.Errorf("claim after a sleep whose offer was answered: %s until %v, want working, now", c.Task.Status, c.Task.WakeAt)
	}
	f.wantStatus(id, driver.StatusWorking)
	f.wantDue(id, f.at(time.Second), "a sleep cut short at its commit")
	c = f.claim(id, f.at(time.Second))
	f.wantResponses(c, map[string]json.RawMessage{"stop": raw(`true`)})

	// The handler found the answer and sleeps on: nothing left to watch.
	wake := f.at(time.Hour)
	f.sleep(c, wake)
	if c.Task.Status != driver.StatusWorking || !c.Task.WakeAt.Equal(wake) {
		f.t.Errorf("claim after the second sleep: %s until %v, want working until %v", c.Task.Status, c.Task.WakeAt, wake)
	}
	f.claimNoLease(id, f.at(time.Minute))
}

// A withdrawn offer leaves inputRequests and its late answer is ignored like
// an unknown key's; a sleep with no offer left is a plain sleep.
func testOfferWithdrawn(f *fixture) {
	id, c := f.offering()
	other := raw(`{"method":"elicitation/create","params":{"message":"Raise the budget?"}}`)
	wake := f.at(time.Hour)
	f.commit(c, &driver.Change{Now: f.now, Append: []driver.Entry{offerEntry("budget", other)}, Release: true, Sleep: true,
		WakeAt: wake, WakeOn: []string{"budget", "stop"}})
	f.wantStatus(id, driver.StatusInputRequired)
	f.wantInputRequests(id, map[string]json.RawMessage{"stop": stopOffer, "budget": other})

	// Woken by the budget answer, the handler withdraws "stop" and sleeps.
	if !f.update(id, map[string]json.RawMessage{"budget": raw(`{"action":"decline"}`)}, f.at(time.Second)) {
		f.t.Fatalf("an answer to an offer did not wake the sleeping task")
	}
	c = f.claim(id, f.at(time.Second))
	f.commit(c, &driver.Change{Now: f.at(time.Second), Append: []driver.Entry{{Name: "stop", Kind: driver.KindWithdraw}},
		Release: true, Sleep: true, WakeAt: wake})
	f.wantStatus(id, driver.StatusWorking)
	f.wantInputRequests(id, nil)
	if f.update(id, map[string]json.RawMessage{"stop": raw(`{"action":"accept"}`)}, f.at(2*time.Second)) {
		f.t.Errorf("an answer to a withdrawn offer woke the task")
	}
	c = f.claim(id, wake)
	f.wantResponses(c, map[string]json.RawMessage{"budget": raw(`{"action":"decline"}`)})

	// Withdrawn in the commit that offers it: never outstanding.
	f.commit(c, &driver.Change{Now: wake, Append: []driver.Entry{offerEntry("late", other), {Name: "late", Kind: driver.KindWithdraw}},
		Release: true, Sleep: true, WakeAt: wake.Add(time.Hour), WakeOn: nil})
	f.wantStatus(id, driver.StatusWorking)
	if f.update(id, map[string]json.RawMessage{"late": raw(`1`)}, wake) {
		f.t.Errorf("an answer to an offer withdrawn with it woke the task")
	}
}

// A task waiting for input shows its offers beside the requests it waits
// for; an answer to an offer is taken but does not end the wait, which
// ends when its own keys are answered.
func testOfferWhileParked(f *fixture) {
	id, c := f.offering()
	reqs := requests()
	f.commit(c, &driver.Change{Now: f.now, Park: reqs})
	want := map[string]json.RawMessage{"stop": stopOffer}
	for k, v := range reqs {
		want[k] = v
	}
	f.wantInputRequests(id, want)
	if f.update(id, map[string]json.RawMessage{"stop": raw(`"stop"`)}, f.at(time.Second)) {
		f.t.Errorf("an answer to an offer ended a wait for input")
	}
	delete(want, "stop")
	f.wantStatus(id, driver.StatusInputRequired)
	f.wantInputRequests(id, want)
	if !f.update(id, map[string]json.RawMessage{"confirm": raw(`true`), "pick": raw(`"a"`)}, f.at(2*time.Second)) {
		f.t.Fatalf("the awaited answers did not resume the task")
	}
	f.wantResponses(f.claim(id, f.at(2*time.Second)), map[string]json.RawMessage{
		"stop": raw(`"stop"`), "confirm": raw(`true`), "pick": raw(`"a"`)})
}

// Offers take answers whatever the task's timing: after the sleep's wake
// time (no resume: it is due anyway) and after a claim past a deadline
// (whose own keys are frozen).
func testOfferLateAnswers(f *fixture) {
	id, c := f.offering()
	wake := f.at(time.Minute)
	f.sleep(c, wake, "stop")
	if f.update(id, map[string]json.RawMessage{"stop": raw(`1`)}, wake.Add(time.Second)) {
		f.t.Errorf("an answer after the wake time reported resumed")
	}
	// Nothing left to ask: working (and due), not input_required without
	// input requests.
	f.wantStatus(id, driver.StatusWorking)
	f.wantInputRequests(id, nil)
	f.wantResponses(f.claim(id, wake.Add(time.Second)), map[string]json.RawMessage{"stop": raw(`1`)})

	id, c = f.offering()
	f.commit(c, &driver.Change{Now: f.now, Append: []driver.Entry{offerEntry("more", stopOffer)}})
	deadline := f.at(time.Minute)
	f.commit(c, &driver.Change{Now: f.now, Park: map[string]json.RawMessage{"q": raw(`{}`)}, WakeAt: deadline})
	f.claim(id, deadline.Add(time.Millisecond)) // past the deadline
	f.wantStatus(id, driver.StatusWorking)
	f.wantInputRequests(id, nil)
	if f.update(id, map[string]json.RawMessage{"q": raw(`"late"`), "stop": raw(`2`)}, f.at(time.Second)) {
		f.t.Errorf("an update of a task claimed past its deadline reported resumed")
	}
	nc := f.claim(id, deadline.Add(time.Hour))
	f.wantResponses(nc, map[string]json.RawMessage{"stop": raw(`2`)})
}

// A task that ends drops its offers: answers are ignored and no input
// request is left. Cancelling a task that sleeps with an offer ends it at
// once; a sleep committed after a cancel request cancels.
func testOfferEnds(f *fixture) {
	id, c := f.offering()
	f.commit(c, &driver.Change{Now: f.now, Complete: raw(`{"content":[]}`)})
	if f.update(id, map[string]json.RawMessage{"stop": raw(`1`)}, f.now) {
		f.t.Errorf("an answer to the offer of a completed task reported resumed")
	}
	f.wantInputRequests(id, nil)

	id, c = f.offering()
	f.sleep(c, f.at(time.Hour), "stop")
	if st, ended := f.cancelEnded(id, f.at(time.Second)); st != driver.StatusCancelled || !ended {
		f.t.Errorf("Cancel of a task sleeping with an offer = %s, ended %v", st, ended)
	}
	f.wantInputRequests(id, nil)
	if f.update(id, map[string]json.RawMessage{"stop": raw(`1`)}, f.at(2*time.Second)) {
		f.t.Errorf("an answer to the offer of a cancelled task reported resumed")
	}

	id, c = f.offering()
	f.cancel(id, f.at(time.Second))
	f.sleep(c, f.at(time.Hour), "stop")
	if c.Task.Status != driver.StatusCancelled {
		f.t.Errorf("a sleep committed after a cancel request: %s, want cancelled", c.Task.Status)
	}
	f.wantStatus(id, driver.StatusCancelled)
	f.wantInputRequests(id, nil)
}

// A task claimed out of input_required (its deadline or its sleep's end
// passed) is working from the claim on: while the worker runs it shows no
// input requests, and the input it waited for is closed.
func testClaimPastDeadline(f *fixture) {
	deadline := f.at(time.Minute)
	id, _ := f.park(requests(), false, deadline)
	c := f.claim(id, deadline)
	if c.Task.Status != driver.StatusWorking {
		f.t.Errorf("claim past the deadline: status %s, want working", c.Task.Status)
	}
	f.wantStatus(id, driver.StatusWorking)
	f.wantInputRequests(id, nil)
	if f.update(id, map[string]json.RawMessage{"confirm": raw(`true`), "pick": raw(`"x"`)}, f.now) {
		f.t.Errorf("an update after the claim resumed the task")
	}
	// The worker dies; the next claim, after its lease, runs it.
	f.wantResponses(f.claim(id, deadline.Add(lease+time.Millisecond)), nil)

	id, c = f.offering()
	f.sleep(c, deadline, "stop")
	c = f.claim(id, deadline)
	if c.Task.Status != driver.StatusWorking {
		f.t.Errorf("claim at the end of a sleep with an offer: status %s, want working", c.Task.Status)
	}
	f.wantInputRequests(id, nil)
	// The offer still stands.
	if f.update(id, map[string]json.RawMessage{"stop": raw(`1`)}, deadline) {
		f.t.Errorf("an answer to the offer of a running task reported resumed")
	}
	f.commit(c, &driver.Change{Now: deadline, Release: true})
	f.wantResponses(f.claim(id, deadline), map[string]json.RawMessage{"stop": raw(`1`)})
}
