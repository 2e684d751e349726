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
	"time"
	"unsafe"

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

// spinWait bounds how long a waiting thread busy-waits before it blocks:
// an idle worker for the next task, Run's caller for the last worker to
// finish. Within a decode step the gaps between kernels and the imbalance at
// their ends are a few µs to a few dozen (a partner preempted for a short
// slice, a kv head of imbalance), below it, so a step runs with few sleeps
// and wakes; each costs a futex round trip, the Go scheduler's hand-off of
// the blocked thread's P, and in a virtual machine an inter-processor
// interrupt, and a decode step at 20 µs took ~30 of them. A thread whose
// partner the OS has descheduled for a whole time slice (milliseconds)
// still stops burning the core after it, instead of spinning or calling
// runtime.Gosched, which cannot give the core back to the OS and costs a
// scheduler round trip with locks each time. Measured in
// docs/performance.md (20 µs then 100 µs).
var spinWait = 100 * time.Microsecond

// spinCheck is how many spins pass between two looks at the clock.
const spinCheck = 256

type worker struct {
	parked atomic.Uint32 // 1 while blocked (a futex word)
	_      [60]byte      // keep workers' hot fields on separate cache lines
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
	waiting atomic.Uint32 // 1 while Run's caller is blocked (a futex word): the last worker to finish wakes it
	runs    uint64

	// Accounting (SetAccounting): wall time inside Run, and the workers'
	// time inside tasks, summed over workers.
	account    bool
	wall, busy atomic.Int64 // nanoseconds
	sleeps     atomic.Int64 // futex waits, counted always (a sleep costs a system call anyway)
}

// Sleeps is how many times a thread of the pool (a worker waiting for work,
// or Run's caller waiting for the last worker) has blocked after its spin:
// each costs a wake-up on somebody's critical path.
func (p *Pool) Sleeps() int64 { return p.sleeps.Load() }

// SetAccounting turns on or off the measurement Usage reports. It costs two
// clock reads per worker per Run, so it is off unless a profile asks for it;
// it must not be called during a Run.
func (p *Pool) SetAccounting(on bool) { p.account = on }

// Usage is the wall time spent in Run and the workers' time spent in tasks
// (summed over workers) since accounting was turned on: over a stretch of
// code, Size()·wall − busy is the time workers were idle inside its Runs,
// waiting for the slowest worker (and spinning or parked meanwhile).
func (p *Pool) Usage() (wall, busy time.Duration) {
	return time.Duration(p.wall.Load()), time.Duration(p.busy.Load())
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

// Runs is the number of Run calls so far: on a pool of more than one worker
// each is a barrier, the unit a decode step's overhead is counted in.
func (p *Pool) Runs() uint64 { return p.runs }

// Run runs t on every worker and returns when all have finished.
// A panic in any worker is re-raised here.
func (p *Pool) Run(t Task) {
	p.runs++
	if !p.account {
		p.run(t)
		return
	}
	start := time.Now()
	p.run(t)
	p.wall.Add(int64(time.Since(start)))
}

func (p *Pool) run(t Task) {
	if p.n == 1 {
		p.runTask(t, 0)
		return
	}
	p.task = t
	p.pending.Store(int32(p.n - 1))
	p.gen.Add(1)
	p.wakeAll()
	p.runOne(t, 0)
	if p.pending.Load() != 0 {
		p.await()
	}
	p.task = nil
	if v := p.panicV.Swap(nil); v != nil {
		panic(*v)
	}
}

// await returns when every worker has finished the current task: it spins
// for spinWait, then blocks until the last worker wakes it.
func (p *Pool) await() {
	var s spin
	for p.pending.Load() != 0 {
		if !s.over() {
			continue
		}
		// Set waiting before each look at pending: a worker that clears it
		// (late, for an earlier Run) cannot leave this loop without a sleep.
		for {
			p.waiting.Swap(1) // not Store: see the workers' park (loop)
			if p.pending.Load() == 0 {
				break
			}
			p.sleeps.Add(1)
			futexWait(&p.waiting, 1) // returns at once if the last worker has cleared it
		}
		p.waiting.Store(0)
		return
	}
}

// spin bounds a busy-wait: over, called once per iteration, reports
// whether spinWait has passed since the first call (reading the clock only
// every spinCheck iterations).
type spin struct {
	n        int
	deadline time.Time
}

func (s *spin) over() bool {
	if s.n++; s.n%spinCheck != 0 {
		return false
	}
	now := time.Now()
	if s.deadline.IsZero() {
		s.deadline = now.Add(spinWait)
		return false
	}
	return !now.Before(s.deadline)
}

// finished is a worker's end of a task; the last one wakes a blocked Run.
// A wake-up that arrives late, in a later Run, is spurious there: await
// checks pending again.
func (p *Pool) finished() {
	if p.pending.Add(-1) == 0 && p.waiting.Load() == 1 && p.waiting.Swap(0) == 1 {
		futexWake(&p.waiting)
	}
}

// wakeAll wakes the parked workers (after a new generation or Close).
func (p *Pool) wakeAll() {
	for i := 1; i < p.n; i++ {
		if w := &p.workers[i]; w.parked.Swap(0) == 1 {
			futexWake(&w.parked)
		}
	}
}

// futexWait blocks the thread while *addr == val (or until a spurious
// wake-up). The pool blocks on futexes rather than channels: Go's blocking
// primitives may allocate (sudogs) on a hot path that must not, and a
// parked worker, locked to its thread, is woken by one system call.
func futexWait(addr *atomic.Uint32, val uint32) {
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWaitPrivate, uintptr(val), 0, 0, 0)
}

