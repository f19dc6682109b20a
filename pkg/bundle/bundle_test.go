package bundle

import (
	"strings"
	"testing"
	"time"
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
	cases := []struct {
		name    string
		env     map[string]string
		queue   string
		wantErr string
	}{
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
		{"unknown", map[string]string{"MCPTASKS_QUEUE": "kafka"}, "", "want redis, sqs or qstash"},
	}
	for _, c := range cases {
		cfg, err := FromEnv(envOf(c.env))
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%s: error %v, want one mentioning %q", c.name, err, c.wantErr)
		case c.wantErr == "" && cfg.Queue != c.queue:
			t.Errorf("%s: Queue = %q, want %q", c.name, cfg.Queue, c.queue)
		}
	}

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

// The Redis client for a REDIS_URL never caches client-side and has dial
// and write timeouts, unless the URL sets its own timeouts.
func TestRedisOptions(t *testing.T) {
	t.Parallel()
	opt, err := redisOptions("rediss://default:pw@example.upstash.io:6379")
	if err != nil {
		t.Fatal(err)
	}
	if !opt.DisableCache || opt.Dialer.Timeout != redisDialTimeout || opt.ConnWriteTimeout != redisWriteTimeout {
		t.Errorf("options: DisableCache=%v dial=%v write=%v", opt.DisableCache, opt.Dialer.Timeout, opt.ConnWriteTimeout)
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
