package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
)

// heartbeat is how often an idle stream sends a comment, so that proxies
// and the browser keep it open.
const heartbeat = 15 * time.Second

// events streams the live updates of a page (text/event-stream): a
// "change" event whenever one of the tasks ids (at most maxWatched) may
// have changed (the store's announcements, or on a store that makes none,
// a poll of their state; a single task's page polls besides) and, with head=1, whenever a task newer than the
// newest one at the start appears. The page then reloads what changed.
// The stream starts with a change (what moved before it subscribed is
// seen) and ends after Options.StreamFor (the page reconnects).
func (h *Handler) events(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	var ids []string
	for _, id := range strings.Split(r.URL.Query().Get("ids"), ",") {
		if driver.ValidID(id) && len(ids) < maxWatched {
			ids = append(ids, id)
		}
	}
	head := r.URL.Query().Get("head") == "1"
	ctx, cancel := context.WithTimeout(r.Context(), h.streamFor)
	defer cancel()

	changed := make(chan string, 1)
	notify := func(id string) {
		select {
		case changed <- id:
		default: // one pending change is enough: the page reloads it all
		}
	}
	polled := h.watch == nil
	if !polled && len(ids) > 0 {
		sub, err := h.watch.Watch(ctx, ids, notify)
		if err != nil {
			h.log.Warn("dashboard: watching tasks failed; polling instead", "err", err)
			polled = true
		} else {
			select {
			case <-sub.Ready:
			case <-ctx.Done():
				return
			}
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// A first change at once: what moved between the page's rendering and
	// this stream's subscription was announced to nobody, so the page
	// looks again (it replaces only what differs).
	fmt.Fprint(w, "retry: 1000\n: ready\n\nevent: change\ndata: \n\n")
	flusher.Flush()

	newest := h.newest(ctx)
	states := map[string]string{}
	// A task's page also polls its task: a step journaled while the task
	// keeps working changes its history, not what a client sees, and is
	// announced by no store.
	polled = polled || (len(ids) == 1 && !head)
	if polled {
		states = h.states(ctx, ids)
	}
	tick := time.NewTicker(h.poll)
	defer tick.Stop()
	beat := time.NewTicker(heartbeat)
	defer beat.Stop()
	send := func(id string) bool {
		_, err := fmt.Fprintf(w, "event: change\ndata: %s\n\n", id)
		flusher.Flush()
		return err == nil
	}
	for {
		select {
		case <-ctx.Done():
			return
		case id := <-changed:
			if !send(id) {
				return
			}
		case <-beat.C:
			if _, err := fmt.Fprint(w, ": beat\n\n"); err != nil {
				return
			}
			flusher.Flush()
		case <-tick.C:
			if head {
				if n := h.newest(ctx); n != newest {
					newest = n
					notify(n)
				}
			}
			if polled {
				for id, st := range h.states(ctx, ids) {
					if states[id] != st {
						states[id] = st
						notify(id)
					}
				}
			}
		}
	}
}

// newest is the id of the newest task ("" for none or on error).
func (h *Handler) newest(ctx context.Context) string {
	ts, _, err := h.store.ListAll(ctx, nil, "", 1, h.now())
	if err != nil || len(ts) == 0 {
		return ""
	}
	return ts[0].ID
}

// states is a fingerprint of each task's visible state, for a store that
// announces nothing.
func (h *Handler) states(ctx context.Context, ids []string) map[string]string {
	out := make(map[string]string, len(ids))
	for _, id := range ids {
		t, err := h.store.Peek(ctx, id)
		if err != nil {
			out[id] = "gone"
			continue
		}
		out[id] = string(t.Status) + "|" + t.UpdatedAt.String() + "|" + t.StatusMessage
	}
	return out
}
