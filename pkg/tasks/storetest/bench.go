package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
)

// CreateSideBySide measures Create in each of stores in one loop: every
// iteration of b creates a task in each store in turn, so that what the
// machine and the server go through meanwhile weighs on all of them
// alike (a difference between backends' variants is then measured, not
// the drift between two runs). Task i is created at now plus i µs. It
// returns each store's mean time per creation.
func CreateSideBySide(b *testing.B, now time.Time, stores ...driver.Store) []time.Duration {
	spent := make([]time.Duration, len(stores))
	i := 0
	for b.Loop() {
		i++
		for k, s := range stores {
			start := time.Now()
			if _, err := s.Create(b.Context(), &driver.NewTask{ID: driver.NewID(), Owner: "alice", Tool: "tool", Args: json.RawMessage(`{}`),
				TTL: time.Hour, PollInterval: time.Second, Now: now.Add(time.Duration(i) * time.Microsecond)}); err != nil {
				b.Fatal(err)
			}
			spent[k] += time.Since(start)
		}
	}
	for k := range spent {
		spent[k] /= time.Duration(max(i, 1))
	}
	return spent
}
