// Package bundle is the one place that turns configuration (environment
// variables) and an app ([tasks.App]) into a running mcptasks deployment:
// the task store, the queue, the tasks server with the app's tools, the
// HTTP handler, and the worker and sweeper loops. Every platform adapter
// (pkg/platform/local, vercel, awslambda) builds on it alike.
//
// MCPTASKS_STORE selects the task store: "redis" (REDIS_URL, or locally an
// embedded Redis) or "postgres" (DATABASE_URL; see pkg/tasks/pgstore). By
// default it is postgres when DATABASE_URL is set and REDIS_URL is not, so
// a deployment that has a database and no Redis needs nothing more, and
// one that has REDIS_URL keeps its store whatever else it sets.
//
// MCPTASKS_QUEUE selects the queue: "redis" (the default with the Redis
// store; local and self-hosted workers consume it), "postgres" (the
// default with the Postgres store; the same, on the database), "sqs"
// (Amazon SQS, the Lambda worker's event source) or "qstash" (Upstash
// QStash, which pushes to the Vercel worker function). The bundle links
// both stores and their queues; a platform adapter adds the push queue it
// serves with [WithQueue], and the local one the embedded Redis with
// [WithEmbeddedRedis], so each binary links only what it uses.
package bundle

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/mcptasks/mcptasks/pkg/auth"
	"github.com/mcptasks/mcptasks/pkg/queue"
	"github.com/mcptasks/mcptasks/pkg/queue/pgqueue"
	"github.com/mcptasks/mcptasks/pkg/queue/redisqueue"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/pgstore"
	"github.com/mcptasks/mcptasks/pkg/tasks/redisstore"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/rueidis"
)

// Config is the deployment's configuration. [FromEnv] documents the
// variable behind each field.
type Config struct {
	App       string     // MCPTASKS_APP: which of the binary's apps to serve (default: its first)
	LogLevel  slog.Level // MCPTASKS_LOG_LEVEL: DEBUG, INFO (default), WARN or ERROR
	RedisURL  string     // REDIS_URL; empty: embedded in-process Redis
	KeyPrefix string     // MCPTASKS_KEY_PREFIX (default "mcptasks:")
	// Store is the task store: StoreRedis or StorePostgres
	// (MCPTASKS_STORE; see the package doc for the default).
	Store string
	// DatabaseURL is DATABASE_URL, the PostgreSQL of the Postgres store
	// and queue. A transaction-mode pooler's URL works (Neon's pooled
	// URL, PgBouncer, RDS Proxy): see pgstore.PoolConfig.
	DatabaseURL string
	// DatabaseDirectURL is DATABASE_URL_UNPOOLED: a URL that reaches the
	// server directly, for the sessions that LISTEN (listen streams, idle
	// workers); empty: DatabaseURL, which must then be direct too. Neon's
	// Vercel integration sets both variables.
	DatabaseDirectURL string
	// PGSchema is MCPTASKS_PG_SCHEMA, the schema of the Postgres store's
	// tables (default "mcptasks").
	PGSchema string
	// RedisShards is MCPTASKS_REDIS_SHARDS: how many shards the queue and
	// the due index are spread over (0, the default: 1 on a standalone
	// Redis, DefaultClusterShards on a Redis Cluster).
	RedisShards int
	// RedisWait and RedisWaitTimeout are MCPTASKS_REDIS_WAIT=N[,timeout]:
	// transitions that hand something to a client or end a task are
	// acknowledged by N replicas (WAIT) before the answer leaves, or
	// refused after timeout (default 1s). 0, the default, waits for none.
	RedisWait        int
	RedisWaitTimeout time.Duration
	TaskTTL          time.Duration // MCPTASKS_TASK_TTL (default 1h)
	PollInterval     time.Duration // MCPTASKS_POLL_INTERVAL (default 1s)
	PollMin          time.Duration // MCPTASKS_POLL_MIN (default 500ms, or PollInterval if smaller)
	PollMax          time.Duration // MCPTASKS_POLL_MAX (default 60s, or PollInterval if larger)
	MaxDuration      time.Duration // MCPTASKS_MAX_DURATION (default 60s)
	Steps            int           // MCPTASKS_STEPS_PER_INVOCATION (default 1)
	StateSecret      string        // MCPTASKS_STATE_SECRET (default: random per process)
	AllowedOrigins   []string      // MCPTASKS_ALLOWED_ORIGINS, comma-separated
	Workers          int           // MCPTASKS_WORKERS: local worker goroutines (default 4)
	MaxLiveTasks     int           // MCPTASKS_MAX_LIVE_TASKS: live tasks per principal (default 0: unlimited)
	// ReadCache is MCPTASKS_READ_CACHE: how many tasks a process keeps its
	// last read of, to answer tasks/get without Redis while nothing can
	// have changed them (see tasks.Options.ReadCache); 0 turns it off.
	// Unset it is -1, the platform's default: 10000 for the local server,
	// 0 on Lambda and Vercel, whose processes are frozen between requests
	// (an announcement waiting in a frozen socket could not drop a read).
	// Redis stores only.
	ReadCache    int
	StoreTimeout time.Duration // MCPTASKS_STORE_TIMEOUT: bound on one request's store work (default 5s)
	ReadTimeout  time.Duration // MCPTASKS_READ_TIMEOUT: local server, time for a whole request to arrive (default 30s)
	MaxRequests  int           // MCPTASKS_MAX_REQUESTS: requests served at once per process (default 256)
	// MaxStreams and MaxStreamsPerPrincipal are MCPTASKS_MAX_STREAMS and
	// MCPTASKS_MAX_STREAMS_PER_PRINCIPAL: long-lived requests (task
	// streams, held 2025-11-25 tasks/result) open at once per process, in
	// all (default 1024) and per principal (default 32), counted apart
	// from MaxRequests (see tasks.Options).
	MaxStreams             int
	MaxStreamsPerPrincipal int
	SweepEvery             time.Duration // MCPTASKS_SWEEP_INTERVAL (default DefaultSweepEvery, 30s)
	// WakeHorizon is MCPTASKS_WAKE_HORIZON: with the Redis queue on a
	// standalone Redis, a wake further ahead is enqueued by the sweeper
	// within this long before it (redisstore.Options.WakeHorizon);
	// default 1h, or 10 sweep intervals if longer.
	WakeHorizon time.Duration
	// NoJobs is MCPTASKS_JOBS=off: the async-jobs fallback for clients
	// without the tasks extension is off (tasks.JobOptions.Disable).
	NoJobs bool
	// Lease is MCPTASKS_LEASE (default tasks.DefaultLease, 10s): how long
	// a worker's claim on a task lasts unless renewed (tasks.Options.Lease).
	// A running step renews it every third of it, so a worker that dies is
	// replaced within it.
	Lease time.Duration
	// Visibility is MCPTASKS_QUEUE_VISIBILITY (default: Lease): how long a
	// message a worker of the Redis queue received stays hidden before it
	// is delivered again, unless the worker's lease renewals moved it to
	// the lease's end first. At most Lease, a worker that dies before its
	// first renewal is replaced within it too, and a renewal never moves a
	// message earlier (which announces it to every process's consumers).
	Visibility time.Duration
	// Auth is the bearer-token configuration (MCPTASKS_AUTH_*, see package
	// auth); AuthEnabled is false when none of it is set, and the server
	// then runs anonymously (local development only).
	Auth        auth.Config
	AuthEnabled bool

	// Queue is the queue adapter: QueueRedis, QueuePostgres, QueueSQS or
	// QueueQStash (MCPTASKS_QUEUE; default: the store's own).
	Queue  string
	SQS    SQSConfig
	QStash QStashConfig
	// CronSecret is the bearer token the sweeper endpoint of a Vercel
	// deployment requires (CRON_SECRET; Vercel Cron sends it).
	CronSecret string
	// PublicURL is MCPTASKS_PUBLIC_URL: the public base URL of the MCP
	// function (https://app.example.com), under which callback URLs are
	// formed (tasks.Options.PublicURL). Workers need it to make callbacks.
	// Default: the origin of MCPTASKS_QSTASH_WORKER_URL on Vercel; the
	// local server's own address for `serve`.
	PublicURL string
}

