package tasks

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
)

// ErrWrongGoroutine is returned (wrapped) by a Step method called from a
// goroutine other than the handler's, or from inside a Do closure. The task
// then fails: see [Step].
var ErrWrongGoroutine = errors.New("tasks: Step methods must be called from the handler's goroutine")

// misuse unwinds a handler whose run was broken by a Step method called off
// its goroutine; the run fails with msg.
type misuse struct{ msg string }

// guard enforces the rule that a run's Step methods are called from the
// handler's goroutine and outside Do closures.
//
// The engine unwinds a handler with a panic (to park it, stop it, or fail
// it), and only the handler's goroutine has the engine's recover on its
// stack: the same panic in another goroutine would take the whole process
// down. So a Step method first checks where it runs. Off the handler's
// goroutine it touches nothing of the run: it records the misuse and
// returns ErrWrongGoroutine. The run is then broken (its journal would no
// longer replay deterministically): the handler's next Step call unwinds
// it, and however the handler ends, the task fails with a message that
// states the rule.
type guard struct {
	// goroutine is the handler's goroutine id, set before the handler runs.
	goroutine uint64
	// stepping is set while a Do closure runs on the handler's goroutine
	// (inline runs); it is only read and written by that goroutine.
	stepping bool
	// broken holds the failure message once the rule was broken.
	broken atomic.Pointer[string]
}

// enter is called first by every Step method that reads or changes the
// run (method and step name it for the message). It returns an error, without
// touching the run, when called off the handler's goroutine or from a Do
// closure; it unwinds the handler when the run is already broken.
func (g *guard) enter(method, step string) error {
	var where string
	switch {
	case g.offGoroutine():
		where = "from a goroutine other than the handler's"
	case g.stepping:
		where = "from inside a Do closure"
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
		panic(misuse{*msg})
	}
	return nil
}

// offGoroutine reports whether the caller runs on another goroutine than
// the handler's (false when goroutine ids cannot be read).
func (g *guard) offGoroutine() bool {
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
