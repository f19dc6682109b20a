package bundle_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/mcptasks/mcptasks/pkg/bundle"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/redis/rueidis"
)

// A bundle for a function that serves one invocation at a time, with a
// client name of its own on every Redis connection.
func ExampleWithRedisClientOptions() {
	cfg, err := bundle.FromEnv(os.Getenv)
	if err != nil {
		fmt.Println(err)
		return
	}
	b, err := bundle.New(context.Background(), cfg, slog.Default(), &tasks.App{Name: "tools"},
		bundle.WithRedisClientOptions(bundle.ForOneRequestAtATime),
		bundle.WithRedisClientOptions(func(o *rueidis.ClientOption) { o.ClientName = "tools-fn" }))
	if err != nil {
		fmt.Println(err) // without REDIS_URL: the embedded Redis is the local platform's only
		return
	}
	defer b.Close()
}
