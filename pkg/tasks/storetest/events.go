package storetest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
)

// The event cases: callbacks and signals (driver.EventStore, run only on a
// store that declares it).

// events returns the store as an EventStore, or ends the case when it is
// none: events are optional (see driver.EventStore).
func (f *fixture) events() driver.EventStore {
	f.t.Helper()
	es, ok := f.s.(driver.EventStore)
	if !ok {
		f.t.Skip("the store is no driver.EventStore")
	}
	return es
}

// proof returns a proof as the engine makes it.
func proof(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

var hookSchema = raw(`{"type":"object","properties":{"url":{"type":"string"}}}`)

// callbackWait is a callback wait "hook" with token's proof, until until.
func callbackWait(token string, until time.Time) driver.EventWait {
	return driver.EventWait{Name: "hook", Kind: driver.EventCallback, Proof: proof(token), Secret: "whsec_c2VjcmV0", Schema: hookSchema, Until: until}
}

// opened creates a task, claims it and commits the waits under the claim,
// keeping the lease.
func (f *fixture) opened(waits ...driver.EventWait) (string, *driver.Claim) {
	f.t.Helper()
	f.events()
	id := f.create()
	c := f.claim(id, f.now)
	var entries []driver.Entry
	for _, w := range waits {
		entries = append(entries, driver.Entry{Name: w.Name, Kind: driver.KindCallback, Until: w.Until})
	}
	f.commit(c, &driver.Change{Now: f.now, Append: entries, Open: waits})
	return id, c
}

// deliver delivers d to id at now and requires acceptance; it returns
// whether it resumed the task.
func (f *fixture) deliver(id string, d driver.Delivery, now time.Time) bool {
	f.t.Helper()
	d.Now = now
	resumed, err := f.events().Deliver(f.ctx, id, &d)
	if err != nil {
		f.t.Fatalf("Deliver(%s, %q) at %v: %v", id, d.Name, now, err)
	}
	return resumed
}

// deliverRefused requires the delivery of d to id at now to fail with want.
func (f *fixture) deliverRefused(id string, d driver.Delivery, now time.Time, want error, why string) {
	f.t.Helper()
	d.Now = now
	if _, err := f.events().Deliver(f.ctx, id, &d); !errors.Is(err, want) {
		f.t.Errorf("%s: Deliver(%q) = %v, want %v", why, d.Name, err, want)
	}
}

// await releases c's task to await the event name until until.
func (f *fixture) await(c *driver.Claim, name string, until, now time.Time) {
	f.t.Helper()
	f.commit(c, &driver.Change{Now: now, Release: true, Await: name, WakeAt: until})
}

// A callback wait is found by its proof only, while it is open; it takes
// one delivery, which the next claim reads; a wrong proof, a second
// delivery and another task's proof are refused like an unknown task.
func testCallbackOnce(f *fixture) {
	es := f.events()
	until := f.at(time.Hour)
	id, c := f.opened(callbackWait("tok-1", until))
	w, err := es.Waiting(f.ctx, id, "", proof("tok-1"), f.at(time.Second))
	if err != nil {
		f.t.Fatalf("Waiting by proof: %v", err)
	}
	if w.Name != "hook" || w.Kind != driver.EventCallback || !w.Until.Equal(until) || w.Secret != "whsec_c2VjcmV0" || !jsonEqual(w.Schema, hookSchema) {
		f.t.Errorf("Waiting = %+v, want the wait as opened", w)
	}
	other, _ := f.opened(callbackWait("tok-2", until))
	for _, tc := range []struct {
		id, proof, why string
	}{
		{id, proof("tok-2"), "another task's proof"},
		{id, proof("forged"), "a forged proof"},
		{other, proof("tok-1"), "this proof at another task"},
		{driver.NewID(), proof("tok-1"), "an unknown task"},
	} {
		if _, err := es.Waiting(f.ctx, tc.id, "", tc.proof, f.at(time.Second)); !errors.Is(err, driver.ErrNotFound) {
			f.t.Errorf("Waiting with %s = %v, want ErrNotFound", tc.why, err)
		}
		f.deliverRefused(tc.id, driver.Delivery{Name: "hook", Proof: tc.proof, Payload: raw(`{}`)}, f.at(time.Second), driver.ErrNotFound, tc.why)
	}
	f.deliverRefused(id, driver.Delivery{Name: "hook", Payload: raw(`{}`)}, f.at(time.Second), driver.ErrEventClosed, "a signal of a callback's name")
	if f.deliver(id, driver.Delivery{Name: "hook", Proof: proof("tok-1"), Payload: raw(`{"url":"a"}`)}, f.at(2*time.Second)) {
		f.t.Errorf("a delivery to a running task reported resumed")
	}
	f.deliverRefused(id, driver.Delivery{Name: "hook", Proof: proof("tok-1"), Payload: raw(`{"url":"b"}`)}, f.at(3*time.Second), driver.ErrNotFound, "a second delivery")
	if _, err := es.Waiting(f.ctx, id, "", proof("tok-1"), f.at(3*time.Second)); !errors.Is(err, driver.ErrNotFound) {
		f.t.Errorf("Waiting after the delivery = %v, want ErrNotFound", err)
	}
	f.wantStatus(id, driver.StatusWorking)
	f.commit(c, &driver.Change{Now: f.at(4 * time.Second), Release: true})
	nc := f.claim(id, f.at(4*time.Second))
	if !rawMapEqual(nc.Events, map[string]json.RawMessage{"hook": raw(`{"url":"a"}`)}) {
		f.t.Errorf("Claim.Events = %s, want the first delivery", fmtRawMap(nc.Events))
	}
}

// A task awaiting an event is working, shows what it awaits, is not
// claimed before the wait ends, and is resumed (due now) by the
// delivery; the claim then reads the payload.
func testAwaitResumes(f *fixture) {
	until := f.at(time.Hour)
	id, c := f.opened(callbackWait("tok", until))
	f.await(c, "hook", until, f.at(time.Second))
	if !c.Task.WakeAt.Equal(until) {
		f.t.Errorf("claim after the await: WakeAt %v, want %v", c.Task.WakeAt, until)
	}
	got := f.wantStatus(id, driver.StatusWorking)
	if got.Awaiting != "hook" || !got.WakeAt.Equal(until) || !got.LeaseUntil.IsZero() {
		f.t.Errorf("awaiting task: Awaiting %q WakeAt %v LeaseUntil %v, want hook, %v, none", got.Awaiting, got.WakeAt, until, got.LeaseUntil)
	}
	f.wantDue(id, until, "a task awaiting an event")
	f.claimNoLease(id, f.at(time.Minute))
	if !f.deliver(id, driver.Delivery{Name: "hook", Proof: proof("tok"), Payload: raw(`{"url":"x"}`)}, f.at(2*time.Minute)) {
		f.t.Fatalf("a delivery of the awaited event did not report resumed")
	}
	got = f.wantStatus(id, driver.StatusWorking)
	if got.Awaiting != "" || !got.WakeAt.IsZero() {
		f.t.Errorf("resumed task: Awaiting %q WakeAt %v, want none", got.Awaiting, got.WakeAt)
	}
	f.wantDue(id, f.at(2*time.Minute), "a task an event resumed")
	nc := f.claim(id, f.at(2*time.Minute))
	if !jsonEqual(nc.Events["hook"], raw(`{"url":"x"}`)) {
		f.t.Errorf("Claim.Events = %s", fmtRawMap(nc.Events))
	}
}

// An event delivered while the task runs makes its later await release
// it to run at once.
func testAwaitDelivered(f *fixture) {
	until := f.at(time.Hour)
	id, c := f.opened(callbackWait("tok", until))
	f.deliver(id, driver.Delivery{Name: "hook", Proof: proof("tok"), Payload: raw(`{}`)}, f.at(time.Second))
	f.await(c, "hook", until, f.at(2*time.Second))
	if !c.Task.WakeAt.IsZero() {
		f.t.Errorf("await of a delivered event: WakeAt %v, want zero (run now)", c.Task.WakeAt)
	}
	if got := f.get(id); got.Awaiting != "" {
		f.t.Errorf("Awaiting = %q, want none", got.Awaiting)
	}
	f.claim(id, f.at(2*time.Second))
}

// A wait ends at its Until: a delivery then is refused, and a claim at or
// after it closes the wait, so a delivery stamped earlier by a slower
// clock is refused too; the claim reads no payload.
func testWaitTimeout(f *fixture) {
	es := f.events()
	until := f.at(time.Minute)
	id, c := f.opened(callbackWait("tok", until), driver.EventWait{Name: "go", Kind: driver.EventSignal, Until: until})
	f.await(c, "hook", until, f.at(time.Second))
	f.deliverRefused(id, driver.Delivery{Name: "hook", Proof: proof("tok"), Payload: raw(`{}`)}, until, driver.ErrNotFound, "a callback at its wait's end")
	f.deliverRefused(id, driver.Delivery{Name: "go", Payload: raw(`1`)}, until, driver.ErrEventClosed, "a signal at its wait's end")
	nc := f.claim(id, until)
	if len(nc.Events) != 0 {
		f.t.Errorf("Claim at the wait's end read events %s", fmtRawMap(nc.Events))
	}
	late := until.Add(-time.Second)
	f.deliverRefused(id, driver.Delivery{Name: "hook", Proof: proof("tok"), Payload: raw(`{}`)}, late, driver.ErrNotFound, "a callback after the claim that closed it")
	f.deliverRefused(id, driver.Delivery{Name: "go", Payload: raw(`1`)}, late, driver.ErrEventClosed, "a signal after the claim that closed it")
	if _, err := es.Waiting(f.ctx, id, "", proof("tok"), late); !errors.Is(err, driver.ErrNotFound) {
		f.t.Errorf("Waiting for a closed callback = %v, want ErrNotFound", err)
	}
	if _, err := es.Waiting(f.ctx, id, "go", "", late); !errors.Is(err, driver.ErrEventClosed) {
		f.t.Errorf("Waiting for a closed signal = %v, want ErrEventClosed", err)
	}
}

// A signal sent before its wait is kept (Waiting: no wait yet), once; the
// wait that opens later leaves it delivered, and the claim reads it. A
// signal sent to an open wait is checked there; a second one is refused.
func testSignalBuffered(f *fixture) {
	es := f.events()
	id := f.create()
	if w, err := es.Waiting(f.ctx, id, "go", "", f.now); err != nil || w != nil {
		f.t.Errorf("Waiting for a signal without a wait = %+v, %v; want nil, nil", w, err)
	}
	if f.deliver(id, driver.Delivery{Name: "go", Payload: raw(`{"n":1}`)}, f.now) {
		f.t.Errorf("a buffered signal reported resumed")
	}
	f.deliverRefused(id, driver.Delivery{Name: "go", Payload: raw(`{"n":2}`)}, f.now, driver.ErrEventClosed, "a second signal")
	if _, err := es.Waiting(f.ctx, id, "go", "", f.now); !errors.Is(err, driver.ErrEventClosed) {
		f.t.Errorf("Waiting for a delivered signal = %v, want ErrEventClosed", err)
	}
	c := f.claim(id, f.at(time.Second))
	if !jsonEqual(c.Events["go"], raw(`{"n":1}`)) {
		f.t.Errorf("Claim.Events = %s, want the buffered signal", fmtRawMap(c.Events))
	}
	until := f.at(time.Hour)
	f.commit(c, &driver.Change{Now: f.at(time.Second), Append: []driver.Entry{{Name: "go", Kind: driver.KindAwait, Until: until}},
		Open: []driver.EventWait{{Name: "go", Kind: driver.EventSignal, Until: until}, {Name: "later", Kind: driver.EventSignal, Until: until}}})
	f.await(c, "go", until, f.at(2*time.Second))
	if !c.Task.WakeAt.IsZero() {
		f.t.Errorf("await of a buffered signal: WakeAt %v, want zero (run now)", c.Task.WakeAt)
	}
	if w, err := es.Waiting(f.ctx, id, "later", "", f.at(2*time.Second)); err != nil || w == nil || w.Kind != driver.EventSignal || !w.Until.Equal(until) {
		f.t.Errorf("Waiting for an open signal wait = %+v, %v", w, err)
	}
	c = f.claim(id, f.at(3*time.Second))
	f.await(c, "later", until, f.at(3*time.Second))
	if !f.deliver(id, driver.Delivery{Name: "later", Payload: raw(`true`)}, f.at(4*time.Second)) {
		f.t.Errorf("a signal to an awaiting task did not resume it")
	}
	f.deliverRefused(id, driver.Delivery{Name: "later", Payload: raw(`true`)}, f.at(5*time.Second), driver.ErrEventClosed, "a repeated signal")
	if c = f.claim(id, f.at(5*time.Second)); !rawMapEqual(c.Events, map[string]json.RawMessage{"go": raw(`{"n":1}`), "later": raw(`true`)}) {
		f.t.Errorf("Claim.Events = %s", fmtRawMap(c.Events))
	}
}

// A task that ended takes no events: signals are closed, callbacks
// unknown; a task awaiting an event is cancelled at once; a task holds
// at most driver.MaxEvents events.
func testEventsEnd(f *fixture) {
	until := f.at(time.Hour)
	id, c := f.opened(callbackWait("tok", until))
	f.await(c, "hook", until, f.at(time.Second))
	if st, ended := f.cancelEnded(id, f.at(2*time.Second)); !ended || st != driver.StatusCancelled {
		f.t.Errorf("cancelling an awaiting task: %s (ended %v), want cancelled at once", st, ended)
	}
	f.deliverRefused(id, driver.Delivery{Name: "hook", Proof: proof("tok"), Payload: raw(`{}`)}, f.at(3*time.Second), driver.ErrNotFound, "a callback to a cancelled task")
	f.deliverRefused(id, driver.Delivery{Name: "go", Payload: raw(`1`)}, f.at(3*time.Second), driver.ErrEventClosed, "a signal to a cancelled task")
	f.deliverRefused(driver.NewID(), driver.Delivery{Name: "go", Payload: raw(`1`)}, f.now, driver.ErrNotFound, "a signal to an unknown task")

	full := f.create()
	for i := range driver.MaxEvents {
		f.deliver(full, driver.Delivery{Name: fmt.Sprintf("s%d", i), Payload: raw(`1`)}, f.now)
	}
	f.deliverRefused(full, driver.Delivery{Name: "one-more", Payload: raw(`1`)}, f.now, driver.ErrEventClosed, "a signal past MaxEvents")
}
