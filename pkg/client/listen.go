package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Task streams: while it waits for a task, the client listens for it
// (subscriptions/listen with params.notifications.taskIds, SEP-2575 and
// SEP-2663) instead of polling, when the server offers it: the server's
// acknowledgement names the task. Each notifications/tasks carries the task
// as tasks/get shows it, and is handled as a poll's answer would be (input
// requests answered, the terminal state returned). A stream ends with its
// listen result when the task ends or at the server's time limit; the
// client then reads the task once and listens again. A server that refuses
// the listen, or leaves the task out of its acknowledgement, is polled (and
// a refusal is remembered by the Client). See [WithPolling].

// listenTimeout bounds one listen stream; a server ends its streams well
// before (within its platform's time limit).
const listenTimeout = 15 * time.Minute

// errNoStream: the server does not stream this task; poll it.
var errNoStream = errors.New("the server does not stream this task")

// WithPolling makes the client poll tasks/get only, never listening for
// task notifications.
func WithPolling() Option {
	return func(c *Client) { c.noListen.Store(true) }
}

// listen streams the task id: fn gets each state the server sends, until
// the stream ends (nil), fn returns stop or an error, or ctx ends. It
// returns errNoStream when the server does not stream the task.
func (c *Client) listen(ctx context.Context, id string, elicit bool, fn func(*Task) (stop bool, err error)) error {
	cl := call{method: "subscriptions/listen", params: map[string]any{"notifications": map[string]any{"taskIds": []string{id}}}, elicit: elicit}
	reqID := c.nextID.Add(1)
	body, err := c.envelope(reqID, cl)
	if err != nil {
		return err
	}
	lctx, cancel := context.WithTimeout(ctx, listenTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(lctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, v := range c.header {
		req.Header[k] = append([]string(nil), v...)
	}
	if c.token != nil {
		tok, err := c.token(ctx)
		if err != nil {
			return fmt.Errorf("%s: getting the bearer token: %w", cl.method, err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", ProtocolVersion)
	req.Header.Set("Mcp-Method", cl.method)
	c.log.DebugContext(ctx, "mcp request", "method", cl.method, "task", id, "id", reqID)
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return fmt.Errorf("%w: %w", errNoStream, err) // poll this time
	}
	defer resp.Body.Close()
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		// A refusal (-32601, -32021, a 4xx): this server has no task
		// streams. A 5xx may pass, and so does 429 (too many streams open
		// at once): poll this time, listen again next time.
		if resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests {
			c.noListen.Store(true)
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return fmt.Errorf("%w (HTTP %d)", errNoStream, resp.StatusCode)
	}
	acked := false
	return eachSSE(io.LimitReader(resp.Body, c.maxBody), func(data []byte) (bool, error) {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal(data, &msg) != nil {
			return false, nil
		}
		switch msg.Method {
		case "notifications/subscriptions/acknowledged":
			var p struct {
				Notifications struct {
					TaskIDs []string `json:"taskIds"`
				} `json:"notifications"`
			}
			_ = json.Unmarshal(msg.Params, &p)
			if !slices.Contains(p.Notifications.TaskIDs, id) {
				return true, errNoStream
			}
			acked = true
		case "notifications/tasks":
			if !acked {
				return false, nil
			}
			var w wireTask
			if err := json.Unmarshal(msg.Params, &w); err != nil || w.TaskID != id {
				return false, nil
			}
			t, err := w.task()
			if err != nil {
				return true, fmt.Errorf("notifications/tasks %s: %w", id, err)
			}
			return fn(t)
		case "":
			if msg.Result != nil || strings.TrimSpace(string(msg.ID)) == fmt.Sprint(reqID) {
				return true, nil // the listen result: the stream is over
			}
		}
		return false, nil
	}, func() error {
		if !acked {
			return errNoStream
		}
		return nil
	})
}

// eachSSE calls fn with the data of each event of r until fn stops, and
// ended when r ends first.
func eachSSE(r io.Reader, fn func(data []byte) (stop bool, err error), ended func() error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	var data bytes.Buffer
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if data.Len() > 0 {
				stop, err := fn(data.Bytes())
				data.Reset()
				if stop || err != nil {
					return err
				}
			}
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		if field != "data" {
			continue
		}
		if data.Len() > 0 {
			data.WriteByte('\n')
		}
		data.WriteString(strings.TrimPrefix(value, " "))
	}
	return ended()
}

// stream follows the task over a listen stream, as wait does over polls.
// It returns the last state it saw (nil for none), or errNoStream when the
// server does not stream the task.
func (w *waiter) stream(ctx context.Context) (*Task, error) {
	var last *Task
	err := w.c.listen(ctx, w.id, w.cfg.input != nil, func(t *Task) (bool, error) {
		w.observe(t)
		last = t
		if t.Status.Terminal() {
			return true, nil
		}
		if t.Status == StatusInputRequired {
			if _, err := w.answer(ctx, t); err != nil {
				return true, err
			}
		}
		return false, nil
	})
	return last, err
}
