package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/pkg/examples"
	"github.com/mcptasks/mcptasks/pkg/tasks"
)

// splitDeployment starts `serve --no-worker` and `worker` on a Redis of
// kind with env added.
func splitDeployment(t *testing.T, kind string, env ...string) (api, worker *proc) {
	t.Helper()
	env = append(redisEnv(t, kind), env...)
	api = start(t, env, "serve", "--no-worker")
	worker = start(t, append(env, "MCPTASKS_PUBLIC_URL=http://"+api.addr, "MCPTASKS_WORKERS=2"), "worker")
	return api, worker
}

// jobService is a transcoding service for the transcode example: it
// hands each job it is given to the test.
func jobService(t *testing.T) (url string, jobs <-chan examples.Job) {
	ch := make(chan examples.Job, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var j examples.Job
		if err := json.NewDecoder(r.Body).Decode(&j); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ch <- j
	}))
	t.Cleanup(srv.Close)
	return srv.URL, ch
}

func nextJob(t *testing.T, jobs <-chan examples.Job) examples.Job {
	t.Helper()
	select {
	case j := <-jobs:
		return j
	case <-time.After(30 * time.Second):
		t.Fatal("the worker never submitted the job")
	}
	return examples.Job{}
}

// postJSON POSTs body to url, with headers hdr, and returns the status
// and the body of the answer.
func postJSON(t *testing.T, url, body string, hdr http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// invocations counts the worker invocations of task id in a worker's
// log (the bundle logs each at DEBUG).
func invocations(log, id string) int {
	return len(regexp.MustCompile(`msg="advanced task" task=`+regexp.QuoteMeta(id)+`\b`).FindAllString(log, -1))
}

// TestCallbackSplit runs the transcode example, endpoint and worker
// processes apart: its task waits on the callback with no worker
// invocation while it waits, resumes within a second of the service's
// POST and completes with the POSTed value; a second POST, a POST after
// its wait timed out, a forged URL and a URL of another task all answer
// like an unknown URL and change nothing; a callback that times out lets
// the tool go on with the timeout.
func TestCallbackSplit(t *testing.T) {
	for _, kind := range redisKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			testCallbackSplit(t, kind)
		})
	}
}