// DefaultClusterShards is the number of shards of the queue and the due
// index on a Redis Cluster when MCPTASKS_REDIS_SHARDS is not set: 12
// shards fall on the slot ranges `redis-cli --cluster create` gives 2, 3,
// 4, 6 or 12 masters, so each task's shard sits on the task's own master.
const DefaultClusterShards = 12

// DefaultSweepEvery is MCPTASKS_SWEEP_INTERVAL's default. The deployment
// sweeps about once per interval whatever its number of worker processes
// (see [Bundle.RunSweeper]); an idle one thus costs about (processes +
// shards) commands per interval for sweeping. Sweeping is the safety net
// behind the queue, so the interval adds at most itself to the repair of a
// lost enqueue (after half of MCPTASKS_MAX_DURATION) or of a worker's crash
// that the queue did not repair (the task's message comes back when the
// dead worker's lease, MCPTASKS_LEASE, runs out).
const DefaultSweepEvery = 30 * time.Second

// maxShards bounds MCPTASKS_REDIS_SHARDS: every sweep reads each shard.
const maxShards = 256

// parseRedisWait reads MCPTASKS_REDIS_WAIT's "N[,timeout]".
func (c *Config) parseRedisWait(v string) error {
	n, t, hasT := strings.Cut(strings.TrimSpace(v), ",")
	replicas, err := strconv.Atoi(strings.TrimSpace(n))
	if err != nil || replicas < 0 {
		return errors.New("want a number of replicas, optionally followed by a timeout: 1 or 1,500ms")
	}
	c.RedisWait, c.RedisWaitTimeout = replicas, time.Second
	if hasT {
		d, err := time.ParseDuration(strings.TrimSpace(t))
		if err != nil || d <= 0 {
			return fmt.Errorf("timeout %q: want a positive duration such as 500ms", t)
		}
		c.RedisWaitTimeout = d
	}
	return nil
}

// Queue adapters selectable with MCPTASKS_QUEUE.
const (
	QueueRedis    = "redis"
	QueuePostgres = "postgres"
	QueueSQS      = "sqs"
	QueueQStash   = "qstash"
)

// Stores selectable with MCPTASKS_STORE.
const (
	StoreRedis    = "redis"
	StorePostgres = "postgres"
)

// SQSConfig configures the Amazon SQS queue. Region and credentials come
// from the function's environment (AWS_REGION, AWS_ACCESS_KEY_ID, ...; see
// sqsqueue.NewClient).
type SQSConfig struct {
	// QueueURL is the queue (MCPTASKS_SQS_QUEUE_URL). Required for "sqs".
	QueueURL string
	// FIFO sends MessageGroupId and MessageDeduplicationId (see
	// sqsqueue.Options.FIFO); it is set when QueueURL ends in ".fifo".
	FIFO bool
}

// QStashConfig configures the Upstash QStash queue and the verification of
// its deliveries.
type QStashConfig struct {
	// Token publishes messages (QSTASH_TOKEN). Required for "qstash".
	Token string
	// URL is the QStash API (QSTASH_URL, default qstash.DefaultURL).
	URL string
	// WorkerURL is the public URL of the worker endpoint that QStash
	// calls, e.g. https://app.vercel.app/api/worker
	// (MCPTASKS_QSTASH_WORKER_URL); deliveries are signed for exactly this
	// URL. Required for "qstash".
	WorkerURL string
	// CurrentSigningKey and NextSigningKey verify deliveries
	// (QSTASH_CURRENT_SIGNING_KEY, QSTASH_NEXT_SIGNING_KEY); the current
	// one is required for "qstash".
	CurrentSigningKey string
	NextSigningKey    string
	// Retries is QStash's delivery retry count (MCPTASKS_QSTASH_RETRIES;
	// 0: the plan's default).
	Retries int
	// BypassSecret, when set, is forwarded by QStash as the
	// x-vercel-protection-bypass header so that deliveries pass Vercel's
	// Deployment Protection (VERCEL_AUTOMATION_BYPASS_SECRET).
	BypassSecret string
}

