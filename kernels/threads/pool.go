// Package threads is the fixed worker pool every parallel kernel runs on.
//
// A kernel call is one Task run by all workers at once, each on its own
// static share of the work. The pool exists so that a decode step, which makes
// a few hundred kernel calls, pays a spin-wait barrier per call instead of a
// goroutine start per call or per row.
package threads

import (
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Task is one parallel kernel call. Run is called once per worker with
// worker in [0, workers). Hot paths pass a pointer to a preallocated struct,
// which converts to Task without allocating (a closure would escape).
type Task interface {
	Run(worker, workers int)
}

// TaskFunc adapts a function to Task. It allocates when its closure captures
// variables, so it is for set-up code and tests, not per-token paths.
type TaskFunc func(worker, workers int)

// Run calls f.
func (f TaskFunc) Run(worker, workers int) { f(worker, workers) }

// spinIters bounds how long an idle worker busy-waits for the next task before
// parking: long enough to bridge the gap between two kernels of one step,
// short enough not to steal a shared core between requests.
const spinIters = 1 << 14

type worker struct {
	parked atomic.Int32 // 1 while blocked on wake
	wake   chan struct{}
	_      [40]byte // keep workers' hot fields on separate cache lines
}

// Pool is a fixed set of workers. Worker 0 is the goroutine that calls Run;
// workers 1..n-1 are goroutines locked to OS threads (and pinned to CPUs
// when asked). A Pool is not safe for concurrent Run calls.
type Pool struct {
	n       int
	cpus    []int // worker i's CPU when pinned, else nil
	workers []worker
	gen     atomic.Uint64
	pending atomic.Int32
	task    Task
	panicV  atomic.Pointer[any]
	closed  atomic.Bool
}

// New starts a pool of n workers (n < 1 means one per available CPU).
// With pin, worker i is bound to the i-th CPU this process may run on.
func New(n int, pin bool) *Pool {
	cpus := allowedCPUs()
	if n < 1 {
		n = len(cpus)
	}
	if !pin || len(cpus) == 0 {
		return start(n, nil)
	}
	pinned := make([]int, n)
	for i := range pinned {
		pinned[i] = cpus[i%len(cpus)]
	}
	return start(n, pinned)
}

// NewPinned starts one worker per entry of cpus, worker i bound to cpus[i]
// (workers 1..n-1 from the start, worker 0 when the caller asks: PinCaller).
// The caller chooses the CPUs, e.g. one per physical core.
func NewPinned(cpus []int) *Pool {
	if len(cpus) == 0 {
		return start(1, nil)
	}
	return start(len(cpus), slices.Clone(cpus))
}

func start(n int, cpus []int) *Pool {
	p := &Pool{n: n, cpus: cpus, workers: make([]worker, n)}
	for i := 1; i < n; i++ {
		p.workers[i].wake = make(chan struct{}, 1)
		cpu := -1
		if cpus != nil {
			cpu = cpus[i]
		}
		go p.loop(i, cpu)
	}
	return p
}

// CPUs are the CPUs the workers are pinned to (nil when not pinned).
func (p *Pool) CPUs() []int { return slices.Clone(p.cpus) }

// PinCaller locks the calling goroutine, the one that will call Run and so
// be worker 0, to its OS thread and binds that thread to worker 0's CPU. The
// returned function undoes both. Unpinned pools only lock the thread.
func (p *Pool) PinCaller() (unpin func()) {
	runtime.LockOSThread()
	var old unix.CPUSet
	restore := false
	if p.cpus != nil && unix.SchedGetaffinity(0, &old) == nil {
		var set unix.CPUSet
		set.Set(p.cpus[0])
		restore = unix.SchedSetaffinity(0, &set) == nil // best effort, as for the workers
	}
	return func() {
		if restore {
			_ = unix.SchedSetaffinity(0, &old)
		}
		runtime.UnlockOSThread()
	}
}

// Size is the number of workers.
func (p *Pool) Size() int { return p.n }

// Run runs t on every worker and returns when all have finished.
// A panic in any worker is re-raised here.
func (p *Pool) Run(t Task) {
	if p.n == 1 {
		t.Run(0, 1)
		return
	}
	p.task = t
	p.pending.Store(int32(p.n - 1))
	p.gen.Add(1)
	for i := 1; i < p.n; i++ {
		w := &p.workers[i]
		if w.parked.Swap(0) == 1 {
			w.wake <- struct{}{}
		}
	}
	p.runOne(t, 0)
	for spins := 0; p.pending.Load() != 0; spins++ {
		if spins > spinIters {
			runtime.Gosched()
		}
	}
	p.task = nil
	if v := p.panicV.Swap(nil); v != nil {
		panic(*v)
	}
}

func (p *Pool) runOne(t Task, i int) {
	defer func() {
		if r := recover(); r != nil {
			v := any(fmt.Sprintf("threads: worker %d: %v", i, r))
			p.panicV.CompareAndSwap(nil, &v)
		}
	}()
	t.Run(i, p.n)
}

func (p *Pool) loop(i, cpu int) {
	runtime.LockOSThread()
	if cpu >= 0 {
		var set unix.CPUSet
		set.Set(cpu)
		_ = unix.SchedSetaffinity(0, &set) // best effort: a container may forbid it
	}
	w := &p.workers[i]
	var seen uint64 // New starts workers before the first Run, whose generation is 1
	for {
		spins := 0
		for p.gen.Load() == seen {
			if p.closed.Load() {
				return
			}
			if spins++; spins < spinIters {
				continue
			}
			w.parked.Store(1)
			if p.gen.Load() != seen || p.closed.Load() {
				w.parked.Store(0)
				continue
			}
			<-w.wake
			spins = 0
		}
		seen = p.gen.Load()
		p.runOne(p.task, i)
		p.pending.Add(-1)
	}
}

// Close stops the workers. The pool must not be used afterwards.
func (p *Pool) Close() {
	if p.closed.Swap(true) {
		return
	}
	for i := 1; i < p.n; i++ {
		w := &p.workers[i]
		if w.parked.Swap(0) == 1 {
			w.wake <- struct{}{}
		}
	}
}

// Split returns worker's share [lo, hi) of n items divided as evenly as
// possible among workers, in units of align items (the last share takes the rest).
func Split(n, align, worker, workers int) (lo, hi int) {
	if align < 1 {
		align = 1
	}
	units := (n + align - 1) / align
	per, extra := units/workers, units%workers
	lo = worker*per + min(worker, extra)
	hi = lo + per
	if worker < extra {
		hi++
	}
	return min(lo*align, n), min(hi*align, n)
}

func allowedCPUs() []int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		cpus := make([]int, runtime.NumCPU())
		for i := range cpus {
			cpus[i] = i
		}
		return cpus
	}
	var cpus []int
	for i := 0; i < 1024 && len(cpus) < set.Count(); i++ {
		if set.IsSet(i) {
			cpus = append(cpus, i)
		}
	}
	return cpus
}
