package dashboard

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/mcptasks/mcptasks/cmd/mcptasks/internal/cli"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// taskPage is what a task's page shows.
type taskPage struct {
	ID       string
	Status   string
	Record   region
	Timeline region
	Inputs   region
	Events   string
	Flash    string
	Error    string
}

// recordView is the record region.
type recordView struct {
	T                         *cli.Timeline
	Created, Updated, Expires string
	Args, Result, Err         string
	Waiting                   string
	Live                      bool
}

// inputsView is the region of the input requests and the actions.
type inputsView struct {
	ID     string
	Live   bool
	Inputs []inputForm
}

// inputForm is one outstanding input request and its form.
type inputForm struct {
	Key, Method, Message string
	// Elicit: an elicitation/create in form mode (Fields), URLMode one in
	// URL mode (URL); otherwise the answer is raw JSON.
	Elicit, URLMode bool
	URL             string
	Fields          []cli.FormField
	Offer           bool
	Error           string
}

func (h *Handler) task(w http.ResponseWriter, r *http.Request) {
	h.showTask(w, r, http.StatusOK, "", "")
}

// showTask renders the page of the task in r's path, with a message above
// it (flash: done; failure: refused), or else whatever the query carries.
func (h *Handler) showTask(w http.ResponseWriter, r *http.Request, status int, flash, failure string) {
	id := r.PathValue("id")
	rec, err := h.store.Inspect(r.Context(), id)
	if errors.Is(err, driver.ErrNotFound) {
		h.fail(w, http.StatusNotFound, "no task "+id+" (never created, or expired)")
		return
	}
	if err != nil {
		h.log.Error("dashboard: reading a task", "task", id, "err", err)
		h.fail(w, http.StatusBadGateway, "reading the task failed: "+err.Error())
		return
	}
	now := h.now()
	tl := cli.NewTimeline(rec, now)
	live := !tl.Status.Terminal()
	rv := recordView{T: tl, Created: stamp(tl.CreatedAt), Updated: stamp(tl.UpdatedAt), Expires: stamp(tl.ExpiresAt),
		Args: pretty(tl.Arguments), Result: pretty(tl.Result), Waiting: tl.Waiting(), Live: live}
	if tl.Error != nil {
		b, _ := json.MarshalIndent(tl.Error, "", "  ")
		rv.Err = string(b)
	}
	iv := inputsView{ID: id, Live: live}
	if live {
		reqs := maps.Clone(rec.Waiting)
		if reqs == nil {
			reqs = map[string]json.RawMessage{}
		}
		maps.Copy(reqs, rec.Offers)
		for _, k := range slices.Sorted(maps.Keys(reqs)) {
			_, offer := rec.Offers[k]
			iv.Inputs = append(iv.Inputs, inputFormOf(k, reqs[k], offer))
		}
	}
	p := &taskPage{ID: id, Status: string(tl.Status), Flash: flash, Error: failure}
	if p.Flash == "" {
		p.Flash = r.URL.Query().Get("done")
	}
	if p.Record, err = h.region("record", rv); err == nil {
		if p.Timeline, err = h.region("timeline", drawTimeline(tl, now)); err == nil {
			p.Inputs, err = h.region("inputs", iv)
		}
	}
	if err != nil {
		h.log.Error("dashboard: rendering", "err", err)
		h.fail(w, http.StatusInternalServerError, "rendering failed")
		return
	}
	p.Events = "/events?" + url.Values{"ids": {id}}.Encode()
	h.page(w, status, "task", p)
}

// inputFormOf describes the input request req (as stored: method and
// params) and its form.
func inputFormOf(key string, req json.RawMessage, offer bool) inputForm {
	var r struct {
		Method string `json:"method"`
		Params struct {
			Message         string          `json:"message"`
			Mode            string          `json:"mode"`
			URL             string          `json:"url"`
			RequestedSchema json.RawMessage `json:"requestedSchema"`
		} `json:"params"`
	}
	_ = json.Unmarshal(req, &r)
	f := inputForm{Key: key, Method: r.Method, Message: r.Params.Message, Offer: offer}
	if r.Method != "elicitation/create" {
		return f
	}
	if r.Params.Mode == "url" {
		f.URLMode, f.URL = true, r.Params.URL
		return f
	}
	fields, err := cli.FormFields(r.Params.RequestedSchema)
	if err != nil {
		f.Error = err.Error()
		return f
	}
	f.Elicit, f.Fields = true, fields
	return f
}

// owner reads the owner of the task in r's path (the operator acts on its
// behalf), or answers the error itself.
func (h *Handler) owner(w http.ResponseWriter, r *http.Request) (string, bool) {
	t, err := h.store.Peek(r.Context(), r.PathValue("id"))
	if errors.Is(err, driver.ErrNotFound) {
		h.fail(w, http.StatusNotFound, "no task "+r.PathValue("id"))
		return "", false
	}
	if err != nil {
		h.fail(w, http.StatusBadGateway, "reading the task failed: "+err.Error())
		return "", false
	}
	return t.Owner, true
}

