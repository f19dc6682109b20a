package tasks

import (
	"sync"
	"testing"
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
