// Package ceiling measures this machine's own peaks, in-process: the
// throughput of the instructions the GEMM kernels are built on (f32 FMA,
// VDPBF16PS, VPDPBUSD) in register-only loops, and DRAM read bandwidth over
// a buffer much larger than the last-level cache, each on one thread and on
// every thread of a pool. Benchmarks report kernels as a fraction of these
// numbers measured in the same run, which stays meaningful on a shared or
// throttled machine where absolute numbers do not.
package ceiling

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ellm-dev/ellm/kernels/threads"
)

// Peak is one ceiling on a single thread and on all of the pool's threads.
type Peak struct{ Single, All float64 }

// Ceilings are the measured peaks; a zero Peak means the CPU lacks the
// instruction (or this build has no assembly).
type Ceilings struct {
	Threads      int
	FMAGFLOPS    Peak // 512-bit VFMADD231PS, 2 flops per lane
	FMA256GFLOPS Peak // 256-bit VFMADD231PS (the AVX2 path's ceiling)
	BF16GFLOPS   Peak // VDPBF16PS, 4 flops per lane (two bf16 products and sums)
	VNNIGOPS     Peak // VPDPBUSD, 8 ops per lane (four u8×s8 products and sums)
	DRAMGBps     Peak // sequential 512-bit loads over Options.DRAMBytes
}

// Options tune the measurement; zero values take the defaults.
type Options struct {
	Interval  time.Duration // length of one timed run (default 20ms)
	Reps      int           // runs per number, the fastest is kept (default 5)
	DRAMBytes int           // read buffer, ≫ last-level cache (default 1 GiB)
}

func (o *Options) defaults() {
	if o.Interval <= 0 {
		o.Interval = 20 * time.Millisecond
	}
	if o.Reps <= 0 {
		o.Reps = 5
	}
	if o.DRAMBytes <= 0 {
		o.DRAMBytes = 1 << 30
	}
}

// loop is a register-only instruction loop: run(n) executes n iterations of
// opsPerIter operations.
type loop struct {
	run        func(n int)
	opsPerIter float64
}

// Measure runs every measurement on pool (the bandwidth buffer is mapped
// and touched first, which takes a fraction of a second per GiB).
func Measure(pool *threads.Pool, o Options) (Ceilings, error) {
	o.defaults()
	c := Ceilings{Threads: pool.Size()}
	l := loops()
	c.FMAGFLOPS = computePeak(pool, o, l.fma512)
	c.FMA256GFLOPS = computePeak(pool, o, l.fma256)
	c.BF16GFLOPS = computePeak(pool, o, l.bf16)
	c.VNNIGOPS = computePeak(pool, o, l.vnni)
	var err error
	c.DRAMGBps, err = dramPeak(pool, o)
	return c, err
}

type loopSet struct{ fma512, fma256, bf16, vnni *loop }

// computeTask runs a loop on the first `active` workers.
type computeTask struct {
	l      *loop
	n      int
	active int
}

func (t *computeTask) Run(w, _ int) {
	if w < t.active {
		t.l.run(t.n)
	}
}

func computePeak(pool *threads.Pool, o Options, l *loop) Peak {
	if l == nil {
		return Peak{}
	}
	// Calibrate the iteration count to the interval on one thread.
	n := 1 << 12
	for {
		start := time.Now()
		l.run(n)
		if d := time.Since(start); d > o.Interval/4 || n > 1<<30 {
			n = int(float64(n) * float64(o.Interval) / float64(max(d, time.Microsecond)))
			break
		}
		n *= 4
	}
	rate := func(active int) float64 {
		t := &computeTask{l: l, n: n, active: active}
		best := 0.0
		for range o.Reps {
			start := time.Now()
			pool.Run(t)
			best = max(best, float64(n)*l.opsPerIter*float64(active)/time.Since(start).Seconds()/1e9)
		}
		return best
	}
	return Peak{Single: rate(1), All: rate(pool.Size())}
}

type readTask struct {
	buf    []byte
	active int
	sink   [maxReaders]uint64
}

const maxReaders = 64

func (t *readTask) Run(w, _ int) {
	if w >= t.active {
		return
	}
	lo, hi := threads.Split(len(t.buf), 1<<16, w, t.active)
	t.sink[w] = readSum(t.buf[lo:hi])
}

func dramPeak(pool *threads.Pool, o Options) (Peak, error) {
	size := o.DRAMBytes &^ (1<<16 - 1)
	buf, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return Peak{}, fmt.Errorf("ceiling: map %d MiB read buffer: %w", size>>20, err)
	}
	defer unix.Munmap(buf)
	_ = unix.Madvise(buf, unix.MADV_HUGEPAGE) // fewer TLB misses where transparent huge pages are on
	// Untouched anonymous pages all map the zero page, which would be read from cache.
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = byte(i >> 12)
	}
	rate := func(active int) float64 {
		t := &readTask{buf: buf, active: min(active, maxReaders)}
		best := 0.0
		for range o.Reps {
			start := time.Now()
			pool.Run(t)
			best = max(best, float64(len(buf))/time.Since(start).Seconds()/1e9)
		}
		return best
	}
	return Peak{Single: rate(1), All: rate(pool.Size())}, nil
}
