package bundle

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
	"github.com/mcptasks/mcptasks/pkg/client"
	"github.com/mcptasks/mcptasks/pkg/embedredis"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/rueidis"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// MCPTASKS_QUEUE selects the adapter, and each adapter's required settings
// are checked up front, naming the missing variable.
func TestFromEnvQueue(t *testing.T) {
	t.Parallel()
	qstash := map[string]string{
		"REDIS_URL": "redis://127.0.0.1:6379", "MCPTASKS_QUEUE": "qstash", "QSTASH_TOKEN": "tok",
		"QSTASH_CURRENT_SIGNING_KEY": "cur", "MCPTASKS_QSTASH_WORKER_URL": "https://app.example.com/api/worker",
	}
	with := func(base map[string]string, k, v string) map[string]string {
		m := map[string]string{}
		for a, b := range base {
			m[a] = b
		}
		if v == "" {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	cases := []envCase{
		{"default is redis, embedded allowed", map[string]string{}, QueueRedis, ""},
		{"redis explicitly", map[string]string{"MCPTASKS_QUEUE": "Redis"}, QueueRedis, ""},
		{"sqs", map[string]string{"REDIS_URL": "redis://h:6379", "MCPTASKS_QUEUE": "sqs", "MCPTASKS_SQS_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/1/q"}, QueueSQS, ""},
		{"sqs without queue URL", map[string]string{"REDIS_URL": "redis://h:6379", "MCPTASKS_QUEUE": "sqs"}, "", "MCPTASKS_SQS_QUEUE_URL"},
		{"sqs without REDIS_URL", map[string]string{"MCPTASKS_QUEUE": "sqs", "MCPTASKS_SQS_QUEUE_URL": "https://q"}, "", "needs REDIS_URL"},
		{"qstash", qstash, QueueQStash, ""},
		{"qstash without token", with(qstash, "QSTASH_TOKEN", ""), "", "QSTASH_TOKEN"},
		{"qstash without signing key", with(qstash, "QSTASH_CURRENT_SIGNING_KEY", ""), "", "QSTASH_CURRENT_SIGNING_KEY"},
		{"qstash without worker URL", with(qstash, "MCPTASKS_QSTASH_WORKER_URL", ""), "", "MCPTASKS_QSTASH_WORKER_URL"},
		{"qstash with a relative worker URL", with(qstash, "MCPTASKS_QSTASH_WORKER_URL", "/api/worker"), "", "MCPTASKS_QSTASH_WORKER_URL"},
		{"qstash with bad retries", with(qstash, "MCPTASKS_QSTASH_RETRIES", "many"), "", "MCPTASKS_QSTASH_RETRIES"},
		{"unknown", map[string]string{"MCPTASKS_QUEUE": "kafka"}, "", "want redis, postgres, sqs or qstash"},
		{"postgres by default with DATABASE_URL", map[string]string{"DATABASE_URL": "postgres://h/db"}, QueuePostgres, ""},
		{"postgres without DATABASE_URL", map[string]string{"MCPTASKS_QUEUE": "postgres"}, "", "needs DATABASE_URL"},
		{"sqs on the Postgres store", map[string]string{"DATABASE_URL": "postgres://h/db", "MCPTASKS_QUEUE": "sqs", "MCPTASKS_SQS_QUEUE_URL": "https://q"}, QueueSQS, ""},
	}
	checkEnv(t, cases, "Queue", func(c Config) string { return c.Queue })

	cfg, err := FromEnv(envOf(map[string]string{"REDIS_URL": "redis://h:6379", "MCPTASKS_QUEUE": "sqs",
		"MCPTASKS_SQS_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/1/tasks.fifo"}))
	if err != nil || !cfg.SQS.FIFO {
		t.Errorf("a .fifo queue URL: FIFO=%v err=%v, want FIFO", cfg.SQS.FIFO, err)
	}
	cfg, _ = FromEnv(envOf(with(with(qstash, "CRON_SECRET", "s3cret"), "QSTASH_NEXT_SIGNING_KEY", "next")))
	if cfg.CronSecret != "s3cret" || cfg.QStash.NextSigningKey != "next" || cfg.QStash.Token != "tok" {
		t.Errorf("qstash config = %+v, cron %q", cfg.QStash, cfg.CronSecret)
	}
}

// MCPTASKS_STORE selects the store; without it DATABASE_URL selects
// Postgres unless REDIS_URL is set (a deployment that has REDIS_URL keeps
// its store whatever else it sets).
func TestFromEnvStore(t *testing.T) {
	t.Parallel()
	cases := []envCase{
		{"default is redis", map[string]string{}, StoreRedis, ""},
		{"DATABASE_URL alone", map[string]string{"DATABASE_URL": "postgres://h/db"}, StorePostgres, ""},
		{"REDIS_URL wins", map[string]string{"DATABASE_URL": "postgres://h/db", "REDIS_URL": "redis://h:6379"}, StoreRedis, ""},
		{"explicitly postgres", map[string]string{"MCPTASKS_STORE": "Postgres", "DATABASE_URL": "postgres://h/db", "REDIS_URL": "redis://h:6379"}, StorePostgres, ""},
		{"postgres without DATABASE_URL", map[string]string{"MCPTASKS_STORE": "postgres"}, "", "MCPTASKS_STORE=postgres needs DATABASE_URL"},
		{"unknown", map[string]string{"MCPTASKS_STORE": "mongo"}, "", "want redis or postgres"},
		{"bad schema", map[string]string{"DATABASE_URL": "postgres://h/db", "MCPTASKS_PG_SCHEMA": "My-Tasks"}, "", "MCPTASKS_PG_SCHEMA"},
	}
	checkEnv(t, cases, "Store", func(c Config) string { return c.Store })
}

// envCase is a configuration FromEnv reads: want is the value of the
// field checked, wantErr what its error must mention ("" for none).
type envCase struct {
	name          string
	env           map[string]string
	want, wantErr string
}

// checkEnv runs FromEnv on each case and checks its error, or the field
// name that get reads.
func checkEnv(t *testing.T, cases []envCase, name string, get func(Config) string) {
	t.Helper()
	for _, c := range cases {
		cfg, err := FromEnv(envOf(c.env))
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%s: error %v, want one mentioning %q", c.name, err, c.wantErr)
		case c.wantErr == "" && get(cfg) != c.want:
			t.Errorf("%s: %s = %q, want %q", c.name, name, get(cfg), c.want)
		}
	}
}

// The Redis client for a REDIS_URL never caches client-side, has dial
// and write timeouts, unless the URL sets its own timeouts, and closes
// idle pooled connections.
func TestRedisOptions(t *testing.T) {
	t.Parallel()
	opt, err := redisOptions("rediss://default:pw@example.upstash.io:6379")
	if err != nil {
		t.Fatal(err)
	}
	if !opt.DisableCache || opt.Dialer.Timeout != redisDialTimeout || opt.ConnWriteTimeout != redisWriteTimeout || opt.BlockingPoolCleanup != redisIdleClose {
		t.Errorf("options: DisableCache=%v dial=%v write=%v idle close=%v", opt.DisableCache, opt.Dialer.Timeout, opt.ConnWriteTimeout, opt.BlockingPoolCleanup)
	}
	if opt.TLSConfig == nil {
		t.Error("rediss:// without TLS")
	}
	opt, err = redisOptions("redis://h:6379?dial_timeout=2s&write_timeout=3s")
	if err != nil {
		t.Fatal(err)
	}
	if opt.Dialer.Timeout != 2*time.Second || opt.ConnWriteTimeout != 3*time.Second || !opt.DisableCache {
		t.Errorf("URL timeouts not kept: dial=%v write=%v", opt.Dialer.Timeout, opt.ConnWriteTimeout)
	}
	if _, err := redisOptions("http://nope"); err == nil {
		t.Error("a non-redis URL was accepted")
	}
}

// A client's protocol mistakes (ping, initialize: removed in 2026-07-28)
// are not server errors: the go-sdk's ERROR reports of them are logged at
// DEBUG, so that no client can write error lines at will.
func TestClientMistakesAreNotErrors(t *testing.T) {
	t.Parallel()
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		var logs bytes.Buffer
		log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: level}))
		cfg, err := FromEnv(envOf(nil))
		if err != nil {
			t.Fatal(err)
		}
		b, err := New(t.Context(), cfg, log, &tasks.App{Name: "t"}, WithEmbeddedRedis(func() (EmbeddedRedis, error) { return embedredis.Start(nil) }))
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(b.Handler)
		for _, method := range []string{"ping", "initialize"} {
			body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}}}`
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
			req.Header.Set("Mcp-Method", method)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		srv.Close()
		b.Close()
		out := logs.String()
		if strings.Contains(out, "level=ERROR") {
			t.Errorf("level %v: a client's mistake was logged as an error:\n%s", level, out)
		}
		if got := strings.Contains(out, `level=DEBUG msg="method removed in the new protocol"`); got != (level == slog.LevelDebug) {
			t.Errorf("level %v: DEBUG report present = %v:\n%s", level, got, out)
		}
	}
}

// An invalid MCPTASKS_LOG_LEVEL is refused, naming the variable.
func TestLogLevel(t *testing.T) {
	t.Parallel()
	if c, err := FromEnv(envOf(map[string]string{"MCPTASKS_LOG_LEVEL": "debug"})); err != nil || c.LogLevel != slog.LevelDebug {
		t.Errorf("debug: %v %v", c.LogLevel, err)
	}
	if _, err := FromEnv(envOf(map[string]string{"MCPTASKS_LOG_LEVEL": "verbose"})); err == nil || !strings.Contains(err.Error(), "MCPTASKS_LOG_LEVEL") {
		t.Errorf("verbose: %v, want an error naming MCPTASKS_LOG_LEVEL", err)
	}
}

// MCPTASKS_MAX_LIVE_TASKS reaches the tasks server; a bad value is refused.
func TestMaxLiveTasks(t *testing.T) {
	t.Parallel()
	cfg, err := FromEnv(envOf(map[string]string{"MCPTASKS_MAX_LIVE_TASKS": "3"}))
	if err != nil || cfg.MaxLiveTasks != 3 {
		t.Fatalf("3: %v %v", cfg.MaxLiveTasks, err)
	}
	b, err := New(t.Context(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), &tasks.App{Name: "t"},
		WithEmbeddedRedis(func() (EmbeddedRedis, error) { return embedredis.Start(nil) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if got := b.Tasks.Options().MaxLiveTasks; got != 3 {
		t.Errorf("tasks server MaxLiveTasks = %d, want 3", got)
	}
	if _, err := FromEnv(envOf(map[string]string{"MCPTASKS_MAX_LIVE_TASKS": "-1"})); err == nil || !strings.Contains(err.Error(), "MCPTASKS_MAX_LIVE_TASKS") {
		t.Errorf("-1: %v", err)
	}
}

// MCPTASKS_JOBS=off reaches the tasks server (the async-jobs fallback is
// on by default); a bad value is refused.
func TestJobsSwitch(t *testing.T) {
	t.Parallel()
	for v, off := range map[string]bool{"": false, "on": false, "off": true, "OFF ": true, "0": true} {
		cfg, err := FromEnv(envOf(map[string]string{"MCPTASKS_JOBS": v}))
		if err != nil || cfg.NoJobs != off {
			t.Errorf("MCPTASKS_JOBS=%q: NoJobs %v, %v; want %v", v, cfg.NoJobs, err, off)
		}
	}
	cfg, _ := FromEnv(envOf(map[string]string{"MCPTASKS_JOBS": "off"}))
	b, err := New(t.Context(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), &tasks.App{Name: "t"},
		WithEmbeddedRedis(func() (EmbeddedRedis, error) { return embedredis.Start(nil) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if !b.Tasks.Options().Jobs.Disable {
		t.Errorf("MCPTASKS_JOBS=off: the tasks server serves the fallback")
	}
	if _, err := FromEnv(envOf(map[string]string{"MCPTASKS_JOBS": "maybe"})); err == nil || !strings.Contains(err.Error(), "MCPTASKS_JOBS") {
		t.Errorf("maybe: %v", err)
	}
}

// The stream bounds default to the endpoint's defaults, are read from
// MCPTASKS_MAX_STREAMS and MCPTASKS_MAX_STREAMS_PER_PRINCIPAL, and refuse
// what is not a positive number (the e2e tests exercise them on a server).
func TestStreamBoundsFromEnv(t *testing.T) {
	t.Parallel()
	cfg, err := FromEnv(envOf(nil))
	if err != nil || cfg.MaxRequests != tasks.DefaultMaxRequests || cfg.MaxStreams != tasks.DefaultMaxStreams ||
		cfg.MaxStreamsPerPrincipal != tasks.DefaultMaxStreamsPerPrincipal {
		t.Fatalf("defaults: %d %d %d (%v)", cfg.MaxRequests, cfg.MaxStreams, cfg.MaxStreamsPerPrincipal, err)
	}
	cfg, err = FromEnv(envOf(map[string]string{"MCPTASKS_MAX_STREAMS": "10", "MCPTASKS_MAX_STREAMS_PER_PRINCIPAL": "2"}))
	if err != nil || cfg.MaxStreams != 10 || cfg.MaxStreamsPerPrincipal != 2 {
		t.Fatalf("set: %d %d (%v)", cfg.MaxStreams, cfg.MaxStreamsPerPrincipal, err)
	}
	for _, name := range []string{"MCPTASKS_MAX_STREAMS", "MCPTASKS_MAX_STREAMS_PER_PRINCIPAL"} {
		if _, err := FromEnv(envOf(map[string]string{name: "0"})); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=0: %v", name, err)
		}
	}
}

// MCPTASKS_LEASE reaches the tasks server and is the Redis queue's
// visibility timeout unless MCPTASKS_QUEUE_VISIBILITY sets one; a bad value
// is refused.
func TestLease(t *testing.T) {
	t.Parallel()
	cfg, err := FromEnv(envOf(nil))
	if err != nil || cfg.Lease != tasks.DefaultLease || cfg.Visibility != tasks.DefaultLease {
		t.Errorf("defaults: lease %v visibility %v (%v), want %v for both", cfg.Lease, cfg.Visibility, err, tasks.DefaultLease)
	}
	cfg, err = FromEnv(envOf(map[string]string{"MCPTASKS_LEASE": "4s"}))
	if err != nil || cfg.Lease != 4*time.Second || cfg.Visibility != 4*time.Second {
		t.Fatalf("4s: lease %v visibility %v (%v)", cfg.Lease, cfg.Visibility, err)
	}
	b, err := New(t.Context(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), &tasks.App{Name: "t"},
		WithEmbeddedRedis(func() (EmbeddedRedis, error) { return embedredis.Start(nil) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if got := b.Tasks.Options().Lease; got != 4*time.Second {
		t.Errorf("tasks server Lease = %v, want 4s", got)
	}
	if cfg, err := FromEnv(envOf(map[string]string{"MCPTASKS_LEASE": "4s", "MCPTASKS_QUEUE_VISIBILITY": "1m"})); err != nil || cfg.Visibility != time.Minute {
		t.Errorf("visibility set: %v (%v), want 1m", cfg.Visibility, err)
	}
	if _, err := FromEnv(envOf(map[string]string{"MCPTASKS_LEASE": "0s"})); err == nil || !strings.Contains(err.Error(), "MCPTASKS_LEASE") {
		t.Errorf("0s: %v, want an error naming MCPTASKS_LEASE", err)
	}
}

// A key prefix with a brace is refused: it would put every task's keys in
// one Redis Cluster slot.
func TestFromEnvKeyPrefix(t *testing.T) {
	t.Parallel()
	for prefix, ok := range map[string]bool{"": true, "app:": true, "app{x}:": false, "a}": false} {
		_, err := FromEnv(func(k string) string {
			if k == "MCPTASKS_KEY_PREFIX" {
				return prefix
			}
			return ""
		})
		if ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), "MCPTASKS_KEY_PREFIX")) {
			t.Errorf("MCPTASKS_KEY_PREFIX=%q: error %v, want ok=%v", prefix, err, ok)
		}
	}
}

// MCPTASKS_WAKE_HORIZON defaults to an hour, or ten sweep intervals if
// longer, and takes a positive duration.
func TestFromEnvWakeHorizon(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		sweep, horizon string
		want           time.Duration
		ok             bool
	}{
		{"", "", time.Hour, true},
		{"10m", "", 100 * time.Minute, true},
		{"10m", "2h", 2 * time.Hour, true},
		{"", "15m", 15 * time.Minute, true},
		{"", "0", 0, false},
		{"", "soon", 0, false},
	} {
		cfg, err := FromEnv(envOf(map[string]string{"MCPTASKS_SWEEP_INTERVAL": c.sweep, "MCPTASKS_WAKE_HORIZON": c.horizon}))
		if c.ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), "MCPTASKS_WAKE_HORIZON")) {
			t.Errorf("%+v: error %v", c, err)
			continue
		}
		if err == nil && cfg.WakeHorizon != c.want {
			t.Errorf("%+v: WakeHorizon %v", c, cfg.WakeHorizon)
		}
	}
}

func TestFromEnvRedisShardsAndWait(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		shards, wait string
		ok           bool
		n, replicas  int
		timeout      time.Duration
	}{
		{"", "", true, 0, 0, 0},
		{"12", "1", true, 12, 1, time.Second},
		{"1", "2,250ms", true, 1, 2, 250 * time.Millisecond},
		{"0", "0", true, 0, 0, time.Second},
		{"257", "", false, 0, 0, 0},
		{"-1", "", false, 0, 0, 0},
		{"", "x", false, 0, 0, 0},
		{"", "1,0s", false, 0, 0, 0},
		{"", "1,soon", false, 0, 0, 0},
	} {
		c, err := FromEnv(envOf(map[string]string{"MCPTASKS_REDIS_SHARDS": tc.shards, "MCPTASKS_REDIS_WAIT": tc.wait}))
		if tc.ok != (err == nil) {
			t.Errorf("shards %q wait %q: error %v, want ok=%v", tc.shards, tc.wait, err, tc.ok)
			continue
		}
		if err != nil {
			if !strings.Contains(err.Error(), "MCPTASKS_REDIS_") {
				t.Errorf("shards %q wait %q: error %v does not name the variable", tc.shards, tc.wait, err)
			}
			continue
		}
		if c.RedisShards != tc.n || c.RedisWait != tc.replicas || c.RedisWaitTimeout != tc.timeout {
			t.Errorf("shards %q wait %q: got %d, %d, %v", tc.shards, tc.wait, c.RedisShards, c.RedisWait, c.RedisWaitTimeout)
		}
	}
}

// Waiting for replicas needs a Redis that has some: the embedded one is
// refused at start, not at the first task.
func TestRedisWaitNeedsRedisURL(t *testing.T) {
	t.Parallel()
	cfg, err := FromEnv(envOf(map[string]string{"MCPTASKS_REDIS_WAIT": "1"}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(t.Context(), cfg, slog.New(slog.DiscardHandler), &tasks.App{Name: "t"}, WithEmbeddedRedis(func() (EmbeddedRedis, error) { return embedredis.Start(nil) }))
	if err == nil || !strings.Contains(err.Error(), "MCPTASKS_REDIS_WAIT needs REDIS_URL") {
		t.Fatalf("New with MCPTASKS_REDIS_WAIT on the embedded Redis: %v", err)
	}
}

type bigArgs struct {
	Pad string `json:"pad"`
	N   int    `json:"n"`
}

// registerBig registers the tool big: it makes n bytes in a step, sleeps
// 50ms, and journals their length in a second step (which replays the
// first's bytes from the journal), and answers the padding's length and
// the bytes.
func registerBig(s *tasks.Server) {
	tasks.AddTool(s, &mcp.Tool{Name: "big", Description: "echoes its padding's length and n bytes"}, tasks.Optional,
		func(ctx context.Context, st *tasks.Step, a bigArgs) (*mcp.CallToolResult, error) {
			out, err := tasks.Do(st, "make", func(context.Context) (string, error) { return strings.Repeat("y", a.N), nil })
			if err != nil {
				return nil, err
			}
			if err := st.Sleep("nap", 50*time.Millisecond); err != nil {
				return nil, err
			}
			if _, err := tasks.Do(st, "after", func(context.Context) (int, error) { return len(out), nil }); err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%d:%s", len(a.Pad), out)}}}, nil
		})
}

// callBig calls big through a bundle's handler with workers running, and
// checks its result.
func callBig(ctx context.Context, t *testing.T, b *Bundle, pad, n int) {
	t.Helper()
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go b.RunWorkers(wctx, 2)
	srv := httptest.NewServer(b.Handler)
	defer srv.Close()
	res, err := client.New(srv.URL+"/mcp").Call(ctx, "big", bigArgs{Pad: strings.Repeat("p", pad), N: n})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || len(res.Content) != 1 {
		t.Fatalf("result: %+v", res)
	}
	want := fmt.Sprintf("%d:%s", pad, strings.Repeat("y", n))
	if got := res.Content[0].(*mcp.TextContent).Text; got != want {
		t.Errorf("result text: %d bytes, want %d (%q...)", len(got), len(want), got[:min(len(got), 20)])
	}
}

// Values larger than a connection's 64 KiB buffers (ForOneRequestAtATime,
// as the Lambda functions build their bundles) go through a bundle on
// redis-server whole: arguments of 300 kB stored with the task, a step's
// 700 kB result journaled and replayed, the result read back by the
// client. The options WithRedisClientOptions gives are applied, except
// that client-side caching stays off.
func TestValuesLargerThanConnectionBuffers(t *testing.T) {
	t.Parallel()
	cfg, err := FromEnv(envOf(map[string]string{"REDIS_URL": testredis.Start(t)}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var applied rueidis.ClientOption
	b, err := New(ctx, cfg, slog.New(slog.DiscardHandler), &tasks.App{Name: "t", Register: registerBig},
		WithRedisClientOptions(ForOneRequestAtATime),
		WithRedisClientOptions(func(o *rueidis.ClientOption) { o.DisableCache = false; applied = *o }))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if applied.RingScaleEachConn != 8 || applied.ReadBufferEachConn != 64<<10 || applied.WriteBufferEachConn != 64<<10 {
		t.Errorf("options seen by the second WithRedisClientOptions: ring 2^%d, buffers %d/%d; want the first's", applied.RingScaleEachConn, applied.ReadBufferEachConn, applied.WriteBufferEachConn)
	}
	// With caching on, rueidis would have turned tracking on (flag t).
	info, err := b.client.Do(ctx, b.client.B().ClientInfo().Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Fields(info) {
		if flags, ok := strings.CutPrefix(f, "flags="); ok && strings.Contains(flags, "t") {
			t.Errorf("the bundle's connection tracks keys (client-side caching on): %s", info)
		}
	}
	callBig(ctx, t, b, 300_000, 700_000)
}

// MCPTASKS_PUBLIC_URL is an absolute http(s) URL, kept without a trailing
// slash; on QStash it defaults to the worker URL's origin.
func TestFromEnvPublicURL(t *testing.T) {
	t.Parallel()
	qstash := map[string]string{
		"REDIS_URL": "redis://127.0.0.1:6379", "MCPTASKS_QUEUE": "qstash", "QSTASH_TOKEN": "tok",
		"QSTASH_CURRENT_SIGNING_KEY": "cur", "MCPTASKS_QSTASH_WORKER_URL": "https://app.example.com/api/worker",
	}
	for _, tc := range []struct {
		env  map[string]string
		want string
		ok   bool
	}{
		{map[string]string{}, "", true},
		{map[string]string{"MCPTASKS_PUBLIC_URL": "https://mcp.example.com/"}, "https://mcp.example.com", true},
		{map[string]string{"MCPTASKS_PUBLIC_URL": "http://127.0.0.1:8080"}, "http://127.0.0.1:8080", true},
		{map[string]string{"MCPTASKS_PUBLIC_URL": "mcp.example.com"}, "", false},
		{map[string]string{"MCPTASKS_PUBLIC_URL": "ftp://mcp.example.com"}, "", false},
		{map[string]string{"MCPTASKS_PUBLIC_URL": "https://mcp.example.com/?a=1"}, "", false},
		{qstash, "https://app.example.com", true},
	} {
		cfg, err := FromEnv(func(k string) string { return tc.env[k] })
		if tc.ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), "MCPTASKS_PUBLIC_URL")) {
			t.Errorf("%v: error %v, want ok=%v", tc.env, err, tc.ok)
		}
		if tc.ok && cfg.PublicURL != tc.want {
			t.Errorf("%v: PublicURL %q, want %q", tc.env, cfg.PublicURL, tc.want)
		}
	}
}

// MCPTASKS_READ_CACHE reaches the tasks server (unset: -1, the platform's
// default, which the bundle alone reads as off); a bad value is refused.
func TestReadCacheSetting(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env        map[string]string
		cfg, tasks int
	}{
		{map[string]string{}, -1, 0},
		{map[string]string{"MCPTASKS_READ_CACHE": "0"}, 0, 0},
		{map[string]string{"MCPTASKS_READ_CACHE": "500"}, 500, 500},
	} {
		cfg, err := FromEnv(envOf(c.env))
		if err != nil || cfg.ReadCache != c.cfg {
			t.Fatalf("%v: ReadCache %d, %v; want %d", c.env, cfg.ReadCache, err, c.cfg)
		}
		b, err := New(t.Context(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), &tasks.App{Name: "t"},
			WithEmbeddedRedis(func() (EmbeddedRedis, error) { return embedredis.Start(nil) }))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		if got := b.Tasks.Options().ReadCache; got != c.tasks {
			t.Errorf("%v: tasks server ReadCache = %d, want %d", c.env, got, c.tasks)
		}
	}
	for _, bad := range []string{"-1", "many"} {
		if _, err := FromEnv(envOf(map[string]string{"MCPTASKS_READ_CACHE": bad})); err == nil || !strings.Contains(err.Error(), "MCPTASKS_READ_CACHE") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
