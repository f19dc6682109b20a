package tasks

import (
	"fmt"
	"reflect"
	"runtime"
	"sync/atomic"
)

// misuse unwinds a handler whose run was broken by a Step method called off
// its goroutine; the run fails with msg.
type misuse struct{ msg string }

// The states of a run's guard (guard.state).
const (
	// stateIdle: no Step method holds the run.
	stateIdle int32 = iota
	// stateHeld: a Step method reads or changes the run.
	stateHeld
	// stateStepping: a Do closure runs (on the handler's goroutine inline,
	// on a goroutine of its own durably).
	stateStepping
	// stateClosed: the handler returned or unwound; the run is the
	// engine's.
	stateClosed
)

// guard enforces the rule that a run's Step methods are called from the
// handler's goroutine and outside Do closures.
//
// The engine unwinds a handler with a panic (to park it, stop it, or fail
// it), and only the handler's goroutine has the engine's recover on its
// stack: the same panic in another goroutine would take the whole process
// down. So a Step method first checks where it runs (enter). Off the
// handler's goroutine it touches nothing of the run: it records the misuse
// and returns ErrWrongGoroutine. The run is then broken (its journal would
// no longer replay deterministically): the handler's next Step call
// unwinds it, and however the handler ends, the task fails with a message
// that states the rule.
//
// Reading the goroutine id costs microseconds (runtime.Stack formats the
// caller's whole stack), and replays are most of a long task's Step calls:
// the call of step k of a task replays k-1 journaled steps first. So a
// call that only replays the journal (the journal goes on past the cursor
// with this very step, the run is not broken and no other call holds it)
// takes the run with one compare-and-swap of state instead (tryReplay):
// it can neither unwind the handler nor change the journal, and returns
// what the handler's goroutine journaled at that point; so does a status
// set between replayed steps. Every other call (a new step, an unwinding,
// a mismatch, a status once replay caught up) reads the goroutine id, or,
// for a run that holds a trampoline (a worker's), looks for it on the
// stack, a tenth of the cost (see trampolines). A replay made off the
// handler's goroutine thus passes unnoticed (its outcome is the journaled
// one); the first call of that goroutine that does more is caught. The state word also keeps any two calls, and a Do
// closure and a call, from touching the run at the same time.
type guard struct {
	// goroutine is the handler's goroutine id, set before the handler runs
	// unless tramp is.
	goroutine uint64
	// tramp is 1 + the index of the trampoline the handler runs in (see
	// trampolines), 0 if none: its goroutine id is read.
	tramp int
	// state is one of the state constants.
	state atomic.Int32
	// broken holds the failure message once the rule was broken.
	broken atomic.Pointer[string]
}

// tryReplay takes the run for a call that may only replay the journal,
// without reading the goroutine id. It reports false, holding nothing,
// when the run is broken, held by another call, in a Do closure or closed:
// the caller then takes the checked path (enter). After true, the caller
// reads or advances the cursor, never panics, and calls leave.
func (g *guard) tryReplay() bool {
	return g.broken.Load() == nil && g.state.CompareAndSwap(stateIdle, stateHeld)
}

// enter is called first by every Step method that reads or changes the run
// beyond a replay (method and step name it for the message). It returns an
// error, holding nothing and touching nothing of the run, when called off
// the handler's goroutine or from a Do closure; it unwinds the handler when
// the run is already broken. After nil, the run is held: the caller defers
// leave.
func (g *guard) enter(method, step string) error {
	var where string
	if g.offGoroutine() {
		where = "from a goroutine other than the handler's"
	} else {
		// On the handler's goroutine: the run is idle, in one of its Do
		// closures, or held for a moment by a replay made off it.
		for where == "" && !g.state.CompareAndSwap(stateIdle, stateHeld) {
			switch g.state.Load() {
			case stateStepping:
				where = "from inside a Do closure"
			case stateClosed:
				where = "after its handler returned"
			default:
				runtime.Gosched()
			}
		}
	}
	if where != "" {
		what := method
		if step != "" {
			what = fmt.Sprintf("%s(%q)", method, step)
		}
		msg := fmt.Sprintf("%s was called %s: Step methods must be called from the handler's goroutine, "+
			"between steps (to run work concurrently, do it inside one Do closure)", what, where)
		g.broken.CompareAndSwap(nil, &msg)
		return fmt.Errorf("%w: %s was called %s", ErrWrongGoroutine, what, where)
	}
	if msg := g.broken.Load(); msg != nil {
		g.leave()
		panic(misuse{*msg})
	}
	return nil
}

// leave releases the run taken by enter or tryReplay.
func (g *guard) leave() { g.state.Store(stateIdle) }

// stepping marks a Do closure running (on) or over (off) for a holder of
// the run: calls meanwhile take the checked path and are refused.
func (g *guard) stepping(on bool) {
	if on {
		g.state.Store(stateStepping)
	} else {
		g.state.Store(stateHeld)
	}
}

// open starts the guard of a run whose handler is about to run on the
// calling goroutine.
func (g *guard) open() {
	if g.tramp == 0 {
		g.goroutine = goid()
	}
}

// close ends the run's Step calls once its handler returned or unwound: a
// call from a goroutine the handler left behind is refused. It waits for a
// replay still holding the run.
func (g *guard) close() {
	for {
		s := g.state.Load()
		if s == stateClosed || (s != stateHeld && g.state.CompareAndSwap(s, stateClosed)) {
			return
		}
		runtime.Gosched()
	}
}

