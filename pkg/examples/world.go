package examples

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcptasks/mcptasks/pkg/tasks"
)

// TranscodeArgs are the arguments of transcode.
type TranscodeArgs struct {
	Video          string `json:"video" jsonschema:"the video to transcode"`
	Seconds        int    `json:"seconds,omitempty" jsonschema:"how long the fake transcoding service takes before it calls back, in seconds (default 2, at most 3600)"`
	TimeoutSeconds int    `json:"timeoutSeconds,omitempty" jsonschema:"how long to wait for the callback, in seconds (default 600, at most 86400)"`
	Service        string `json:"service,omitempty" jsonschema:"a transcoding service on this machine (a loopback http URL) to POST the job to, instead of the fake one in the worker's process"`
}

// Job is what transcode POSTs to a transcoding service: the video, and
// the URL to call back when it is done.
type Job struct {
	Video       string `json:"video"`
	CallbackURL string `json:"callbackUrl"`
}

// Transcoded is what a transcoding service POSTs to the callback URL.
type Transcoded struct {
	Output string `json:"output" jsonschema:"where the transcoded video is"`
}

// EnvTranscodeSecret names the environment variable that holds the
// Standard Webhooks signing secret of the transcoding service: when it is
// set, transcode's callback URL takes only requests signed with it.
const EnvTranscodeSecret = "TRANSCODE_WEBHOOK_SECRET"

// transcode hands a video to a transcoding service with a callback URL and
// waits for the service to call back: the task waits without any
// invocation until the POST arrives (or the wait times out).
func transcode(log *slog.Logger) tasks.Handler[TranscodeArgs] {
	return func(ctx context.Context, st *tasks.Step, in TranscodeArgs) (*mcp.CallToolResult, error) {
		if in.Video == "" {
			return nil, &jsonrpc.Error{Code: -32602, Message: "video is required"}
		}
		if in.Seconds == 0 {
			in.Seconds = 2
		}
		if in.TimeoutSeconds == 0 {
			in.TimeoutSeconds = 600
		}
		if in.Seconds < 0 || in.Seconds > 3600 || in.TimeoutSeconds < 0 || in.TimeoutSeconds > maxSeconds {
			return nil, &jsonrpc.Error{Code: -32602, Message: fmt.Sprintf("seconds must be between 0 and 3600, timeoutSeconds between 0 and %d", maxSeconds)}
		}
		if in.Service != "" && !loopback(in.Service) {
			return nil, &jsonrpc.Error{Code: -32602, Message: "service must be an http URL on this machine (127.0.0.1, ::1 or localhost)"}
		}
		opts := []tasks.DoOption{tasks.Timeout(time.Duration(in.TimeoutSeconds) * time.Second)}
		if secret := os.Getenv(EnvTranscodeSecret); secret != "" {
			opts = append(opts, tasks.WebhookSecret(secret)) // the service signs its calls
		}
		cb, err := tasks.Callback[Transcoded](st, "transcoded", opts...)
		if err != nil {
			return nil, err
		}
		// Submitting is a step: the service gets the job (and its callback
		// URL) once, however often the handler replays.
		if _, err := tasks.Do(st, "submit", func(ctx context.Context) (bool, error) {
			job := Job{Video: in.Video, CallbackURL: cb.URL}
			if in.Service == "" {
				go fakeTranscoder(log, job, time.Duration(in.Seconds)*time.Second)
				return true, nil
			}
			return true, submit(ctx, in.Service, job)
		}); err != nil {
			return nil, err
		}
		st.Status("transcoding " + in.Video)
		out, err := tasks.AwaitCallback(st, cb)
		if errors.Is(err, tasks.ErrCallbackTimeout) {
			return text(fmt.Sprintf("the transcoding service did not call back within %ds", in.TimeoutSeconds)), nil
		}
		if err != nil {
			return nil, err
		}
		st.Status("done")
		return text(fmt.Sprintf("transcoded %s to %s", in.Video, out.Output)), nil
	}
}

// loopback reports whether raw is an http URL of this machine.
func loopback(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" {
		return false
	}
	if u.Hostname() == "localhost" {
		return true
	}
	ip := net.ParseIP(u.Hostname())
	return ip != nil && ip.IsLoopback()
}

