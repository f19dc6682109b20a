package platform_test

import (
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
	"github.com/mcptasks/mcptasks/pkg/bundle"
	"github.com/mcptasks/mcptasks/pkg/platform"
	"github.com/mcptasks/mcptasks/pkg/tasks"
)

// A process builds its bundle once, at the configured log level, for the
// app MCPTASKS_APP selects; a failed build is not remembered, so a Redis
// that was unreachable at a cold start does not poison the instance.
func TestProcess(t *testing.T) {
	good := testredis.Start(t)
	env := map[string]string{"REDIS_URL": "redis://127.0.0.1:1", "MCPTASKS_LOG_LEVEL": "debug", "MCPTASKS_APP": "two"}
	var built atomic.Int32
	var level slog.Level
	logger := func(cfg bundle.Config) *slog.Logger {
		built.Add(1)
		level = cfg.LogLevel
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	one, two := &tasks.App{Name: "one"}, &tasks.App{Name: "two"}
	p := platform.NewProcess([]*tasks.App{one, two}, func(k string) string { return env[k] }, logger)
	if _, err := p.Bundle(); err == nil {
		t.Fatal("a bundle on an unreachable Redis was built")
	}
	env["REDIS_URL"] = good
	// Within a second the failure is answered again without a new dial
	// (concurrent requests wait for one dial, not one each) ...
	if _, err := p.Bundle(); err == nil || built.Load() != 1 {
		t.Fatalf("a second call right away: err %v, %d builds; want the remembered failure and 1 build", err, built.Load())
	}
	time.Sleep(1100 * time.Millisecond) // ... and then tried anew
	b, err := p.Bundle()
	if err != nil {
		t.Fatalf("after Redis came back: %v", err)
	}
	t.Cleanup(b.Close)
	if b.App != two || level != slog.LevelDebug {
		t.Errorf("app %q level %v, want two and DEBUG", b.App.Name, level)
	}
	again, _ := p.Bundle()
	if again != b || built.Load() != 2 {
		t.Errorf("the bundle was built %d times (want 2: one failure, one success) or not reused", built.Load())
	}

	env2 := map[string]string{"REDIS_URL": good, "MCPTASKS_APP": "three"}
	if _, err := platform.NewProcess([]*tasks.App{one, two}, func(k string) string { return env2[k] }, logger).Bundle(); err == nil {
		t.Error("an unknown MCPTASKS_APP was served")
	}
}

// Prepare builds the bundle in the background and Bundle waits for that
// build rather than starting its own; a failed background build is not
// remembered: the next Bundle builds again at once.
func TestProcessPrepare(t *testing.T) {
	good := testredis.Start(t)
	env := map[string]string{"REDIS_URL": good}
	var built atomic.Int32
	logger := func(cfg bundle.Config) *slog.Logger {
		built.Add(1)
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	app := &tasks.App{Name: "one"}
	p := platform.NewProcess([]*tasks.App{app}, func(k string) string { return env[k] }, logger)
	p.Prepare()
	b, err := p.Bundle()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if p.Built() != b || built.Load() != 1 {
		t.Errorf("%d builds, Built %p, Bundle %p: want the prepared bundle, built once", built.Load(), p.Built(), b)
	}

	env2 := map[string]string{"REDIS_URL": "redis://127.0.0.1:1"}
	built.Store(0)
	p = platform.NewProcess([]*tasks.App{app}, func(k string) string { return env2[k] }, logger)
	p.Prepare()
	if p.Built() != nil { // waits for the background build, which fails
		t.Fatal("a bundle on an unreachable Redis was built")
	}
	env2["REDIS_URL"] = good
	b, err = p.Bundle()
	if err != nil {
		t.Fatalf("Bundle after a failed background build: %v (want a new build at once)", err)
	}
	t.Cleanup(b.Close)
	if built.Load() != 2 {
		t.Errorf("%d builds, want 2 (the failed background one, then Bundle's)", built.Load())
	}
}
