// Package examples holds the documented example tools that this
// repository's entry points serve (the local server, the Vercel functions
// and the Lambda functions): a quick synchronous tool and slow task tools
// built on the Step API. Like any user's tool package, it imports pkg/tasks
// and the go-sdk, and nothing of the wiring.
package examples

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// GreetArgs are the arguments of greet.
type GreetArgs struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

// SlowArgs are the arguments of slow_compute.
type SlowArgs struct {
	Seconds int    `json:"seconds" jsonschema:"how long the computation takes, in seconds (0 to 86400)"`
	Label   string `json:"label,omitempty" jsonschema:"a label echoed in the result"`
}

// ConfirmArgs are the arguments of confirm_delete.
type ConfirmArgs struct {
	Filename string `json:"filename" jsonschema:"the file to delete"`
}

// Confirmation is what confirm_delete asks the user for.
type Confirmation struct {
	Confirm bool `json:"confirm" jsonschema:"delete the file?"`
}

// Bounds of the tools' durations, so that a client's number never
// overflows a time.Duration.
const (
	maxSeconds = 86400   // slow_compute's seconds: a day
	maxMillis  = 3600000 // each part's and pause's milliseconds: an hour
)

// Version is the version the example app reports in serverInfo.
const Version = "0.2.0"

// App is the example deployment: the example tools, served under the name
// "examples" (mcptasks --app examples, MCPTASKS_APP=examples).
var App = &tasks.App{Name: "examples", Title: "mcptasks examples", Version: Version, Register: Register}

// Register adds the example tools to s:
//
//   - greet (sync): "Hello, {name}!".
//   - slow_compute (task, optional): sleeps `seconds` durably, then reports.
//   - confirm_delete (task, optional): asks the user to confirm through an
//     input round, then "deletes" the file.
//   - batch_report (task, optional): processes `steps` parts, one durable
//     step each.
//   - stoppable_batch (task, optional): processes `parts` parts, offering
//     the user to stop early (an offer it checks between parts), then
//     writes a summary; every part runs under the tool's step policy.
//   - transcode (task, optional): hands a video to a transcoding service
//     (a fake one in the worker's process, or one on this machine) with a
//     callback URL, and waits, without any invocation, until the service
//     calls back (or the wait times out).
//   - index_documents (task, optional): indexes `documents` documents in a
//     parallel step, each in a worker invocation of its own, at most
//     `concurrency` at once.
func Register(s *tasks.Server) {
	tasks.AddTool(s, &mcp.Tool{Name: "transcode", Description: "Transcodes a video: hands it to a transcoding service " +
		"with a callback URL and waits until the service calls back."},
		tasks.Optional, transcode(s.Options().Logger))
	tasks.AddTool(s, &mcp.Tool{Name: "index_documents", Description: "Indexes `documents` documents in parallel, " +
		"each in a worker invocation of its own, then reports the words indexed."},
		tasks.Optional, indexDocuments(s.Options().Logger))
	tasks.AddTool(s, &mcp.Tool{Name: "batch_report", Description: "Processes a report in `steps` parts, one durable step per part."},
		tasks.Optional, batchReport(s.Options().Logger))
	tasks.AddTool(s, &mcp.Tool{Name: "stoppable_batch", Description: "Processes `parts` parts, one durable step each, " +
		"then writes a summary. While it runs it offers \"stop\" (an input request it does not wait for): " +
		"answer it through tasks/update and the job stops after the part in flight, even in the middle of a pause."},
		tasks.Optional, stoppableBatch(s.Options().Logger),
		tasks.StepDefaults(tasks.Retries(3), tasks.Backoff(time.Second, 30*time.Second), tasks.Timeout(time.Minute)))
	mcp.AddTool(s.MCP(), &mcp.Tool{Name: "greet", Description: "Greets someone, synchronously."},
		func(_ context.Context, _ *mcp.CallToolRequest, in GreetArgs) (*mcp.CallToolResult, any, error) {
			return text(fmt.Sprintf("Hello, %s!", in.Name)), nil, nil
		})

	tasks.AddTool(s, &mcp.Tool{Name: "slow_compute", Description: "Computes slowly: a durable task that sleeps `seconds`, then reports."},
		tasks.Optional, func(ctx context.Context, st *tasks.Step, in SlowArgs) (*mcp.CallToolResult, error) {
			if in.Seconds < 0 || in.Seconds > maxSeconds {
				return nil, &jsonrpc.Error{Code: -32602, Message: fmt.Sprintf("seconds must be between 0 and %d", maxSeconds)}
			}
			st.Status(fmt.Sprintf("computing for %ds", in.Seconds))
			start, err := tasks.Do(st, "start", func(context.Context) (time.Time, error) { return time.Now().UTC(), nil })
			if err != nil {
				return nil, err
			}
			if err := st.Sleep("compute", time.Duration(in.Seconds)*time.Second); err != nil {
				return nil, err
			}
			st.Status("done")
			return text(fmt.Sprintf("computed %q in %ds (started %s)", in.Label, in.Seconds, start.Format(time.RFC3339))), nil
		})

	tasks.AddTool(s, &mcp.Tool{Name: "confirm_delete", Description: "Deletes a file after the user confirms (an input round)."},
		tasks.Optional, func(ctx context.Context, st *tasks.Step, in ConfirmArgs) (*mcp.CallToolResult, error) {
			st.Status("waiting for confirmation")
			ans, err := tasks.Elicit[Confirmation](st, "confirm", fmt.Sprintf("Delete %s?", in.Filename))
			if err != nil {
				return nil, err
			}
			if !ans.Accepted() || !ans.Content.Confirm {
				return text(fmt.Sprintf("kept %s", in.Filename)), nil
			}
			if _, err := tasks.Do(st, "delete", func(context.Context) (bool, error) { return true, nil }); err != nil {
				return nil, err
			}
			return text(fmt.Sprintf("deleted %s", in.Filename)), nil
		})
}