// FromEnv reads the configuration from environment variables through
// getenv (os.Getenv when nil).
func FromEnv(getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	c := Config{
		App:               strings.TrimSpace(getenv("MCPTASKS_APP")),
		RedisURL:          getenv("REDIS_URL"),
		KeyPrefix:         getenv("MCPTASKS_KEY_PREFIX"),
		Store:             strings.ToLower(strings.TrimSpace(getenv("MCPTASKS_STORE"))),
		DatabaseURL:       strings.TrimSpace(getenv("DATABASE_URL")),
		PGSchema:          strings.TrimSpace(getenv("MCPTASKS_PG_SCHEMA")),
		DatabaseDirectURL: strings.TrimSpace(getenv("DATABASE_URL_UNPOOLED")),
		StateSecret:       getenv("MCPTASKS_STATE_SECRET"),
		Queue:             strings.ToLower(strings.TrimSpace(getenv("MCPTASKS_QUEUE"))),
		SQS:               SQSConfig{QueueURL: strings.TrimSpace(getenv("MCPTASKS_SQS_QUEUE_URL"))},
		QStash: QStashConfig{
			Token:             getenv("QSTASH_TOKEN"),
			URL:               strings.TrimSpace(getenv("QSTASH_URL")),
			WorkerURL:         strings.TrimSpace(getenv("MCPTASKS_QSTASH_WORKER_URL")),
			CurrentSigningKey: getenv("QSTASH_CURRENT_SIGNING_KEY"),
			NextSigningKey:    getenv("QSTASH_NEXT_SIGNING_KEY"),
			BypassSecret:      getenv("VERCEL_AUTOMATION_BYPASS_SECRET"),
		},
		CronSecret: getenv("CRON_SECRET"),
		PublicURL:  strings.TrimSpace(getenv("MCPTASKS_PUBLIC_URL")),
	}
	var errs []error
	dur := func(name string, dst *time.Duration, def time.Duration) {
		*dst = def
		if v := getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				errs = append(errs, fmt.Errorf("%s=%q: want a positive duration such as 30s", name, v))
				return
			}
			*dst = d
		}
	}
	num := func(name string, dst *int, def int) {
		*dst = def
		if v := getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				errs = append(errs, fmt.Errorf("%s=%q: want a positive integer", name, v))
				return
			}
			*dst = n
		}
	}
	if v := getenv("MCPTASKS_LOG_LEVEL"); v != "" {
		if err := c.LogLevel.UnmarshalText([]byte(strings.TrimSpace(v))); err != nil {
			errs = append(errs, fmt.Errorf("MCPTASKS_LOG_LEVEL=%q: want DEBUG, INFO, WARN or ERROR", v))
		}
	}
	dur("MCPTASKS_TASK_TTL", &c.TaskTTL, time.Hour)
	if v := getenv("MCPTASKS_REDIS_SHARDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > maxShards {
			errs = append(errs, fmt.Errorf("MCPTASKS_REDIS_SHARDS=%q: want a number of shards from 1 to %d (0: automatic)", v, maxShards))
		}
		c.RedisShards = n
	}
	if v := getenv("MCPTASKS_REDIS_WAIT"); v != "" {
		if err := c.parseRedisWait(v); err != nil {
			errs = append(errs, fmt.Errorf("MCPTASKS_REDIS_WAIT=%q: %w", v, err))
		}
	}
	dur("MCPTASKS_POLL_INTERVAL", &c.PollInterval, time.Second)
	dur("MCPTASKS_POLL_MIN", &c.PollMin, min(500*time.Millisecond, c.PollInterval))
	dur("MCPTASKS_POLL_MAX", &c.PollMax, max(60*time.Second, c.PollInterval))
	dur("MCPTASKS_MAX_DURATION", &c.MaxDuration, 60*time.Second)
	dur("MCPTASKS_SWEEP_INTERVAL", &c.SweepEvery, DefaultSweepEvery)
	dur("MCPTASKS_WAKE_HORIZON", &c.WakeHorizon, max(redisstore.DefaultWakeHorizon, 10*c.SweepEvery))
	dur("MCPTASKS_LEASE", &c.Lease, tasks.DefaultLease)
	dur("MCPTASKS_QUEUE_VISIBILITY", &c.Visibility, c.Lease)
	num("MCPTASKS_STEPS_PER_INVOCATION", &c.Steps, 1)
	num("MCPTASKS_WORKERS", &c.Workers, 4)
	num("MCPTASKS_MAX_REQUESTS", &c.MaxRequests, tasks.DefaultMaxRequests)
	num("MCPTASKS_MAX_STREAMS", &c.MaxStreams, tasks.DefaultMaxStreams)
	num("MCPTASKS_MAX_STREAMS_PER_PRINCIPAL", &c.MaxStreamsPerPrincipal, tasks.DefaultMaxStreamsPerPrincipal)
	c.ReadCache = -1
	if v := getenv("MCPTASKS_READ_CACHE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("MCPTASKS_READ_CACHE=%q: want a number of tasks (0: off)", v))
		}
		c.ReadCache = n
	}
	if v := getenv("MCPTASKS_MAX_LIVE_TASKS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("MCPTASKS_MAX_LIVE_TASKS=%q: want a number of tasks (0: unlimited)", v))
		}
		c.MaxLiveTasks = n
	}
	switch v := strings.ToLower(strings.TrimSpace(getenv("MCPTASKS_JOBS"))); v {
	case "", "on", "true", "1":
	case "off", "false", "0":
		c.NoJobs = true
	default:
		errs = append(errs, fmt.Errorf("MCPTASKS_JOBS=%q: want on or off", v))
	}
	dur("MCPTASKS_READ_TIMEOUT", &c.ReadTimeout, 30*time.Second)
	dur("MCPTASKS_STORE_TIMEOUT", &c.StoreTimeout, 5*time.Second)
	num("MCPTASKS_QSTASH_RETRIES", &c.QStash.Retries, 0)
	if v := getenv("MCPTASKS_ALLOWED_ORIGINS"); v != "" {
		for _, o := range strings.Split(v, ",") {
			if o = strings.TrimSpace(o); o != "" {
				c.AllowedOrigins = append(c.AllowedOrigins, o)
			}
		}
	}
	ac, on, err := auth.ConfigFromEnv(getenv)
	if err != nil {
		errs = append(errs, err)
	}
	c.Auth, c.AuthEnabled = ac, on
	if c.TaskTTL > tasks.MaxTTL {
		errs = append(errs, fmt.Errorf("MCPTASKS_TASK_TTL=%v exceeds the maximum %v", c.TaskTTL, tasks.MaxTTL))
	}
	if err := redisstore.CheckPrefix(c.KeyPrefix); err != nil {
		errs = append(errs, fmt.Errorf("MCPTASKS_KEY_PREFIX=%q: %w", c.KeyPrefix, err))
	}
	errs = append(errs, c.checkStore(), c.checkQueue(), c.checkPublicURL())
	return c, errors.Join(errs...)
}

