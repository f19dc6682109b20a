package dashboard

import (
	"time"

	"github.com/mcptasks/mcptasks/cmd/mcptasks/internal/cli"
)

// timelineView is the timeline region: the events of mcptasks inspect,
// each a row with a bar or a mark on one time axis from the task's
// creation to its end (or now, or the latest time an event waits for).
type timelineView struct {
	Span  string
	Ticks []tick
	Rows  []tlRow
}

// tick is a mark of the axis: X in [0, 1000].
type tick struct {
	X     float64
	Label string
}

// tlRow is one event: Kind is the inspect event (step, attempt_failed,
// sleep, input, answered, offer, ...), Class how it is drawn; a bar
// spans [X, X+W] (W 0: a mark at X).
type tlRow struct {
	Kind, What, Detail string
	At, Offset         string
	Class              string
	X, W               float64
	Bar                bool
}

// axisWidth is the width of the axis in the rows' SVG units.
const axisWidth = 1000

// drawTimeline lays tl's events out on a time axis.
func drawTimeline(tl *cli.Timeline, now time.Time) timelineView {
	start := tl.CreatedAt
	end := tl.UpdatedAt
	if !tl.Status.Terminal() && now.After(end) {
		end = now
	}
	// When each input round ended: when the last of its keys was
	// answered.
	answered := map[string]time.Time{}
	for _, ev := range tl.Timeline {
		if ev.Event == "answered" {
			answered[ev.Name] = ev.At
		}
	}
	inputEnd := func(ev cli.TimelineEvent) time.Time {
		var last time.Time
		for _, k := range ev.Keys {
			at, ok := answered[k]
			if !ok {
				if tl.Status.Terminal() {
					return tl.UpdatedAt
				}
				return end
			}
			if at.After(last) {
				last = at
			}
		}
		if last.IsZero() {
			return end
		}
		return last
	}
	type span struct{ from, to time.Time }
	spans := make([]span, len(tl.Timeline))
	for i, ev := range tl.Timeline {
		took := time.Duration(ev.DurationMs) * time.Millisecond
		s := span{ev.At, ev.At}
		switch ev.Event {
		case "step", "attempt_failed":
			s.from = ev.At.Add(-took)
		case "sleep":
			s.to = ev.Until
		case "input":
			s.to = inputEnd(ev)
		}
		if s.from.Before(start) {
			s.from = start
		}
		if s.to.Before(s.from) {
			s.to = s.from
		}
		spans[i] = s
		if s.to.After(end) && !tl.Status.Terminal() {
			end = s.to
		}
	}
	total := end.Sub(start)
	if total <= 0 {
		total = time.Millisecond
	}
	x := func(t time.Time) float64 {
		v := float64(t.Sub(start)) / float64(total) * axisWidth
		return min(max(v, 0), axisWidth)
	}
	v := timelineView{Span: total.Round(time.Millisecond).String()}
	for i := range 5 {
		d := total * time.Duration(i) / 4
		v.Ticks = append(v.Ticks, tick{X: float64(i) * axisWidth / 4, Label: "+" + roundDur(d)})
	}
	for i, ev := range tl.Timeline {
		what, detail := tl.Describe(ev)
		r := tlRow{Kind: ev.Event, What: what, Detail: detail, At: ev.At.Local().Format("15:04:05.000"),
			Offset: "+" + roundDur(ev.At.Sub(start)), Class: ev.Event}
		s := spans[i]
		r.X = x(s.from)
		if w := x(s.to) - r.X; s.to.After(s.from) {
			r.Bar, r.W = true, max(w, 2)
		}
		if ev.Event == "step" && ev.Error != "" {
			r.Class = "step failed"
		}
		v.Rows = append(v.Rows, r)
	}
	return v
}

// roundDur rounds d for an axis label.
func roundDur(d time.Duration) string {
	switch {
	case d >= time.Hour:
		return d.Round(time.Minute).String()
	case d >= time.Minute:
		return d.Round(time.Second).String()
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	}
	return d.Round(time.Millisecond).String()
}
