package threads

import (
	"runtime"
	"sync/atomic"
	"testing"
)

// TestEach: every index runs once, on one thread and on several, and none
// when there are none.
func TestEach(t *testing.T) {
	for _, procs := range []int{1, 3} {
		prev := runtime.GOMAXPROCS(procs)
		for _, n := range []int{0, 1, 2, 7, 100} {
			runs := make([]atomic.Int32, n)
			Each(n, func(i int) { runs[i].Add(1) })
			for i := range runs {
				if got := runs[i].Load(); got != 1 {
					t.Errorf("GOMAXPROCS %d, n %d: index %d ran %d times", procs, n, i, got)
				}
			}
		}
		runtime.GOMAXPROCS(prev)
	}
}