// checkPublicURL validates MCPTASKS_PUBLIC_URL, or defaults it to the
// origin of the QStash worker URL (the deployment's public host).
func (c *Config) checkPublicURL() error {
	if c.PublicURL == "" {
		if u, err := url.Parse(c.QStash.WorkerURL); c.Queue == QueueQStash && err == nil && u.Host != "" {
			c.PublicURL = u.Scheme + "://" + u.Host
		}
		return nil
	}
	u, err := url.Parse(c.PublicURL)
	if err != nil || !u.IsAbs() || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("MCPTASKS_PUBLIC_URL=%q: want the absolute http(s) URL the MCP function is reached at, such as https://app.example.com", c.PublicURL)
	}
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	return nil
}

// checkQueue validates the queue selection and what it needs, and sets the
// default adapter (checkStore first: it sets the store the default
// follows).
func (c *Config) checkQueue() error {
	var errs []error
	switch c.Queue {
	case "":
		c.Queue = QueueRedis
		if c.Store == StorePostgres {
			c.Queue = QueuePostgres
		}
	case QueueRedis:
	case QueuePostgres:
		if c.DatabaseURL == "" {
			errs = append(errs, errors.New("MCPTASKS_QUEUE=postgres needs DATABASE_URL"))
		}
	case QueueSQS:
		if c.SQS.QueueURL == "" {
			errs = append(errs, errors.New("MCPTASKS_QUEUE=sqs needs MCPTASKS_SQS_QUEUE_URL"))
		}
		c.SQS.FIFO = strings.HasSuffix(c.SQS.QueueURL, ".fifo")
	case QueueQStash:
		if c.QStash.Token == "" {
			errs = append(errs, errors.New("MCPTASKS_QUEUE=qstash needs QSTASH_TOKEN"))
		}
		if c.QStash.CurrentSigningKey == "" {
			errs = append(errs, errors.New("MCPTASKS_QUEUE=qstash needs QSTASH_CURRENT_SIGNING_KEY (and QSTASH_NEXT_SIGNING_KEY) to verify deliveries"))
		}
		if u, err := url.Parse(c.QStash.WorkerURL); err != nil || !u.IsAbs() || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
			errs = append(errs, fmt.Errorf("MCPTASKS_QUEUE=qstash needs MCPTASKS_QSTASH_WORKER_URL, the absolute public URL of the worker endpoint (got %q)", c.QStash.WorkerURL))
		}
	default:
		errs = append(errs, fmt.Errorf("MCPTASKS_QUEUE=%q: want redis, postgres, sqs or qstash", c.Queue))
	}
	if (c.Queue == QueueSQS || c.Queue == QueueQStash) && !c.SharedStore() {
		errs = append(errs, fmt.Errorf("MCPTASKS_QUEUE=%s needs REDIS_URL or DATABASE_URL: the embedded Redis lives inside one process, and serverless functions are many", c.Queue))
	}
	return errors.Join(errs...)
}

// checkStore validates the store selection and what it needs, and sets
// the default store.
func (c *Config) checkStore() error {
	var errs []error
	switch c.Store {
	case "":
		c.Store = DefaultStore(c.RedisURL, c.DatabaseURL)
	case StoreRedis:
	case StorePostgres:
		if c.DatabaseURL == "" {
			errs = append(errs, errors.New("MCPTASKS_STORE=postgres needs DATABASE_URL"))
		}
	default:
		errs = append(errs, fmt.Errorf("MCPTASKS_STORE=%q: want redis or postgres", c.Store))
	}
	if c.PGSchema != "" {
		if err := pgstore.CheckSchema(c.PGSchema); err != nil {
			errs = append(errs, fmt.Errorf("MCPTASKS_PG_SCHEMA: %w", err))
		}
	}
	return errors.Join(errs...)
}

// DefaultStore is the store of a deployment that sets no MCPTASKS_STORE:
// postgres when it has a DATABASE_URL and no REDIS_URL, else redis.
func DefaultStore(redisURL, databaseURL string) string {
	if databaseURL != "" && redisURL == "" {
		return StorePostgres
	}
	return StoreRedis
}

// SharedStore reports whether the configured store is shared between
// processes: Redis at REDIS_URL, or PostgreSQL (an embedded Redis lives
// inside one process).
func (c *Config) SharedStore() bool {
	return c.Store == StorePostgres || c.RedisURL != ""
}

// NeedsRedis reports whether the store or the queue is on Redis.
func (c *Config) NeedsRedis() bool {
	return c.Store != StorePostgres || c.Queue == QueueRedis
}

// Bundle is a wired deployment.
type Bundle struct {
	Config Config
	// App is the app the bundle serves.
	App   *tasks.App
	Tasks *tasks.Server
	// Queue is the queue the tasks server enqueues to (see Config.Queue).
	Queue   driver.Queue
	Handler http.Handler
	// embedded is the in-process Redis when no REDIS_URL was given.
	embedded EmbeddedRedis
	// consumer is the Redis queue that local workers consume; nil with a
	// push queue (SQS, QStash), whose platform invokes the worker.
	consumer *redisqueue.Queue
	client   rueidis.Client
	// pool, pgStore and pgConsumer are the Postgres pool, store and
	// queue, when configured; pgListen configures the direct connections
	// that LISTEN.
	pool       *pgxpool.Pool
	pgStore    *pgstore.Store
	pgConsumer *pgqueue.Queue
	pgListen   *pgx.ConnConfig
	// prefix is the key prefix (Config.KeyPrefix or its default).
	prefix string
	log    *slog.Logger
	// telemetry is the app's, when it has some (App.Telemetry).
	telemetry *tasks.Telemetry
	// stop ends what the bundle started in the background (the JWKS
	// refresh); Close calls it.
	stop context.CancelFunc
	// now is the clock of WithClock (nil: the wall clock).
	now func() time.Time
}

