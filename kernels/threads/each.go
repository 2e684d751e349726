package threads

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Each runs f(i) for every i in [0, n) on up to GOMAXPROCS goroutines, each
// taking the next i when it is done with one: load-time work (packing
// weights, committing memory) whose items differ in size and which runs
// before, or beside, any pool.
func Each(n int, f func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				f(int(i))
			}
		})
	}
	wg.Wait()
}
