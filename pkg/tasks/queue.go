package tasks

import (
	"context"
	"time"
)

// deferrer is a Queue with the optional Defer method (see Queue).
type deferrer interface {
	Defer(ctx context.Context, taskID string, at time.Time) error
}
