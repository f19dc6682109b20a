package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
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
	withTrampolines(t, testGuardReplayFromGoroutines)
}

func testGuardReplayFromGoroutines(t *testing.T, tramps *trampolines) {
	r := journaledRun(t, tramps)
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
	withTrampolines(t, testGuardAfterReturn)
}

func testGuardAfterReturn(t *testing.T, tramps *trampolines) {
	r := journaledRun(t, tramps)
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

// journaledRun is an inline run whose journal holds the Do steps a (1)
// and b (2).
func journaledRun(t *testing.T, tramps *trampolines) *run {
	return &run{ctx: t.Context(), mode: modeInline, tramps: tramps, journal: []driver.Entry{
		{Name: "a", Kind: driver.KindDo, Value: json.RawMessage(`1`)},
		{Name: "b", Kind: driver.KindDo, Value: json.RawMessage(`2`)},
	}}
}

// withTrampolines runs test with the goroutine id check (no trampolines),
// with trampolines, and with none of them free (the run falls back to the
// goroutine id).
func withTrampolines(t *testing.T, test func(*testing.T, *trampolines)) {
	t.Run("goid", func(t *testing.T) { test(t, nil) })
	t.Run("trampoline", func(t *testing.T) { test(t, newTrampolines()) })
	t.Run("exhausted", func(t *testing.T) {
		tramps := newTrampolines()
		for range trampolineFuncs {
			tramps.take()
		}
		test(t, tramps)
	})
}

// deepen calls f at depth n below the caller.
//
//go:noinline
func deepen(n int, f func()) {
	if n == 0 {
		f()
		return
	}
	deepen(n-1, f)
}

// Inside trampoline k, a goroutine finds k on its stack, however deep the
// call, and no other trampoline; any other goroutine, including one it
// starts, finds none.
func TestOnTrampoline(t *testing.T) {
	for k, tramp := range trampolineFuncs {
		if trampolineReturns[k] == 0 {
			t.Fatalf("trampoline %d: its return address could not be read; the check falls back to goroutine ids", k)
		}
		if onTrampoline(k) {
			t.Errorf("trampoline %d found outside it", k)
		}
		var got [5]bool
		tramp(func() {
			got[0] = onTrampoline(k)
			got[1] = onTrampoline((k + 1) % len(trampolineFuncs))
			deepen(200, func() { got[2] = onTrampoline(k) })
			inner := make(chan bool)
			go func() { inner <- onTrampoline(k) }()
			got[3] = <-inner
			go deepen(100, func() { inner <- onTrampoline(k) })
			got[4] = <-inner
		})
		if got != [5]bool{true, false, true, false, false} {
			t.Errorf("trampoline %d: found (shallow, another trampoline, deep, a goroutine it started, deep in one) %v; want [true false true false false]", k, got)
		}
	}
}

// A run holds its trampoline while its handler runs, and gives it back.
func TestTrampolinesHeld(t *testing.T) {
	tramps := newTrampolines()
	r := &run{ctx: t.Context(), mode: modeInline, tramps: tramps}
	var during int
	var on bool
	execute(r, func(ctx context.Context, st *Step) (*mcp.CallToolResult, error) {
		during = len(tramps.free)
		on = !r.offGoroutine()
		return &mcp.CallToolResult{}, nil
	})
	if !on {
		t.Error("the handler is not on its own goroutine, by the guard")
	}
	if r.tramp == 0 || during != len(trampolineFuncs)-1 || len(tramps.free) != len(trampolineFuncs) {
		t.Errorf("trampoline %d; free while the handler ran %d, after %d; want one held, then none", r.tramp, during, len(tramps.free))
	}
}

func BenchmarkOnTrampoline(b *testing.B) {
	trampolineFuncs[3](func() {
		deepen(20, func() {
			for b.Loop() {
				if !onTrampoline(3) {
					b.Error("trampoline not found")
				}
			}
		})
	})
}
