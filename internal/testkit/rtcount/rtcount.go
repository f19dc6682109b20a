// Package rtcount counts Redis round trips made through a rueidis client,
// for tests and benchmarks that report round trips per operation.
package rtcount

import (
	"context"
	"sync/atomic"

	"github.com/redis/rueidis"
)

// Client wraps a rueidis.Client and counts its round trips: one per Do and
// one per DoMulti (a pipeline), however many commands it carries.
type Client struct {
	rueidis.Client
	trips    atomic.Int64
	commands atomic.Int64
}

// Wrap returns a counting client around c.
func Wrap(c rueidis.Client) *Client { return &Client{Client: c} }

// Do implements rueidis.Client.
func (c *Client) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.trips.Add(1)
	c.commands.Add(1)
	return c.Client.Do(ctx, cmd)
}

// DoMulti implements rueidis.Client.
func (c *Client) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	c.trips.Add(1)
	c.commands.Add(int64(len(cmds)))
	return c.Client.DoMulti(ctx, cmds...)
}

// Trips returns the round trips so far.
func (c *Client) Trips() int64 { return c.trips.Load() }

// Commands returns the commands sent so far.
func (c *Client) Commands() int64 { return c.commands.Load() }

// Reset zeroes the counters.
func (c *Client) Reset() {
	c.trips.Store(0)
	c.commands.Store(0)
}
