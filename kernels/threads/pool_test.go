package threads

import (
	"sync/atomic"
	"testing"
)

type countTask struct {
	hits [8]atomic.Int32
	sum  atomic.Int64
	n    int
}

func (t *countTask) Run(w, ws int) {
	t.hits[w].Add(1)
	lo, hi := Split(t.n, 1, w, ws)
	var s int64
	for i := lo; i < hi; i++ {
		s += int64(i)
	}
	t.sum.Add(s)
}

func TestPoolRunsEveryWorkerOncePerCall(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4} {
		p := New(n, true)
		task := &countTask{n: 1000}
		for range 1000 {
			p.Run(task)
		}
		for w := range n {
			if got := task.hits[w].Load(); got != 1000 {
				t.Errorf("pool of %d: worker %d ran %d times, want 1000", n, w, got)
			}
		}
		if got, want := task.sum.Load(), int64(1000*999/2*1000); got != want {
			t.Errorf("pool of %d: sum %d, want %d", n, got, want)
		}
		p.Close()
	}
}

func TestPoolRunDoesNotAllocate(t *testing.T) {
	p := New(2, false)
	defer p.Close()
	task := &countTask{n: 10}
	if a := testing.AllocsPerRun(100, func() { p.Run(task) }); a != 0 {
		t.Errorf("Run allocates %.1f times per call", a)
	}
}

func TestPoolReraisesWorkerPanic(t *testing.T) {
	p := New(2, false)
	defer p.Close()
	defer func() {
		if recover() == nil {
			t.Error("panic in worker 1 was not re-raised")
		}
	}()
	p.Run(TaskFunc(func(w, _ int) {
		if w == 1 {
			panic("boom")
		}
	}))
}

func TestSplitCoversRangeInAlignedUnits(t *testing.T) {
	for _, tc := range []struct{ n, align, workers int }{{10, 1, 3}, {100, 16, 3}, {7, 16, 2}, {0, 4, 2}, {1000, 64, 7}} {
		next := 0
		for w := range tc.workers {
			lo, hi := Split(tc.n, tc.align, w, tc.workers)
			if lo != next || hi < lo {
				t.Fatalf("%+v worker %d: [%d,%d) after %d", tc, w, lo, hi, next)
			}
			if lo%tc.align != 0 && lo != tc.n {
				t.Errorf("%+v worker %d: start %d not aligned", tc, w, lo)
			}
			next = hi
		}
		if next != tc.n {
			t.Errorf("%+v: covered %d", tc, next)
		}
	}
}

func BenchmarkPoolBarrier(b *testing.B) {
	p := New(2, true)
	defer p.Close()
	task := &countTask{n: 2}
	b.ReportAllocs()
	for b.Loop() {
		p.Run(task)
	}
}