// futexWake wakes a thread blocked on addr.
func futexWake(addr *atomic.Uint32) {
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWakePrivate, 1, 0, 0, 0)
}

const (
	futexWaitPrivate = 0 | 128 // FUTEX_WAIT | FUTEX_PRIVATE_FLAG
	futexWakePrivate = 1 | 128 // FUTEX_WAKE | FUTEX_PRIVATE_FLAG
)

func (p *Pool) runOne(t Task, i int) {
	defer func() {
		if r := recover(); r != nil {
			v := any(fmt.Sprintf("threads: worker %d: %v", i, r))
			p.panicV.CompareAndSwap(nil, &v)
		}
	}()
	p.runTask(t, i)
}

// runTask is t.Run for worker i, timed when accounting is on.
func (p *Pool) runTask(t Task, i int) {
	if !p.account {
		t.Run(i, p.n)
		return
	}
	start := time.Now()
	t.Run(i, p.n)
	p.busy.Add(int64(time.Since(start)))
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
		var s spin
		for p.gen.Load() == seen {
			if p.closed.Load() {
				return
			}
			if !s.over() {
				continue
			}
			// Announce the park, then look once more at gen, while Run
			// changes gen and then takes the announcement back: the two
			// must not both miss the other. Go's atomics are sequentially
			// consistent, so a Store would do, but qemu-user on an x86 host
			// translates arm64's store-release then load-acquire without a
			// barrier between them, and the store can land after the load
			// (make test-arm64 hung on it once, this worker and Run's caller
			// each blocked; two threads each storing one flag and loading
			// the other both read 0 in 12 % of 2 million rounds there, never
			// with Swap). A Swap is a full barrier there, and the same XCHG
			// as a Store on amd64.
			w.parked.Swap(1)
			if p.gen.Load() == seen && !p.closed.Load() {
				p.sleeps.Add(1)
				futexWait(&w.parked, 1) // returns at once if Run or Close has cleared it
			}
			w.parked.Store(0)
			s = spin{}
		}
		seen = p.gen.Load()
		p.runOne(p.task, i)
		p.finished()
	}
}

// Close stops the workers. The pool must not be used afterwards.
func (p *Pool) Close() {
	if p.closed.Swap(true) {
		return
	}
	p.wakeAll()
}

// Claims hands out the items [0, n) of a pool task in chunks, in order, to
// whichever worker asks first. Where Split fixes every worker's share before
// the task starts, claiming lets a worker that starts late (woken from its
// park) or runs slower take fewer, so the others do not wait for it at the
// end. Reset it before each Run.
type Claims struct{ next atomic.Int64 }

// Reset starts the claims again from item 0.
func (c *Claims) Reset() { c.next.Store(0) }

// Next returns the next chunk [lo, hi) of at most chunk items of n, or ok
// false when all are taken.
func (c *Claims) Next(n, chunk int) (lo, hi int, ok bool) {
	lo = int(c.next.Add(int64(chunk))) - chunk
	if lo >= n {
		return 0, 0, false
	}
	return lo, min(lo+chunk, n), true
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