// EmbeddedRedis is an in-process Redis server (pkg/embedredis), the local
// default when no REDIS_URL is set.
type EmbeddedRedis interface {
	// Addr is the address clients dial.
	Addr() string
	// Close stops the server.
	Close()
}

// QueueFactory builds a push queue adapter (Amazon SQS, Upstash QStash)
// from the deployment's configuration. The platform adapter that can serve
// that queue passes it with [WithQueue], so that only its binaries link
// the adapter's SDK.
type QueueFactory func(ctx context.Context, cfg Config) (driver.Queue, error)

// Option adjusts how [New] builds a bundle beyond what Config says: which
// adapters the binary links.
type Option func(*options)

type options struct {
	queues   map[string]QueueFactory
	embedded func() (EmbeddedRedis, error)
	redis    []func(*rueidis.ClientOption)
	now      func() time.Time
}

// WithClock runs the bundle on the clock now instead of the wall clock:
// the engine (tasks.Options.Now, unless the app's Options set another)
// and the Redis queue (redisqueue.Options.Now) read it, so sleeps, input
// deadlines, retries and poll advice follow it. Keys expire on the Redis
// server's own clock: pass an embedded Redis that follows now too
// (embedredis.Start). For tests (pkg/platform/local/localtest).
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.now = now }
}

// WithQueue makes the queue called name (Config.Queue, MCPTASKS_QUEUE)
// available, built by f. The Redis queue is always available.
func WithQueue(name string, f QueueFactory) Option {
	return func(o *options) {
		if o.queues == nil {
			o.queues = map[string]QueueFactory{}
		}
		o.queues[name] = f
	}
}

// WithEmbeddedRedis lets a bundle without REDIS_URL start an in-process
// Redis with start (embedredis.Start). Only the local platform passes it:
// serverless functions are many processes, which one embedded Redis
// cannot serve.
func WithEmbeddedRedis(start func() (EmbeddedRedis, error)) Option {
	return func(o *options) { o.embedded = start }
}

// WithRedisClientOptions lets f adjust the Redis client's options after
// the bundle has set them from REDIS_URL and its defaults, before the
// dial: a TLS configuration of your own, a dialer, connection sizes
// ([ForOneRequestAtATime]). Several apply in order. Client-side caching
// stays off whatever f sets (task state must never be served stale).
func WithRedisClientOptions(f func(*rueidis.ClientOption)) Option {
	return func(o *options) { o.redis = append(o.redis, f) }
}

// ForOneRequestAtATime sizes each Redis connection for a process that
// serves one request or invocation at a time (an AWS Lambda function): a
// ring of 2^8 commands in flight and 64 KiB read and write buffers instead
// of rueidis's 2^10 and 512 KiB each, which a fresh process takes about
// 2 ms to allocate and fault in (rueidis.NewClient in a fresh process:
// 5.2 ms at rueidis's defaults, 3.6 ms at these, median of 25;
// BENCHMARKS.md). Larger values stream through the buffers. Not for a
// server of many concurrent requests: at 32 concurrent tasks/get, these
// sizes cost a quarter of the throughput.
func ForOneRequestAtATime(o *rueidis.ClientOption) {
	o.RingScaleEachConn = 8 // the smallest scale rueidis recommends
	o.ReadBufferEachConn, o.WriteBufferEachConn = 64<<10, 64<<10
}

// Redis client settings. The client is made once per process and reused
// by every request, invocation and worker of it (warm serverless
// invocations included); NewClient dials at once, so a serverless entry
// point that builds its bundle during init pays the (TLS) dial there.
const (
	// redisDialTimeout bounds a (re)connection.
	redisDialTimeout = 5 * time.Second
	// redisWriteTimeout bounds every read/write and the background PINGs,
	// so a connection that died while a serverless sandbox was frozen is
	// detected and replaced instead of hanging the next invocation.
	redisWriteTimeout = 10 * time.Second
	// redisKeepAlive is how long a connection may sit idle before rueidis
	// PINGs it (and the TCP keep-alive interval). Each connection pings on
	// its own, and a client holds several per server (more on a Cluster:
	// some per master), so rueidis's 1s default makes an idle worker
	// process cost tens of commands a second, billed on metered Redis; at
	// 10s, two idle processes on a 3-master cluster still sent 3.4 PINGs a
	// second. A dead idle connection is still found within redisKeepAlive
	// + redisWriteTimeout, and requests are bounded by
	// MCPTASKS_STORE_TIMEOUT meanwhile; 60s stays below the idle timeouts
	// of load balancers and NATs in front of managed Redis (350s on AWS).
	redisKeepAlive = 60 * time.Second
	// redisIdleClose is how long a connection of rueidis's pools of
	// dedicated connections (the subscriber of task streams, the queue's
	// wake subscription) may sit idle before it is closed: a long-lived
	// process keeps no connection a burst of work left behind.
	redisIdleClose = 30 * time.Second
)

// RedisOptions returns the rueidis options a bundle connects to
// redisURL (a REDIS_URL) with: client-side caching off and the bundle's
// dial, keep-alive and write timeouts unless the URL sets its own. Tools
// that read a deployment's store, such as mcptasks inspect, use it too.
func RedisOptions(redisURL string) (rueidis.ClientOption, error) { return redisOptions(redisURL) }

// redisOptions returns the rueidis options for cfg's REDIS_URL, with
// clientDefaults applied.
func redisOptions(redisURL string) (rueidis.ClientOption, error) {
	opt, err := rueidis.ParseURL(redisURL)
	if err != nil {
		return opt, fmt.Errorf("REDIS_URL: %w", err)
	}
	return clientDefaults(opt), nil
}

