package threads

import (
	"slices"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// NewOn pins worker i to cpus[i]: each worker thread's affinity mask is
// exactly its CPU.
func TestNewOnPinsEachWorker(t *testing.T) {
	allowed := AllowedCPUs()
	if len(allowed) < 2 {
		t.Skip("needs two CPUs")
	}
	cpus := []int{allowed[1], allowed[0], allowed[1]} // reversed and repeated, as a node-major plan may be
	p := NewOn(cpus)
	defer p.Close()
	var mu sync.Mutex
	got := map[int][]int{}
	p.Run(TaskFunc(func(worker, _ int) {
		if worker == 0 {
			return // the caller's goroutine is not pinned
		}
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(0, &set); err != nil {
			t.Error(err)
			return
		}
		var mask []int
		for c := range 1024 {
			if set.IsSet(c) {
				mask = append(mask, c)
			}
		}
		mu.Lock()
		got[worker] = mask
		mu.Unlock()
	}))
	if p.Size() != 3 {
		t.Fatalf("%d workers", p.Size())
	}
	for w := 1; w < 3; w++ {
		if !slices.Equal(got[w], []int{cpus[w]}) {
			t.Errorf("worker %d runs on %v, want [%d]", w, got[w], cpus[w])
		}
	}
}