// BatchArgs are the arguments of batch_report.
type BatchArgs struct {
	Steps      int `json:"steps" jsonschema:"how many parts to process (1-100)"`
	StepMillis int `json:"stepMillis,omitempty" jsonschema:"how long each part takes, in milliseconds (at most 3600000)"`
}

// batchReport processes a report part by part, one durable step each. Each
// part logs "running step" on the deployment's logger when its closure
// runs, so a reader of the logs sees that no journaled part is ever
// processed twice.
func batchReport(log *slog.Logger) tasks.Handler[BatchArgs] {
	return func(ctx context.Context, st *tasks.Step, in BatchArgs) (*mcp.CallToolResult, error) {
		return batch(ctx, log, st, in)
	}
}

func batch(ctx context.Context, log *slog.Logger, st *tasks.Step, in BatchArgs) (*mcp.CallToolResult, error) {
	if in.Steps < 1 || in.Steps > 100 {
		return nil, &jsonrpc.Error{Code: -32602, Message: "steps must be between 1 and 100"}
	}
	if in.StepMillis < 0 || in.StepMillis > maxMillis {
		return nil, &jsonrpc.Error{Code: -32602, Message: fmt.Sprintf("stepMillis must be between 0 and %d", maxMillis)}
	}
	total := 0
	for i := 1; i <= in.Steps; i++ {
		st.Status(fmt.Sprintf("processing part %d of %d", i, in.Steps))
		name := fmt.Sprintf("part-%d", i)
		n, err := tasks.Do(st, name, func(ctx context.Context) (int, error) {
			log.InfoContext(ctx, "running step", "task", st.TaskID(), "step", name)
			if err := sleepCtx(ctx, time.Duration(in.StepMillis)*time.Millisecond); err != nil {
				return 0, err
			}
			return i * i, nil
		})
		if err != nil {
			return nil, err
		}
		total += n
	}
	st.Status("done")
	return text(fmt.Sprintf("processed %d parts, checksum %d", in.Steps, total)), nil
}

// StoppableArgs are the arguments of stoppable_batch.
type StoppableArgs struct {
	Parts       int `json:"parts" jsonschema:"how many parts to process (1-100)"`
	PartMillis  int `json:"partMillis,omitempty" jsonschema:"how long each part takes, in milliseconds (at most 3600000)"`
	PauseMillis int `json:"pauseMillis,omitempty" jsonschema:"a durable pause between parts, in milliseconds (at most 3600000; an answer to stop cuts it short)"`
}

// StopEarly is what stoppable_batch offers the user under the key "stop".
type StopEarly struct {
	Stop bool `json:"stop" jsonschema:"stop after the part in flight?"`
}

// stoppableBatch processes parts like batch_report, with an offer to stop
// early that it checks before each part. The offer is answered once: an
// accepted {"stop": true} stops the job; any other answer lets it run to
// the end. Every part and the summary log "running step" when their
// closure runs.
func stoppableBatch(log *slog.Logger) tasks.Handler[StoppableArgs] {
	return func(ctx context.Context, st *tasks.Step, in StoppableArgs) (*mcp.CallToolResult, error) {
		if in.Parts < 1 || in.Parts > 100 {
			return nil, &jsonrpc.Error{Code: -32602, Message: "parts must be between 1 and 100"}
		}
		if in.PartMillis < 0 || in.PartMillis > maxMillis || in.PauseMillis < 0 || in.PauseMillis > maxMillis {
			return nil, &jsonrpc.Error{Code: -32602, Message: fmt.Sprintf("partMillis and pauseMillis must be between 0 and %d", maxMillis)}
		}
		if err := tasks.OfferElicit[StopEarly](st, "stop", "Stop after the part in flight?"); err != nil {
			return nil, err
		}
		step := func(name string, fn func() int) (int, error) {
			return tasks.Do(st, name, func(ctx context.Context) (int, error) {
				log.InfoContext(ctx, "running step", "task", st.TaskID(), "step", name)
				if err := sleepCtx(ctx, time.Duration(in.PartMillis)*time.Millisecond); err != nil {
					return 0, err
				}
				return fn(), nil
			})
		}
		done, total, stopped := 0, 0, false
		for i := 1; i <= in.Parts; i++ {
			ans, ok, err := tasks.CheckElicit[StopEarly](st, "stop")
			if err != nil {
				return nil, err
			}
			if stopped = ok && ans.Accepted() && ans.Content.Stop; stopped {
				break
			}
			st.Status(fmt.Sprintf("processing part %d of %d", i, in.Parts))
			n, err := step(fmt.Sprintf("part-%d", i), func() int { return i * i })
			if err != nil {
				return nil, err
			}
			done, total = done+1, total+n
			if in.PauseMillis > 0 && i < in.Parts {
				err := st.Sleep(fmt.Sprintf("pause-%d", i), time.Duration(in.PauseMillis)*time.Millisecond)
				if err != nil && !errors.Is(err, tasks.ErrWoken) {
					return nil, err
				}
			}
		}
		st.Withdraw("stop")
		st.Status("writing the summary")
		if _, err := step("summary", func() int { return done }); err != nil {
			return nil, err
		}
		msg := fmt.Sprintf("processed %d of %d parts, checksum %d", done, in.Parts, total)
		if stopped {
			msg += "; stopped early"
		}
		return text(msg), nil
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}