// clientDefaults applies what every Redis client of a bundle needs:
// client-side caching off (task state must never be served stale, and
// Upstash, ElastiCache and miniredis refuse CLIENT TRACKING), the
// timeouts above unless opt sets its own (a REDIS_URL's dial_timeout,
// write_timeout), and idle pooled connections closed after
// redisIdleClose.
func clientDefaults(opt rueidis.ClientOption) rueidis.ClientOption {
	opt.DisableCache = true
	if opt.BlockingPoolCleanup == 0 {
		opt.BlockingPoolCleanup = redisIdleClose
	}
	if opt.Dialer.Timeout == 0 {
		opt.Dialer.Timeout = redisDialTimeout
	}
	if opt.Dialer.KeepAlive == 0 {
		opt.Dialer.KeepAlive = redisKeepAlive
	}
	if opt.ConnWriteTimeout == 0 {
		opt.ConnWriteTimeout = redisWriteTimeout
	}
	return opt
}

// Select returns the app called name among apps: the only one, or the
// first when name is empty. The names are the Apps' Name fields.
func Select(apps []*tasks.App, name string) (*tasks.App, error) {
	if len(apps) == 0 {
		return nil, errors.New("no app to serve")
	}
	if name == "" {
		return apps[0], nil
	}
	for _, a := range apps {
		if a.Implementation().Name == name {
			return a, nil
		}
	}
	return nil, fmt.Errorf("unknown app %q (want %s)", name, AppNames(apps))
}

// AppNames lists the names of apps, comma-separated, in order.
func AppNames(apps []*tasks.App) string {
	names := make([]string, len(apps))
	for i, a := range apps {
		names[i] = a.Implementation().Name
	}
	return strings.Join(names, ", ")
}

// New connects to Redis (or starts the embedded one), builds the queue
// Config selects, the tasks server with app's tools, and the HTTP handler.
// ctx bounds the building only; what the bundle runs in the background
// lives until [Bundle.Close].
func New(ctx context.Context, cfg Config, log *slog.Logger, app *tasks.App, opts ...Option) (*Bundle, error) {
	if log == nil {
		log = slog.Default()
	}
	if app == nil {
		return nil, errors.New("no app to serve")
	}
	var o options
	for _, f := range opts {
		f(&o)
	}
	if cfg.Store == "" {
		cfg.Store = StoreRedis
	}
	if cfg.Queue == "" {
		cfg.Queue = QueueRedis
		if cfg.Store == StorePostgres {
			cfg.Queue = QueuePostgres
		}
	}
	bg, stop := context.WithCancel(context.WithoutCancel(ctx))
	b := &Bundle{Config: cfg, App: app, log: log, stop: stop}
	prefix := cfg.KeyPrefix
	if prefix == "" {
		prefix = "mcptasks:"
	}
	b.prefix = prefix
	if cfg.NeedsRedis() {
		if err := b.connectRedis(o); err != nil {
			b.Close()
			return nil, err
		}
	}
	if cfg.Store == StorePostgres || cfg.Queue == QueuePostgres {
		if err := b.connectPostgres(ctx); err != nil {
			b.Close()
			return nil, err
		}
	}
	var err error
	tel := &tasks.Telemetry{}
	if app.Telemetry != nil {
		if tel, err = app.Telemetry(ctx); err != nil {
			b.Close()
			return nil, fmt.Errorf("telemetry: %w", err)
		}
		if tel == nil {
			tel = &tasks.Telemetry{}
		}
		b.telemetry = tel
	}
	b.now = o.now
	if b.Queue, err = b.newQueue(ctx, prefix, o); err != nil {
		b.Close()
		return nil, err
	}
	store, err := b.newStore(ctx, prefix, tel)
	if err != nil {
		b.Close()
		return nil, err
	}
	var so mcp.ServerOptions
	if app.ServerOptions != nil {
		so = *app.ServerOptions
	}
	if so.Logger == nil {
		// The go-sdk logs every stateless request at INFO; keep its warnings.
		so.Logger = slog.New(sdkLog{log.Handler(), slog.LevelWarn})
	}
	// Authentication puts the principal in the context; the endpoint runs it
	// before the tasks layer (see tasks.NewHandler for the order).
	var authenticate func(http.Handler) http.Handler
	extra := map[string]http.Handler{}
	if cfg.AuthEnabled {
		v, err := auth.New(bg, cfg.Auth, log)
		if err != nil {
			b.Close()
			return nil, fmt.Errorf("auth: %w", err)
		}
		authenticate = v.Middleware
		for _, p := range v.MetadataPaths() {
			extra["GET "+p] = v.MetadataHandler()
		}
	} else {
		log.Warn("authentication is off (no MCPTASKS_AUTH_* set): every caller shares one principal and task ids are the only capability; do not expose this server")
	}
	if cfg.StateSecret == "" && cfg.Queue != QueueRedis {
		log.Warn("MCPTASKS_STATE_SECRET is not set: each instance seals inline input rounds with its own random key, so a round answered on another instance fails; set the same secret on every instance")
	}
	topts := tasks.Options{
		Logger:             log,
		TTL:                cfg.TaskTTL,
		PollInterval:       cfg.PollInterval,
		PollMin:            cfg.PollMin,
		PollMax:            cfg.PollMax,
		MaxDuration:        cfg.MaxDuration,
		Lease:              cfg.Lease,
		StepsPerInvocation: cfg.Steps,
		StoreTimeout:       cfg.StoreTimeout,
		MaxLiveTasks:       cfg.MaxLiveTasks,
		ReadCache:          max(cfg.ReadCache, 0),
		StateSecret:        []byte(cfg.StateSecret),
		Anonymous:          !cfg.AuthEnabled,
		TracerProvider:     tel.TracerProvider,
		MeterProvider:      tel.MeterProvider,
		Jobs:               tasks.JobOptions{Disable: cfg.NoJobs},
		Now:                o.now,
		PublicURL:          cfg.PublicURL,
	}
	if cfg.Store == StorePostgres {
		// Redis only: PostgreSQL delivers a notification to the other
		// processes after the writer's commit has returned, so a write
		// through another process could be answered late from a kept read.
		topts.ReadCache = 0
	}
	if app.Options != nil {
		app.Options(&topts)
	}
	b.Tasks = tasks.New(app.Implementation(), &so, store, b.Queue, &topts)
	if app.Register != nil {
		app.Register(b.Tasks)
	}
	b.Handler = tasks.NewHandler(b.Tasks, &tasks.HandlerOptions{
		Logger:                 log,
		AllowedOrigins:         cfg.AllowedOrigins,
		Authenticate:           authenticate,
		Extra:                  extra,
		MaxRequests:            cfg.MaxRequests,
		MaxStreams:             cfg.MaxStreams,
		MaxStreamsPerPrincipal: cfg.MaxStreamsPerPrincipal,
	})
	return b, nil
}