// audit logs the operator's action on the task of owner before the server
// takes it.
func (h *Handler) audit(r *http.Request, event, owner string, attrs ...slog.Attr) {
	attrs = append([]slog.Attr{slog.String("event", event), slog.String("principal", owner),
		slog.String("task", r.PathValue("id")), slog.String("operator", "dashboard"), slog.String("remote", r.RemoteAddr)}, attrs...)
	h.log.LogAttrs(r.Context(), slog.LevelInfo, tasks.AuditMessage, attrs...)
}

// Audit events of the dashboard's actions.
const (
	AuditOperatorCancel = "operator_cancel"
	AuditOperatorAnswer = "operator_answer"
)

func (h *Handler) cancel(w http.ResponseWriter, r *http.Request) {
	owner, ok := h.owner(w, r)
	if !ok {
		return
	}
	h.audit(r, AuditOperatorCancel, owner)
	if err := h.srv.CancelAs(r.Context(), owner, r.PathValue("id")); err != nil {
		h.showTask(w, r, statusOf(err), "", "cancel failed: "+message(err))
		return
	}
	h.done(w, r, "cancellation requested")
}

// maxForm bounds an answer's form.
const maxForm = 1 << 20

func (h *Handler) answer(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		h.showTask(w, r, http.StatusBadRequest, "", "the form could not be read: "+err.Error())
		return
	}
	owner, ok := h.owner(w, r)
	if !ok {
		return
	}
	id, key := r.PathValue("id"), r.PostForm.Get("key")
	rec, err := h.store.Inspect(r.Context(), id)
	if err != nil {
		h.fail(w, http.StatusBadGateway, "reading the task failed: "+err.Error())
		return
	}
	req, ok := rec.Waiting[key]
	if !ok {
		req, ok = rec.Offers[key]
	}
	if !ok {
		h.showTask(w, r, http.StatusConflict, "", "the task no longer waits for "+key)
		return
	}
	resp, err := formAnswer(inputFormOf(key, req, false), req, r.PostForm)
	if err != nil {
		h.showTask(w, r, http.StatusUnprocessableEntity, "", "answer to "+key+": "+err.Error())
		return
	}
	h.audit(r, AuditOperatorAnswer, owner, slog.String("keys", key))
	if err := h.srv.AnswerAs(r.Context(), owner, id, map[string]json.RawMessage{key: resp}); err != nil {
		h.showTask(w, r, statusOf(err), "", message(err))
		return
	}
	h.done(w, r, "answered "+key)
}

// formAnswer builds the answer to the input request of f (req as stored)
// from a submitted form: an elicitation's action (the button pressed) and,
// accepted, its content; anything else's raw JSON.
func formAnswer(f inputForm, req json.RawMessage, form url.Values) (json.RawMessage, error) {
	if f.Method != "elicitation/create" {
		raw := strings.TrimSpace(form.Get("raw"))
		if !json.Valid([]byte(raw)) {
			return nil, errors.New("the answer is not valid JSON")
		}
		var b bytes.Buffer
		_ = json.Compact(&b, []byte(raw))
		return b.Bytes(), nil
	}
	action := form.Get("action")
	switch action {
	case "decline", "cancel":
		return json.Marshal(map[string]string{"action": action})
	case "accept":
	default:
		return nil, errors.New("no action chosen (accept, decline or cancel)")
	}
	if f.URLMode {
		return json.Marshal(map[string]string{"action": "accept"})
	}
	var r struct {
		Params struct {
			RequestedSchema json.RawMessage `json:"requestedSchema"`
		} `json:"params"`
	}
	_ = json.Unmarshal(req, &r)
	values := map[string][]string{}
	for k, v := range form {
		if name, ok := strings.CutPrefix(k, "f."); ok {
			values[name] = v
		}
	}
	content, err := cli.FormContent(r.Params.RequestedSchema, values)
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{"action": "accept", "content": content})
}

// done redirects to the task's page after an action (POST, redirect, GET).
func (h *Handler) done(w http.ResponseWriter, r *http.Request, what string) {
	http.Redirect(w, r, "/tasks/"+url.PathEscape(r.PathValue("id"))+"?"+url.Values{"done": {what}}.Encode(), http.StatusSeeOther)
}

// statusOf is the HTTP status of a refused action: the JSON-RPC error's.
func statusOf(err error) int {
	var je *jsonrpc.Error
	if errors.As(err, &je) && je.Code == tasks.CodeInvalidParams {
		return http.StatusUnprocessableEntity
	}
	return http.StatusBadGateway
}

// message is what a refused action says.
func message(err error) string {
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return je.Message
	}
	return err.Error()
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Local().Format("2006-01-02 15:04:05.000")
}

// pretty indents raw JSON ("" for none).
func pretty(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") != nil {
		return string(raw)
	}
	return b.String()
}