// submit POSTs job to a transcoding service.
func submit(ctx context.Context, service string, job Job) error {
	b, _ := json.Marshal(job)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, service, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("submitting the job: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("submitting the job: the service answered %s", resp.Status)
	}
	return nil
}

// fakeTranscoder stands in for a transcoding service: after d it POSTs the
// job's result to its callback URL, signed when EnvTranscodeSecret is set. It lives in the worker's process (the
// local server); on a serverless platform it dies with the invocation.
func fakeTranscoder(log *slog.Logger, job Job, d time.Duration) {
	time.Sleep(d)
	b, _ := json.Marshal(Transcoded{Output: "s3://videos/" + job.Video + ".mp4"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, job.CallbackURL, bytes.NewReader(b))
	if err != nil {
		log.Warn("fake transcoder: bad callback URL", "err", err)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	if secret := os.Getenv(EnvTranscodeSecret); secret != "" {
		now, id := time.Now(), "msg_"+rand.Text()
		req.Header.Set("webhook-id", id)
		req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
		req.Header.Set("webhook-signature", tasks.SignWebhook(secret, id, now, b))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Warn("fake transcoder: calling back failed", "err", err)
		return
	}
	resp.Body.Close()
	log.Info("fake transcoder called back", "status", resp.StatusCode)
}

// IndexArgs are the arguments of index_documents.
type IndexArgs struct {
	Documents   int  `json:"documents" jsonschema:"how many documents to index (1-1000)"`
	Millis      int  `json:"millis,omitempty" jsonschema:"how long indexing one document takes, in milliseconds (at most 3600000)"`
	Concurrency int  `json:"concurrency,omitempty" jsonschema:"how many documents are indexed at once (default 8)"`
	Sequential  bool `json:"sequential,omitempty" jsonschema:"index the documents one step after another instead of in parallel (to compare)"`
}

// indexDocuments indexes documents in a parallel step: one branch per
// document, each in a worker invocation of its own, at most Concurrency at
// once. Each branch logs "running step" when it starts and "step
// finished" when it ends (the step is "doc-i"), so a reader of the logs
// sees that no finished document is ever indexed twice.
func indexDocuments(log *slog.Logger) tasks.Handler[IndexArgs] {
	return func(ctx context.Context, st *tasks.Step, in IndexArgs) (*mcp.CallToolResult, error) {
		if in.Documents < 1 || in.Documents > tasks.MaxBranches {
			return nil, &jsonrpc.Error{Code: -32602, Message: fmt.Sprintf("documents must be between 1 and %d", tasks.MaxBranches)}
		}
		if in.Millis < 0 || in.Millis > maxMillis || in.Concurrency < 0 || in.Concurrency > tasks.MaxBranches {
			return nil, &jsonrpc.Error{Code: -32602, Message: fmt.Sprintf("millis must be between 0 and %d, concurrency between 0 and %d", maxMillis, tasks.MaxBranches)}
		}
		if in.Concurrency == 0 {
			in.Concurrency = 8
		}
		docs := make([]int, in.Documents)
		for i := range docs {
			docs[i] = i
		}
		index := func(ctx context.Context, doc int) (int, error) {
			name := fmt.Sprintf("doc-%d", doc)
			log.InfoContext(ctx, "running step", "task", st.TaskID(), "step", name)
			if err := sleepCtx(ctx, time.Duration(in.Millis)*time.Millisecond); err != nil {
				return 0, err
			}
			log.InfoContext(ctx, "step finished", "task", st.TaskID(), "step", name)
			return 100 + doc*7919%1000, nil // the document's words
		}
		st.Status(fmt.Sprintf("indexing %d documents, %d at once", in.Documents, in.Concurrency))
		var words []int
		if in.Sequential {
			for _, doc := range docs {
				n, err := tasks.Do(st, fmt.Sprintf("doc-%d", doc), func(ctx context.Context) (int, error) { return index(ctx, doc) })
				if err != nil {
					return nil, err
				}
				words = append(words, n)
			}
		} else {
			var err error
			if words, err = tasks.All(st, "index", docs, index, tasks.Concurrency(in.Concurrency)); err != nil {
				return nil, err
			}
		}
		total := 0
		for _, n := range words {
			total += n
		}
		st.Status("done")
		return text(fmt.Sprintf("indexed %d documents, %d words", in.Documents, total)), nil
	}
}