// connectRedis connects to REDIS_URL, or starts the embedded Redis when
// there is none and the binary links one (WithEmbeddedRedis).
func (b *Bundle) connectRedis(o options) error {
	cfg := b.Config
	var opt rueidis.ClientOption
	if cfg.RedisURL == "" {
		if cfg.Queue == QueueSQS || cfg.Queue == QueueQStash {
			return fmt.Errorf("MCPTASKS_QUEUE=%s needs REDIS_URL or DATABASE_URL", cfg.Queue)
		}
		if o.embedded == nil {
			return errors.New("REDIS_URL is not set: serverless functions need a shared Redis, or DATABASE_URL for the Postgres store (the embedded Redis is for the local server only)")
		}
		m, err := o.embedded() // keys expire on the wall clock, like a real server
		if err != nil {
			return fmt.Errorf("starting the embedded Redis: %w", err)
		}
		b.embedded = m
		opt = clientDefaults(rueidis.ClientOption{InitAddress: []string{m.Addr()}, ForceSingleClient: true})
		b.log.Info("no REDIS_URL set: using an embedded in-process Redis; tasks do not survive a restart")
	} else {
		var err error
		if opt, err = redisOptions(cfg.RedisURL); err != nil {
			return err
		}
	}
	for _, f := range o.redis {
		f(&opt)
	}
	opt.DisableCache = true
	client, err := rueidis.NewClient(opt)
	if err != nil {
		return fmt.Errorf("connecting to Redis: %w", err)
	}
	b.client = client
	if cfg.RedisWait > 0 && b.embedded != nil {
		return errors.New("MCPTASKS_REDIS_WAIT needs REDIS_URL: the embedded Redis has no replicas to wait for")
	}
	return nil
}

// newStore builds the task store Config.Store selects.
func (b *Bundle) newStore(ctx context.Context, prefix string, tel *tasks.Telemetry) (driver.Store, error) {
	cfg := b.Config
	if cfg.Store == StorePostgres {
		return b.newPostgresStore(ctx, tel)
	}
	sopts := &redisstore.Options{Prefix: prefix, EnqueueGrace: cfg.MaxDuration / 2, TracerProvider: tel.TracerProvider,
		Shards: b.redisShards(), Wait: cfg.RedisWait, WaitTimeout: cfg.RedisWaitTimeout,
		WakeHorizon: cfg.WakeHorizon}
	if b.consumer != nil && b.client.Mode() == rueidis.ClientModeStandalone {
		// The queue is in the same Redis: each transition enqueues in its
		// own script, into the task's shard (a worker step saves a round
		// trip).
		sopts.Queue = b.consumer
	}
	return redisstore.New(b.client, sopts), nil
}

// newQueue builds the queue adapter Config.Queue selects.
func (b *Bundle) newQueue(ctx context.Context, prefix string, o options) (driver.Queue, error) {
	cfg := b.Config
	if cfg.Queue == QueuePostgres {
		return b.newPostgresQueue(), nil
	}
	if cfg.Queue == QueueRedis {
		b.consumer = redisqueue.New(b.client, &redisqueue.Options{
			Prefix:     prefix,
			Shards:     b.redisShards(),
			Visibility: cfg.Visibility,
			Logger:     b.log,
			Now:        b.now,
		})
		return b.consumer, nil
	}
	f := o.queues[cfg.Queue]
	if f == nil {
		return nil, fmt.Errorf("MCPTASKS_QUEUE=%s: this binary does not include that queue adapter (sqs is served by pkg/platform/awslambda, qstash by pkg/platform/vercel; pass bundle.WithQueue to add one)", cfg.Queue)
	}
	q, err := f(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("%s queue: %w", cfg.Queue, err)
	}
	return q, nil
}

// redisShards is the number of shards of the Redis queue and the due
// index: Config.RedisShards, or when it is 0, 1 on a standalone Redis and
// DefaultClusterShards on a Redis Cluster.
func (b *Bundle) redisShards() int {
	switch {
	case b.Config.RedisShards > 0:
		return b.Config.RedisShards
	case b.client.Mode() == rueidis.ClientModeCluster:
		return DefaultClusterShards
	}
	return 1
}

// Log returns the bundle's logger.
func (b *Bundle) Log() *slog.Logger { return b.log }

// Advance is one worker invocation for a delivered task id: it advances
// the task and logs the outcome. A nil error acknowledges the message; an
// error (the store was unreachable or failed) asks for redelivery.
func (b *Bundle) Advance(ctx context.Context, taskID string) error {
	res, err := b.Tasks.Advance(ctx, taskID)
	if err != nil {
		b.log.Warn("advancing task failed; the message will be redelivered", "task", taskID, "err", err)
		return fmt.Errorf("advance %s: %w", taskID, err)
	}
	b.log.Debug("advanced task", "task", taskID, "status", res.Status, "steps", res.Steps, "skipped", res.Reason)
	return nil
}

// Sweep runs one sweep (see tasks.Server.Sweep) and logs what it did.
func (b *Bundle) Sweep(ctx context.Context) (tasks.SweepResult, error) {
	res, err := b.Tasks.Sweep(ctx, 0)
	if err != nil {
		return res, fmt.Errorf("sweep: %w", err)
	}
	if res.Enqueued > 0 {
		b.log.Info("sweeper re-enqueued tasks", "count", res.Enqueued)
	}
	return res, nil
}

