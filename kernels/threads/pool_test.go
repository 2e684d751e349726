package threads

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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

// claimTask records, per item, how many times a worker claimed it.
type claimTask struct {
	claims   Claims
	n, chunk int
	seen     []atomic.Int32
	sizes    atomic.Int64 // chunks shorter than chunk
}

func (t *claimTask) Run(_, _ int) {
	for {
		lo, hi, ok := t.claims.Next(t.n, t.chunk)
		if !ok {
			return
		}
		if hi-lo < t.chunk {
			t.sizes.Add(1)
		}
		for i := lo; i < hi; i++ {
			t.seen[i].Add(1)
		}
	}
}

// Claims, from every worker of a pool at once, hand out each item exactly
// once, in chunks of the size asked for but the last, and start again after
// Reset.
func TestClaimsCoverEachItemOnce(t *testing.T) {
	for _, workers := range []int{1, 2, 3} {
		p := New(workers, false)
		for _, tc := range []struct{ n, chunk int }{{0, 4}, {1, 4}, {100, 1}, {100, 16}, {1000, 7}} {
			task := &claimTask{n: tc.n, chunk: tc.chunk, seen: make([]atomic.Int32, tc.n)}
			for round := range 2 {
				task.claims.Reset()
				p.Run(task)
				for i := range task.seen {
					if got := task.seen[i].Swap(0); got != 1 {
						t.Fatalf("%d workers, %+v, round %d: item %d claimed %d times", workers, tc, round, i, got)
					}
				}
				if short, want := task.sizes.Swap(0), int64(min(1, tc.n%tc.chunk)); short != want {
					t.Errorf("%d workers, %+v: %d short chunks, want %d", workers, tc, short, want)
				}
			}
		}
		p.Close()
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

// cpuTime is the process's user+sys CPU time so far.
func cpuTime(t *testing.T) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// A worker that takes far longer than spinWait (descheduled by the OS, or
// just slow) must not keep Run's caller burning a core: it blocks, and is
// woken when the worker finishes.
func TestRunBlocksWhileAWorkerIsSlow(t *testing.T) {
	p := New(2, false)
	defer p.Close()
	const sleep = 20 * time.Millisecond
	var ran atomic.Int32
	slow := TaskFunc(func(w, _ int) {
		if w == 1 {
			time.Sleep(sleep)
			ran.Add(1)
		}
	})
	before := cpuTime(t)
	for range 5 {
		p.Run(slow)
	}
	if got := ran.Load(); got != 5 {
		t.Fatalf("worker 1 finished %d of 5 tasks before Run returned", got)
	}
	if cpu := cpuTime(t) - before; cpu > 5*sleep/2 {
		t.Errorf("5 Runs waiting %v each for a sleeping worker used %v of CPU: the caller spins", sleep, cpu)
	}
}

// Idle workers park after spinWait instead of spinning until the next Run.
func TestIdleWorkersPark(t *testing.T) {
	p := New(2, false)
	defer p.Close()
	task := &countTask{n: 10}
	p.Run(task)
	time.Sleep(10 * time.Millisecond) // past spinWait: worker 1 parks
	before := cpuTime(t)
	time.Sleep(100 * time.Millisecond)
	if cpu := cpuTime(t) - before; cpu > 30*time.Millisecond {
		t.Errorf("an idle pool used %v of CPU in 100ms", cpu)
	}
	p.Run(task) // and a parked worker still takes the next task
	if got := task.hits[1].Load(); got != 2 {
		t.Errorf("worker 1 ran %d tasks, want 2", got)
	}
}

func TestRunsCountsCalls(t *testing.T) {
	for _, n := range []int{1, 2} {
		p := New(n, false)
		task := &countTask{n: 10}
		for range 7 {
			p.Run(task)
		}
		if got := p.Runs(); got != 7 {
			t.Errorf("pool of %d: Runs() = %d after 7 calls", n, got)
		}
		p.Close()
	}
}

// maskTask records the affinity mask each worker runs with.
type maskTask struct{ masks [8][]int }

func (t *maskTask) Run(w, _ int) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		panic(err)
	}
	t.masks[w] = nil
	for c := range 1024 {
		if set.IsSet(c) {
			t.masks[w] = append(t.masks[w], c)
		}
	}
}

// NewPinned binds worker i to the caller's cpus[i], in the caller's order
// (here the allowed CPUs reversed), and PinCaller binds worker 0 until unpinned.
func TestNewPinned(t *testing.T) {
	allowed := allowedCPUs()
	cpus := slices.Clone(allowed)
	slices.Reverse(cpus)
	cpus = cpus[:min(len(cpus), 8)]
	p := NewPinned(cpus)
	defer p.Close()
	if p.Size() != len(cpus) || !slices.Equal(p.CPUs(), cpus) {
		t.Fatalf("size %d CPUs %v, want %v", p.Size(), p.CPUs(), cpus)
	}
	task := &maskTask{}
	func() {
		defer p.PinCaller()()
		p.Run(task)
	}()
	for w := range cpus {
		if !slices.Equal(task.masks[w], cpus[w:w+1]) {
			t.Errorf("worker %d runs on %v, want [%d]", w, task.masks[w], cpus[w])
		}
	}
	// Unpinned, the caller is back on every allowed CPU.
	p.Run(task)
	if !slices.Equal(task.masks[0], allowed) {
		t.Errorf("after unpin worker 0 runs on %v, want %v", task.masks[0], allowed)
	}
	if u := New(2, false); u.CPUs() != nil {
		t.Errorf("unpinned pool reports CPUs %v", u.CPUs())
	} else {
		u.Close()
	}
}

// Usage sees a worker waiting for a slow one: wall covers the Run, busy
// only the time inside the task, so Size()·wall − busy is the wait.
func TestUsage(t *testing.T) {
	p := New(2, false)
	defer p.Close()
	p.Run(TaskFunc(func(int, int) {})) // accounting off: not counted
	if wall, busy := p.Usage(); wall != 0 || busy != 0 {
		t.Fatalf("Usage with accounting off: %v, %v", wall, busy)
	}
	p.SetAccounting(true)
	const slow = 30 * time.Millisecond
	p.Run(TaskFunc(func(worker, _ int) {
		if worker == 1 {
			time.Sleep(slow)
		}
	}))
	p.SetAccounting(false)
	wall, busy := p.Usage()
	if wall < slow || busy < slow || busy > wall+time.Millisecond {
		t.Errorf("wall %v, busy %v: want both ≥ %v, busy about one worker's wall", wall, busy, slow)
	}
	if idle := 2*wall - busy; idle < slow {
		t.Errorf("idle %v, want ≥ %v (worker 0 waited for worker 1)", idle, slow)
	}
}

// A worker that waits longer than the spin blocks, and Sleeps counts it.
func TestSleepsCounted(t *testing.T) {
	p := New(2, false)
	defer p.Close()
	before := p.Sleeps()
	p.Run(TaskFunc(func(worker, _ int) {
		if worker == 0 {
			time.Sleep(10 * spinWait) // worker 1 finishes at once and waits for the next task
		}
	}))
	time.Sleep(10 * spinWait)
	if p.Sleeps() == before {
		t.Error("no sleep counted after the workers waited 10× spinWait")
	}
}
