package storetest

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
)

// wantOutstanding checks Outstanding(id) at now against want.
func (f *fixture) wantOutstanding(id string, now time.Time, want map[string]json.RawMessage, why string) {
	f.t.Helper()
	got, err := f.s.Outstanding(f.ctx, owner, id, now)
	if err != nil {
		f.t.Fatalf("Outstanding(%s) %s: %v", id, why, err)
	}
	if !rawMapEqual(got, want) {
		f.t.Errorf("Outstanding(%s) %s = %s, want %s", id, why, fmtRawMap(got), fmtRawMap(want))
	}
}

// Outstanding returns the requests an answer is taken for now: those a
// parked task waits for (before its deadline, until answered) and its
// offers in any live status; nothing for a terminal task; ErrNotFound for
// a foreign or unknown task, as Get.
func testOutstanding(f *fixture) {
	// A running task with an offer: the offer, though tasks/get shows no
	// input requests.
	id, c := f.offering()
	f.wantOutstanding(id, f.now, map[string]json.RawMessage{"stop": stopOffer}, "while working with an offer")
	for _, who := range []string{"someone-else", ""} {
		if _, err := f.s.Outstanding(f.ctx, who, id, f.now); !errors.Is(err, driver.ErrNotFound) {
			f.t.Errorf("Outstanding by %q = %v, want ErrNotFound", who, err)
		}
	}
	if _, err := f.s.Outstanding(f.ctx, owner, driver.NewID(), f.now); !errors.Is(err, driver.ErrNotFound) {
		f.t.Errorf("Outstanding of an unknown task = %v, want ErrNotFound", err)
	}
	// Parked for input with a deadline, the offer still up: both, until
	// the deadline; one answered leaves.
	reqs := requests()
	deadline := f.at(time.Minute)
	f.commit(c, &driver.Change{Now: f.now, Park: reqs, WakeAt: deadline})
	all := map[string]json.RawMessage{"stop": stopOffer, "confirm": reqs["confirm"], "pick": reqs["pick"]}
	f.wantOutstanding(id, f.at(time.Second), all, "while parked")
	f.update(id, map[string]json.RawMessage{"confirm": raw(`{"action":"accept"}`)}, f.at(2*time.Second))
	f.wantOutstanding(id, f.at(3*time.Second), map[string]json.RawMessage{"stop": stopOffer, "pick": reqs["pick"]}, "after one answer")
	f.wantOutstanding(id, deadline.Add(time.Millisecond), map[string]json.RawMessage{"stop": stopOffer}, "past the deadline")
	// Terminal: nothing.
	c2 := f.claim(id, deadline.Add(time.Second))
	f.commit(c2, &driver.Change{Now: deadline.Add(time.Second), Complete: raw(`{"content":[]}`)})
	f.wantOutstanding(id, deadline.Add(2*time.Second), map[string]json.RawMessage{}, "once completed")
}