// offGoroutine reports whether the caller runs on another goroutine than
// the handler's (false when goroutine ids cannot be read).
func (g *guard) offGoroutine() bool {
	if g.tramp != 0 {
		return !onTrampoline(g.tramp - 1)
	}
	id := goid()
	return id != 0 && g.goroutine != 0 && id != g.goroutine
}

// failure returns the message of a broken run, or "".
func (g *guard) failure() string {
	if msg := g.broken.Load(); msg != nil {
		return *msg
	}
	return ""
}

// goid returns the id of the calling goroutine, read from the header line
// runtime.Stack writes ("goroutine 123 [running]:"). Goroutine ids are
// never reused within a process.
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	const prefix = "goroutine "
	if len(b) < len(prefix) || string(b[:len(prefix)]) != prefix {
		return 0
	}
	var id uint64
	for _, c := range b[len(prefix):] {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}

// Trampolines identify a handler's goroutine without reading goroutine
// ids. A Server lends each worker run one of its trampolines, and the
// handler runs inside it, on the caller's goroutine (see execute): no code
// but execute calls a trampoline, so a Step method whose goroutine's stack
// holds the run's trampoline runs on the handler's goroutine, and one whose
// stack does not (any goroutine the handler started: its stack starts
// afresh) does not. Walking a stack's return addresses (runtime.Callers)
// and comparing them with the trampoline's one return address costs about
// a tenth of formatting the stack for the goroutine id (goid), and the
// handler needs no goroutine of its own. The identity holds among the runs
// of one Server (a Step of one Server's task passed to a handler of another
// Server in the same process is not told apart from that handler's own);
// a run that finds no trampoline free (more than len(trampolineFuncs)
// handlers at once) runs on a goroutine of its own and is checked by
// goroutine id.
type trampolines struct {
	// free holds the indices of the trampolines no run holds.
	free chan int
}

// newTrampolines returns a Server's trampolines: those whose return
// address could be read (trampolineReturns), all of them in practice.
func newTrampolines() *trampolines {
	t := &trampolines{free: make(chan int, len(trampolineFuncs))}
	for i, ret := range trampolineReturns {
		if ret != 0 {
			t.free <- i
		}
	}
	return t
}

// take returns a free trampoline's index, or -1 if none is free (or t is
// nil).
func (t *trampolines) take() int {
	if t == nil {
		return -1
	}
	select {
	case k := <-t.free:
		return k
	default:
		return -1
	}
}

// give returns trampoline k (taken by take) to the free ones.
func (t *trampolines) give(k int) {
	if k >= 0 {
		t.free <- k
	}
}

// trampolineFuncs are the trampolines: distinct functions, never inlined,
// each calling f.
var trampolineFuncs = [...]func(f func()){
	tramp0, tramp1, tramp2, tramp3, tramp4, tramp5, tramp6, tramp7,
	tramp8, tramp9, tramp10, tramp11, tramp12, tramp13, tramp14, tramp15,
}

//go:noinline
func tramp0(f func()) { f() }

//go:noinline
func tramp1(f func()) { f() }

//go:noinline
func tramp2(f func()) { f() }

//go:noinline
func tramp3(f func()) { f() }

//go:noinline
func tramp4(f func()) { f() }

//go:noinline
func tramp5(f func()) { f() }

//go:noinline
func tramp6(f func()) { f() }

//go:noinline
func tramp7(f func()) { f() }

//go:noinline
func tramp8(f func()) { f() }

//go:noinline
func tramp9(f func()) { f() }

//go:noinline
func tramp10(f func()) { f() }

//go:noinline
func tramp11(f func()) { f() }

//go:noinline
func tramp12(f func()) { f() }

//go:noinline
func tramp13(f func()) { f() }

//go:noinline
func tramp14(f func()) { f() }

//go:noinline
func tramp15(f func()) { f() }

// trampolineReturns are the return addresses of trampolineFuncs' calls of
// f, in order, as runtime.Callers reports them (read once by calling each:
// the program's code does not change); 0 if one could not be read.
var trampolineReturns = func() (r [len(trampolineFuncs)]uintptr) {
	for i, tramp := range trampolineFuncs {
		var pcs [1]uintptr
		var n int
		// Callers' frames here: Callers, this closure, the trampoline.
		tramp(func() { n = runtime.Callers(2, pcs[:]) })
		if n == 1 && runtime.FuncForPC(pcs[0]-1).Entry() == runtime.FuncForPC(reflect.ValueOf(tramp).Pointer()).Entry() {
			r[i] = pcs[0]
		}
	}
	return r
}()

// onTrampoline reports whether the calling goroutine's stack holds a frame
// of trampoline k.
func onTrampoline(k int) bool {
	want := trampolineReturns[k]
	var buf [64]uintptr
	pcs := buf[:]
	n := runtime.Callers(2, pcs)
	for n == len(pcs) { // deeper than pcs: walk again, further
		pcs = make([]uintptr, 2*len(pcs))
		n = runtime.Callers(2, pcs)
	}
	for _, pc := range pcs[:n] {
		if pc == want {
			return true
		}
	}
	return false
}
