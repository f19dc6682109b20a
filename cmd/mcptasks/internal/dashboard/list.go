package dashboard

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcptasks/mcptasks/cmd/mcptasks/internal/cli"
	"github.com/mcptasks/mcptasks/pkg/tasks/inspect"
)

// Bounds of the list page.
const (
	// pageSize is how many tasks one page lists.
	pageSize = 100
	// countCap is how many of the newest tasks the counts by status are
	// taken over at most.
	countCap = 5000
	// maxWatched bounds the task ids one live-update stream watches.
	maxWatched = pageSize
)

// listPage is what the list page shows.
type listPage struct {
	Status        []string
	Tool, Owner   string
	Since, Until  string
	Statuses      []string
	Counts, Table region
	Events        string
	Error         string
	Query         string
}

// countsView is the counts region.
type countsView struct {
	Counts []statusCount
	Total  int
	Capped bool
}

type statusCount struct {
	Status   string
	N        int
	Href     string
	Selected bool
}

// tableView is the table region.
type tableView struct {
	Rows  []row
	Older string
}

// row is one task of the table.
type row struct {
	ID, Status, Message, Tool, Owner string
	Created, Age                     string
	Href                             string
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	now := h.now()
	p := &listPage{Tool: strings.TrimSpace(q.Get("tool")), Owner: strings.TrimSpace(q.Get("owner")),
		Since: strings.TrimSpace(q.Get("since")), Until: strings.TrimSpace(q.Get("until"))}
	for _, st := range cli.AllStatuses {
		p.Statuses = append(p.Statuses, string(st))
	}
	f := &inspect.Filter{Tool: p.Tool, Owner: p.Owner}
	var errs []string
	for _, v := range q["status"] {
		sts, err := cli.ParseStatuses(v)
		if err != nil {
			errs = append(errs, "status: "+err.Error())
		}
		for _, st := range sts {
			if !slices.Contains(f.Statuses, st) {
				f.Statuses = append(f.Statuses, st)
				p.Status = append(p.Status, string(st))
			}
		}
	}
	var err error
	if f.Since, err = cli.ParseWhen(p.Since, now); err != nil {
		errs = append(errs, "since: "+err.Error())
	}
	if f.Until, err = cli.ParseWhen(p.Until, now); err != nil {
		errs = append(errs, "until: "+err.Error())
	}
	p.Error = strings.Join(errs, "; ")

	// The counts, over the tasks the other filters select.
	all := *f
	all.Statuses = nil
	counted, capped, err := cli.ListTasks(r.Context(), h.store, &all, countCap, now)
	if err != nil {
		h.log.Error("dashboard: listing", "err", err)
		h.fail(w, http.StatusBadGateway, "reading the tasks failed: "+err.Error())
		return
	}
	byStatus := cli.CountByStatus(counted)
	cv := countsView{Total: len(counted), Capped: capped}
	for _, st := range cli.AllStatuses {
		u := cloneQuery(q)
		u.Del("cursor")
		u.Set("status", string(st))
		cv.Counts = append(cv.Counts, statusCount{Status: string(st), N: byStatus[st], Href: "/?" + u.Encode(), Selected: slices.Contains(f.Statuses, st)})
	}

	ts, next, err := h.store.ListAll(r.Context(), f, q.Get("cursor"), pageSize, now)
	if err != nil {
		h.log.Error("dashboard: listing", "err", err)
		h.fail(w, http.StatusBadRequest, "listing the tasks failed: "+err.Error())
		return
	}
	tv := tableView{}
	ids := make([]string, 0, len(ts))
	for _, t := range ts {
		tv.Rows = append(tv.Rows, row{ID: t.ID, Status: string(t.Status), Message: t.StatusMessage, Tool: t.Tool, Owner: t.Owner,
			Created: t.CreatedAt.Local().Format("2006-01-02 15:04:05"), Age: ago(now.Sub(t.CreatedAt)), Href: "/tasks/" + url.PathEscape(t.ID)})
		ids = append(ids, t.ID)
	}
	if next != "" {
		u := cloneQuery(q)
		u.Set("cursor", next)
		tv.Older = "/?" + u.Encode()
	}
	if p.Counts, err = h.region("counts", cv); err == nil {
		p.Table, err = h.region("table", tv)
	}
	if err != nil {
		h.log.Error("dashboard: rendering", "err", err)
		h.fail(w, http.StatusInternalServerError, "rendering failed")
		return
	}
	ev := url.Values{"ids": {strings.Join(ids, ",")}}
	if q.Get("cursor") == "" {
		ev.Set("head", "1") // new tasks show up on the first page
	}
	p.Events = "/events?" + ev.Encode()
	h.page(w, http.StatusOK, "list", p)
}

func cloneQuery(q url.Values) url.Values {
	out := url.Values{}
	for k, v := range q {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// ago is d, rounded for people.
func ago(d time.Duration) string {
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return d.Truncate(time.Second).String() + " ago"
	case d < time.Hour:
		return d.Truncate(time.Minute).String() + " ago"
	case d < 48*time.Hour:
		return strings.TrimSuffix(d.Truncate(time.Minute).String(), "0s") + " ago"
	}
	return strconv.Itoa(int(d/(24*time.Hour))) + "d ago"
}