func testCallbackSplit(t *testing.T, kind string) {
	api, worker := splitDeployment(t, kind)
	c := newClient(api.addr, true)
	service, jobs := jobService(t)
	transcode := func(video string, timeout int) string {
		var ct task
		c.Call(t, "tools/call", map[string]any{"name": "transcode", "arguments": map[string]any{
			"video": video, "service": service, "timeoutSeconds": timeout}}).Decode(t, &ct)
		return ct.TaskID
	}
	id := transcode("a.mov", 600)
	job := nextJob(t, jobs)
	other := transcode("b.mov", 600)
	otherJob := nextJob(t, jobs)
	if job.Video == "b.mov" {
		job, otherJob = otherJob, job
	}
	prefix := "http://" + api.addr + tasks.CallbackPath + id + "/"
	if !strings.HasPrefix(job.CallbackURL, prefix) {
		t.Fatalf("callback URL %s, want it under %s", job.CallbackURL, prefix)
	}
	waiting := c.WaitFor(t, id, 30*time.Second, func(tk task) bool { return tk.StatusMessage == "transcoding a.mov" })
	if waiting.Status != "working" || len(waiting.InputRequests) != 0 {
		t.Errorf("waiting task: %+v, want working without input requests", waiting)
	}
	before := invocations(worker.Log(), id)
	time.Sleep(2 * time.Second)

	// What an unknown URL gets, and what every refused one must get.
	nfStatus, nfBody := postJSON(t, "http://"+api.addr+tasks.CallbackPath+"nosuch", `{}`, nil)
	if nfStatus != http.StatusNotFound {
		t.Fatalf("an unknown callback path: %d", nfStatus)
	}
	token := job.CallbackURL[len(prefix):]
	otherToken := otherJob.CallbackURL[strings.LastIndex(otherJob.CallbackURL, "/")+1:]
	refused := func(what, url string) {
		t.Helper()
		if status, body := postJSON(t, url, `{"output":"s3://forged"}`, nil); status != nfStatus || body != nfBody {
			t.Errorf("%s: %d %q, want an unknown URL's %d %q", what, status, body, nfStatus, nfBody)
		}
	}
	refused("a forged token", prefix+token[:len(token)-4]+"AAAA")
	refused("another task's token", prefix+otherToken)
	refused("this token under another task", "http://"+api.addr+tasks.CallbackPath+other+"/"+token)
	if tk := c.Get(t, id); tk.Status != "working" || tk.LastUpdatedAt != waiting.LastUpdatedAt {
		t.Errorf("the refused POSTs changed the task: %+v", tk)
	}
	if n := invocations(worker.Log(), id) - before; n != 0 {
		t.Errorf("%d worker invocations while the task waited, want 0", n)
	}

	posted := time.Now()
	if status, body := postJSON(t, job.CallbackURL, `{"output":"s3://out/a.mp4"}`, nil); status != http.StatusAccepted {
		t.Fatalf("the service's POST: %d %s", status, body)
	}
	var done task
	for {
		done = c.Get(t, id)
		if terminal(done) || time.Since(posted) > 10*time.Second {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	resumed := time.Since(posted)
	t.Logf("completed %v after the POST", resumed)
	if done.Status != "completed" || !strings.Contains(string(done.Result), "transcoded a.mov to s3://out/a.mp4") {
		t.Fatalf("task after the POST: %+v", done)
	}
	if resumed > time.Second {
		t.Errorf("the task completed %v after the POST, want within 1s", resumed)
	}
	refused("a second POST", job.CallbackURL)
	if tk := c.Get(t, id); tk.LastUpdatedAt != done.LastUpdatedAt || string(tk.Result) != string(done.Result) {
		t.Errorf("the second POST changed the task: %+v", tk)
	}

	// A wait that times out: the tool goes on with the timeout, and the
	// URL is gone.
	late := transcode("c.mov", 1)
	lateJob := nextJob(t, jobs)
	timedOut := c.WaitFor(t, late, 30*time.Second, terminal)
	if timedOut.Status != "completed" || !strings.Contains(string(timedOut.Result), "did not call back within 1s") {
		t.Fatalf("timed-out task: %+v", timedOut)
	}
	refused("a POST after the timeout", lateJob.CallbackURL)
	if tk := c.Get(t, late); string(tk.Result) != string(timedOut.Result) {
		t.Errorf("the late POST changed the task: %+v", tk)
	}
}

// TestCallbackSigned: with the service's signing secret set, the callback
// URL refuses a request without a valid Standard Webhooks signature (and
// stays open), and takes a signed one.
func TestCallbackSigned(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	api, _ := splitDeployment(t, "redis-server", examples.EnvTranscodeSecret+"="+secret)
	c := newClient(api.addr, true)
	service, jobs := jobService(t)
	var ct task
	c.Call(t, "tools/call", map[string]any{"name": "transcode", "arguments": map[string]any{"video": "s.mov", "service": service}}).Decode(t, &ct)
	job := nextJob(t, jobs)
	body := `{"output":"s3://out/s.mp4"}`
	sign := func(key string, at time.Time) http.Header {
		return http.Header{"Webhook-Id": {"msg_1"}, "Webhook-Timestamp": {fmt.Sprint(at.Unix())},
			"Webhook-Signature": {tasks.SignWebhook(key, "msg_1", at, []byte(body))}}
	}
	for what, hdr := range map[string]http.Header{
		"unsigned":          nil,
		"a bad signature":   sign("whsec_YmFkIGtleQ==", time.Now()),
		"a stale timestamp": sign(secret, time.Now().Add(-time.Hour)),
		"a garbled header":  {"Webhook-Id": {"msg_1"}, "Webhook-Timestamp": {fmt.Sprint(time.Now().Unix())}, "Webhook-Signature": {"v1,garbage"}},
	} {
		if status, got := postJSON(t, job.CallbackURL, body, hdr); status != http.StatusUnauthorized {
			t.Errorf("%s: %d %s, want 401", what, status, got)
		}
	}
	if tk := c.Get(t, ct.TaskID); tk.Status != "working" {
		t.Fatalf("after the refused requests: %+v, want still waiting", tk)
	}
	if status, got := postJSON(t, job.CallbackURL, body, sign(secret, time.Now())); status != http.StatusAccepted {
		t.Fatalf("a signed POST: %d %s", status, got)
	}
	if done := c.WaitFor(t, ct.TaskID, 30*time.Second, terminal); !strings.Contains(string(done.Result), "s3://out/s.mp4") {
		t.Fatalf("task: %+v", done)
	}
}

var stepFinished = regexp.MustCompile(`msg="step finished" task=(\S+) step=(\S+)`)

// finishedRuns counts, per step name, how often task id's step closures
// ran to their end according to the logs.
func finishedRuns(id string, logs ...string) map[string]int {
	n := map[string]int{}
	for _, l := range logs {
		for _, m := range stepFinished.FindAllStringSubmatch(l, -1) {
			if m[1] == id {
				n[m[2]]++
			}
		}
	}
	return n
}

// TestParallelKillWorker runs a parallel step of 32 branches on two worker
// processes of 4 goroutines each, endpoint apart, and kills one worker
// (SIGKILL) while it runs branches: the task completes with every result,
// every branch ran to its end exactly once, and only the branches the dead
// worker was running ran again.
func TestParallelKillWorker(t *testing.T) {
	for _, kind := range redisKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			testParallelKillWorker(t, kind)
		})
	}
}