// RunWorkers consumes the Redis queue with n workers until ctx ends,
// advancing one task per message. With a push queue (SQS, QStash) the
// platform invokes the worker instead, and RunWorkers returns at once.
func (b *Bundle) RunWorkers(ctx context.Context, n int) {
	if b.pgConsumer != nil {
		b.runPostgresWorkers(ctx, n)
		return
	}
	if b.consumer == nil {
		b.log.Info("no local workers: the queue pushes to the platform's worker function", "queue", b.Config.Queue)
		return
	}
	b.consumer.Consume(ctx, n, b.advanceMessage)
}

// advanceMessage is the handler of the pull queues' consumers: it
// advances the task and says what its write did with the message.
func (b *Bundle) advanceMessage(ctx context.Context, id string) (queue.Settle, error) {
	res, err := b.Tasks.Advance(ctx, id)
	if err != nil {
		return queue.Ack, err
	}
	b.log.Debug("advanced task", "task", id, "status", res.Status, "steps", res.Steps, "skipped", res.Reason)
	return queue.SettleOf(res.Settled, res.Status.Terminal()), nil
}

// RunSweeper sweeps every interval until ctx ends, taking turns with the
// sweepers of the deployment's other processes: at each tick a process
// sweeps only if it takes the deployment's sweep lock (SET NX with an
// expiry just under the interval; on the Postgres store, a row of its
// locks table), so the deployment sweeps about once
// per interval however many worker processes it runs, at the cost of one
// command per process and tick. The sweeper is the safety net behind the
// queue (a worker that died, an enqueue that was lost): timers and
// deadlines reach the Redis or Postgres queue as delayed messages, so the interval
// only bounds how late such a failure is repaired, after the lease or the
// enqueue grace has run out.
func (b *Bundle) RunSweeper(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	lock := b.sweepLock(every)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if !lock(ctx) {
				continue
			}
			res, err := b.Tasks.Sweep(ctx, 0)
			if err != nil && ctx.Err() == nil {
				b.log.Warn("sweep failed", "err", err)
			} else if res.Enqueued > 0 {
				b.log.Info("sweeper re-enqueued tasks", "count", res.Enqueued)
			}
		}
	}
}

// sweepLock returns the function that takes the deployment's sweep turn
// for one tick of a sweeper ticking every interval: it reports whether
// this process sweeps now. A Redis error lets it sweep (a sweep is safe to
// run concurrently; the lock only saves work).
func (b *Bundle) sweepLock(every time.Duration) func(ctx context.Context) bool {
	token := rand.Text()[:12]
	// Just under the interval, so that the holder's next tick finds it
	// free despite timer jitter.
	hold := max(every-every/10, time.Millisecond)
	take := func(ctx context.Context) (bool, error) {
		err := b.client.Do(ctx, b.client.B().Set().Key(b.prefix+"{sweep}").Value(token).Nx().Px(hold).Build()).Error()
		if rueidis.IsRedisNil(err) {
			return false, nil // another process sweeps this turn
		}
		return err == nil, err
	}
	if b.pgStore != nil {
		take = func(ctx context.Context) (bool, error) { return b.pgStore.TryLock(ctx, "sweep", token, hold) }
	}
	return func(ctx context.Context) bool {
		ok, err := take(ctx)
		if err == nil {
			return ok
		}
		if ctx.Err() == nil {
			b.log.Warn("taking the sweep lock failed; sweeping anyway", "err", err)
		}
		return ctx.Err() == nil
	}
}

// telemetryTimeout bounds a flush or shutdown of the app's telemetry.
const telemetryTimeout = 5 * time.Second

// FlushTelemetry exports the spans and metrics the app's telemetry
// buffers (App.Telemetry), within a few seconds; nothing without
// telemetry. Serverless platforms call it before an invocation returns,
// since the process may be frozen right after.
func (b *Bundle) FlushTelemetry(ctx context.Context) {
	if b.telemetry == nil || b.telemetry.ForceFlush == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), telemetryTimeout)
	defer cancel()
	if err := b.telemetry.ForceFlush(ctx); err != nil {
		b.log.Warn("flushing telemetry failed", "err", err)
	}
}

// Close stops what the bundle runs in the background, flushes and stops
// the app's telemetry and releases the Redis client and the embedded
// Redis.
func (b *Bundle) Close() {
	if b.stop != nil {
		b.stop()
	}
	if b.telemetry != nil && b.telemetry.Shutdown != nil {
		ctx, cancel := context.WithTimeout(context.Background(), telemetryTimeout)
		if err := b.telemetry.Shutdown(ctx); err != nil {
			b.log.Warn("shutting telemetry down failed", "err", err)
		}
		cancel()
	}
	if b.client != nil {
		b.client.Close()
	}
	b.closePostgres()
	if b.embedded != nil {
		b.embedded.Close()
	}
}

// sdkLog is the go-sdk's log handler: it drops records below min, and
// logs the go-sdk's reports of a client's protocol mistakes (which it logs
// at ERROR) at DEBUG, so that no client can write error lines at will.
type sdkLog struct {
	slog.Handler
	min slog.Level
}

// clientMistakes are the go-sdk v1.8.0 messages (mcp/server.go) that
// report what a client sent, not a fault of the server.
var clientMistakes = map[string]bool{
	"method removed in the new protocol":   true,
	"method invalid during initialization": true,
	"initialized before initialize":        true,
	"duplicate initialized notification":   true,
	"duplicate initialize request":         true,
}

func (h sdkLog) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h sdkLog) Handle(ctx context.Context, r slog.Record) error {
	if clientMistakes[r.Message] {
		r.Level = slog.LevelDebug
		if !h.Handler.Enabled(ctx, r.Level) {
			return nil
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h sdkLog) WithAttrs(a []slog.Attr) slog.Handler {
	return sdkLog{h.Handler.WithAttrs(a), h.min}
}

func (h sdkLog) WithGroup(n string) slog.Handler { return sdkLog{h.Handler.WithGroup(n), h.min} }
