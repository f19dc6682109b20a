package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// goid reads real goroutine ids: non-zero, stable within a goroutine and
// distinct across goroutines. If a Go release changed runtime.Stack's
// header, goid would return 0 and the Step goroutine check would be off:
// this test says so first.
func TestGoid(t *testing.T) {
	id := goid()
	if id == 0 {
		t.Fatal("goid() = 0: runtime.Stack's header changed; the Step goroutine check (guard) is disabled")
	}
	if again := goid(); again != id {
		t.Errorf("goid() changed within a goroutine: %d then %d", id, again)
	}
	var wg sync.WaitGroup
	var other uint64
	wg.Go(func() { other = goid() })
	wg.Wait()
	if other == 0 || other == id {
		t.Errorf("goid() in another goroutine = %d, this one's = %d", other, id)
	}
}

func BenchmarkGoid(b *testing.B) {
	for range b.N {
		goid()
	}
}

// Replays take the run without reading the goroutine id; goroutines that
// race to replay the same journaled step still never touch the run at the
// same time (-race), at most one of them gets the journaled value, every
// other is refused, and the run fails with the rule.
func TestGuardReplayFromGoroutines(t *testing.T) {
	r := &run{ctx: t.Context(), mode: modeInline, journal: []Entry{
		{Name: "a", Kind: KindDo, Value: json.RawMessage(`1`)},
		{Name: "b", Kind: KindDo, Value: json.RawMessage(`2`)},
	}}
	var got, refused atomic.Int32
	out := execute(r, func(ctx context.Context, st *Step) (*mcp.CallToolResult, error) {
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				v, err := Do(st, "a", func(context.Context) (int, error) {
					t.Error("the closure of a journaled step ran")
					return 0, nil
				})
				switch {
				case errors.Is(err, ErrWrongGoroutine):
					refused.Add(1)
				case err == nil && v == 1:
					got.Add(1)
				default:
					t.Errorf("Do from a goroutine = %d, %v", v, err)
				}
			})
		}
		wg.Wait()
		_, err := Do(st, "b", func(context.Context) (int, error) { return 0, nil })
		return nil, err
	})
	if got.Load() > 1 || got.Load()+refused.Load() != 8 {
		t.Errorf("%d goroutines got the journaled value, %d were refused; want at most 1, the rest refused", got.Load(), refused.Load())
	}
	if out.failure == nil || !strings.Contains(out.failure.Message, "from a goroutine other than the handler's") {
		t.Errorf("outcome %+v; want a failure stating the rule", out)
	}
}

// A goroutine the handler left behind is refused once the handler
// returned, even for a call that would replay, and it changes nothing of
// the run.
func TestGuardAfterReturn(t *testing.T) {
	r := &run{ctx: t.Context(), mode: modeInline, journal: []Entry{
		{Name: "a", Kind: KindDo, Value: json.RawMessage(`1`)},
		{Name: "b", Kind: KindDo, Value: json.RawMessage(`2`)},
	}}
	var kept *Step
	out := execute(r, func(ctx context.Context, st *Step) (*mcp.CallToolResult, error) {
		kept = st
		_, err := Do(st, "a", func(context.Context) (int, error) { return 0, nil })
		return &mcp.CallToolResult{}, err
	})
	if out.failure != nil || out.err != nil {
		t.Fatalf("outcome %+v", out)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := Do(kept, "b", func(context.Context) (int, error) { return 0, nil }); !errors.Is(err, ErrWrongGoroutine) {
			t.Errorf("Do after the handler returned: %v, want ErrWrongGoroutine", err)
		}
		kept.Status("late")
	})
	wg.Wait()
	if r.cursor != 1 || r.statusMsg != "" {
		t.Errorf("a call after the handler returned changed the run: cursor %d, status %q", r.cursor, r.statusMsg)
	}
}