func testParallelKillWorker(t *testing.T, kind string) {
	env := append(redisEnv(t, kind), "MCPTASKS_WORKERS=4", "MCPTASKS_LEASE=3s", "MCPTASKS_SWEEP_INTERVAL=1s")
	api := start(t, env, "serve", "--no-worker")
	w1, w2 := start(t, env, "worker"), start(t, env, "worker")
	c := newClient(api.addr, true)
	const docs = 32
	var ct task
	c.Call(t, "tools/call", map[string]any{"name": "index_documents", "arguments": map[string]any{
		"documents": docs, "millis": 1500, "concurrency": 8}}).Decode(t, &ct)
	id := ct.TaskID
	// Kill w1 once it has finished a branch and runs others.
	inFlight := func(log string) []string {
		var running []string
		fin := finishedRuns(id, log)
		for step, n := range stepRuns(id, log) {
			if n > fin[step] {
				running = append(running, step)
			}
		}
		return running
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("w1 never had a finished branch and a running one:\n%s", w1.Log())
		}
		if log := w1.Log(); len(finishedRuns(id, log)) > 0 && len(inFlight(log)) > 0 {
			break
		}
	}
	w1.Kill()
	killedLog := w1.Log()
	// The runs w1 lost are those it started and did not commit: the ones
	// still running, and any whose function returned (logged as finished)
	// but whose commit the kill cut off. A commit is logged by the
	// worker's "advanced task" line of the branch.
	committed := map[string]bool{}
	for _, m := range regexp.MustCompile(`msg="advanced task" task=`+regexp.QuoteMeta(id)+`\.\d+\.(\d+) `).FindAllStringSubmatch(killedLog, -1) {
		committed["doc-"+m[1]] = true
	}
	var killed []string
	for step := range stepRuns(id, killedLog) {
		if !committed[step] {
			killed = append(killed, step)
		}
	}
	slices.Sort(killed)
	lostFinished := finishedRuns(id, killedLog)
	w3 := start(t, env, "worker")
	done := c.WaitFor(t, id, 120*time.Second, terminal)
	words := 0
	for i := range docs {
		words += 100 + i*7919%1000
	}
	if want := fmt.Sprintf("indexed %d documents, %d words", docs, words); done.Status != "completed" || !strings.Contains(string(done.Result), want) {
		t.Fatalf("task: %+v, want completed: %s", done, want)
	}
	logs := []string{killedLog, w2.Log(), w3.Log()}
	started, finished := stepRuns(id, logs...), finishedRuns(id, logs...)
	t.Logf("killed w1 while it ran %v (not committed: %v)", inFlight(killedLog), killed)
	for i := range docs {
		step := fmt.Sprintf("doc-%d", i)
		wantStarted, wantFinished := 1, 1
		if slices.Contains(killed, step) {
			// Its run died with w1 before its outcome was written: it runs
			// again, once.
			wantStarted, wantFinished = 2, 1+lostFinished[step]
			if lostFinished[step] > 0 && started[step] == 1 && finished[step] == 1 {
				// Its commit landed in the instant between the write and
				// the worker's log line: it never runs again.
				wantStarted, wantFinished = 1, 1
			}
		}
		if finished[step] != wantFinished {
			t.Errorf("%s ran to its end %d times, want %d", step, finished[step], wantFinished)
		}
		if started[step] != wantStarted {
			t.Errorf("%s started %d times, want %d", step, started[step], wantStarted)
		}
	}
}
