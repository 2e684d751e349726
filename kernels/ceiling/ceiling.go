// Package ceiling measures this machine's own peaks, in-process: the
// throughput of the instructions the GEMM kernels are built on (f32 FMA,
// VDPBF16PS, VPDPBUSD) in register-only loops, and DRAM read bandwidth over
// a buffer much larger than the last-level cache, each on one thread and on
// every thread of a pool. Benchmarks report kernels as a fraction of these
// numbers measured in the same run, which stays meaningful on a shared or
// throttled machine where absolute numbers do not.
//
// Rates are work per CPU second of the threads doing it (CPUTime), the
// slowest thread setting the pace, not per wall-clock second: on a machine
// shared with other processes wall time also counts their time slices.
// Options.WallClock switches to wall-clock seconds for callers that time
// kernels that way.
package ceiling

import (
	"fmt"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ellm-dev/ellm/kernels"
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
	// Int8x256GOPS is the AVX2 path's int8 ceiling, 8 ops per dword lane of
	// 256 bits: VPDPBUSD ymm where the CPU has AVX-VNNI, else the
	// VPMADDUBSW, VPMADDWD, VPADDD chain its int8 kernels are built on.
	Int8x256GOPS Peak
	AMXBF16      Peak // TDPBF16PS, GFLOP/s: 16·16·32 bf16 products and sums a tile
	AMXInt8      Peak // TDPBUSD, GOP/s: 16·16·64 u8×s8 products and sums a tile
	DRAMGBps     Peak // sequential loads (512-bit, else 256) over Options.DRAMBytes
}

// Options tune the measurement; zero values take the defaults.
type Options struct {
	Interval  time.Duration // length of one timed run (default 20ms)
	Reps      int           // runs per number, the fastest is kept (default 5)
	DRAMBytes int           // read buffer, ≫ last-level cache (default 1 GiB)
	NoDRAM    bool          // skip the bandwidth measurement
	// WallClock rates per wall-clock second instead of per CPU second, for
	// callers that time their kernels by the wall clock: compare like with like.
	WallClock bool
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

// Measure maps a bandwidth buffer, measures every ceiling on pool once and
// unmaps the buffer.
func Measure(pool *threads.Pool, o Options) (Ceilings, error) {
	m, err := NewMeter(pool, o)
	if err != nil {
		return Ceilings{}, err
	}
	defer m.Close()
	return m.Measure(), nil
}

// Meter keeps the bandwidth buffer mapped between measurements, so that a
// benchmark can measure the ceilings alternately with the kernels it reports.
type Meter struct {
	pool  *threads.Pool
	o     Options
	loops loopSet
	buf   []byte // nil with NoDRAM
}

// NewMeter maps and touches the bandwidth buffer (a fraction of a second per GiB).
func NewMeter(pool *threads.Pool, o Options) (*Meter, error) {
	o.defaults()
	m := &Meter{pool: pool, o: o, loops: loops()}
	if o.NoDRAM {
		return m, nil
	}
	size := o.DRAMBytes &^ (1<<16 - 1)
	buf, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("ceiling: map %d MiB read buffer: %w", size>>20, err)
	}
	_ = unix.Madvise(buf, unix.MADV_HUGEPAGE) // fewer TLB misses where transparent huge pages are on
	// Untouched anonymous pages all map the zero page, which would be read from cache.
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = byte(i >> 12)
	}
	m.buf = buf
	return m, nil
}

// Close unmaps the buffer.
func (m *Meter) Close() {
	if m.buf != nil {
		_ = unix.Munmap(m.buf)
		m.buf = nil
	}
}

// Measure runs every measurement once.
func (m *Meter) Measure() Ceilings {
	c := m.Compute()
	c.DRAMGBps = m.DRAM()
	return c
}

// Compute measures the instruction ceilings only (DRAMGBps stays zero).
func (m *Meter) Compute() Ceilings {
	return Ceilings{
		Threads:      m.pool.Size(),
		FMAGFLOPS:    computePeak(m.pool, m.o, m.loops.fma512),
		FMA256GFLOPS: computePeak(m.pool, m.o, m.loops.fma256),
		BF16GFLOPS:   computePeak(m.pool, m.o, m.loops.bf16),
		VNNIGOPS:     computePeak(m.pool, m.o, m.loops.vnni),
		Int8x256GOPS: computePeak(m.pool, m.o, m.loops.int8x256),
		AMXBF16:      computePeak(m.pool, m.o, m.loops.amxBF16),
		AMXInt8:      computePeak(m.pool, m.o, m.loops.amxInt8),
	}
}

// DRAM measures the read bandwidth only (zero with NoDRAM).
func (m *Meter) DRAM() Peak {
	if m.buf == nil {
		return Peak{}
	}
	return dramPeak(m.pool, m.o, m.buf)
}

// Kind names one ceiling, for Burst.
type Kind int

const (
	FMA      Kind = iota // FMAGFLOPS
	FMA256               // FMA256GFLOPS
	BF16                 // BF16GFLOPS
	VNNI                 // VNNIGOPS
	DRAM                 // DRAMGBps
	AMXBF16              // AMXBF16
	AMXInt8              // AMXInt8
	Int8x256             // Int8x256GOPS
)

// FMAKind is the ceiling of f32 FMAs on kernel path p: the ymm rate on the
// avx2 path (whose kernels are 256 bits wide on any CPU), else the zmm one.
func FMAKind(p kernels.Path) Kind {
	if p == kernels.AVX2 {
		return FMA256
	}
	return FMA
}

// Weights is the form of a product's weights, for ProductKind.
type Weights int

const (
	BF16Weights Weights = iota
	Int8Weights
	F32Weights
)

// ProductKind is the ceiling a product of weights w is held to on kernel
// path p: int8 on the tiles' TDPBUSD (AMX), else on zmm VPDPBUSD, but on the
// ymm kernels' rate (Int8x256) on the avx2 path and, where the CPU lacks
// AVX512_VNNI (zmmVNNI false), on the avx512 path too; bf16 on TDPBF16PS
// (AMX) or VDPBF16PS (avx512bf16); anything else, f32 weights on every
// path included, on f32 FMAs of the path's width.
func ProductKind(p kernels.Path, w Weights, zmmVNNI bool) Kind {
	switch {
	case w == Int8Weights && p == kernels.AMX:
		return AMXInt8
	case w == Int8Weights && (p == kernels.AVX2 || !zmmVNNI):
		return Int8x256
	case w == Int8Weights:
		return VNNI
	case w == BF16Weights && p == kernels.AMX:
		return AMXBF16
	case w == BF16Weights && p == kernels.AVX512BF16:
		return BF16
	}
	return FMAKind(p)
}

// Peak is the measured peak of compute ceiling k (zero for DRAM, which
// Meter.DRAM measures).
func (c *Ceilings) Peak(k Kind) Peak {
	switch k {
	case FMA:
		return c.FMAGFLOPS
	case FMA256:
		return c.FMA256GFLOPS
	case BF16:
		return c.BF16GFLOPS
	case VNNI:
		return c.VNNIGOPS
	case Int8x256:
		return c.Int8x256GOPS
	case AMXBF16:
		return c.AMXBF16
	case AMXInt8:
		return c.AMXInt8
	}
	return Peak{}
}

// Unit is what k counts: FLOP, OP (integer products and sums) or B (bytes read).
func (k Kind) Unit() string {
	switch k {
	case VNNI, AMXInt8, Int8x256:
		return "OP"
	case DRAM:
		return "B"
	}
	return "FLOP"
}

func (k Kind) String() string {
	return [...]string{"FMA", "FMA256", "VDPBF16PS", "VPDPBUSD", "DRAM read", "TDPBF16PS", "TDPBUSD", "int8 ymm"}[k]
}

// Burst measures one ceiling on all of the pool's threads only (G ops/s, or
// GB/s for DRAM; 0 where the CPU lacks the instruction or the meter has no
// buffer): short enough to repeat next to every measurement of a benchmark
// on a machine whose speed drifts, where one ceiling taken at the start does
// not describe the rest of the run. Its length is about o.Reps × o.Interval
// for an instruction (plus a calibration of a quarter interval), o.Reps
// reads of the buffer for DRAM.
func (m *Meter) Burst(k Kind) float64 {
	if k == DRAM {
		if m.buf == nil {
			return 0
		}
		return dramRate(m.pool, m.o, m.buf, m.pool.Size())
	}
	l := [...]*loop{FMA: m.loops.fma512, FMA256: m.loops.fma256, BF16: m.loops.bf16, VNNI: m.loops.vnni,
		AMXBF16: m.loops.amxBF16, AMXInt8: m.loops.amxInt8, Int8x256: m.loops.int8x256}[k]
	if l == nil {
		return 0
	}
	return computeRate(m.pool, m.o, l, calibrate(m.o, l), m.pool.Size())
}

type loopSet struct{ fma512, fma256, bf16, vnni, int8x256, amxBF16, amxInt8 *loop }

// computeTask runs a loop on the first `active` workers, each timing itself.
type computeTask struct {
	wall   bool
	l      *loop
	n      int
	active int
	took   [maxThreads]time.Duration
}

// maxThreads bounds the workers a measurement uses.
const maxThreads = 64

func (t *computeTask) Run(w, _ int) {
	if w < t.active {
		t.took[w] = timed(t.wall, func() { t.l.run(t.n) })
	}
}

// timed runs f and returns the CPU time the thread spent in it, or with wall
// the wall-clock time. On a shared machine wall time also counts the other
// processes the thread waited for; CPU time is what the thread's own work took.
func timed(wall bool, f func()) time.Duration {
	if wall {
		start := time.Now()
		f()
		return time.Since(start)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := ThreadCPU()
	f()
	return ThreadCPU() - start
}

// ThreadCPU is the CPU time the calling OS thread has used (lock the
// goroutine to its thread around a measurement).
func ThreadCPU() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

// CPUTime is the CPU time this process has used, all threads together.
// Dividing work by CPUTime/threads rates a kernel as the ceilings are rated:
// by the time its own threads ran.
func CPUTime() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

// slowest is the longest of the first n CPU times: the time n threads
// running side by side would have taken.
func slowest(cpu []time.Duration) float64 {
	var d time.Duration
	for _, c := range cpu {
		d = max(d, c)
	}
	return max(d, time.Microsecond).Seconds()
}

func computePeak(pool *threads.Pool, o Options, l *loop) Peak {
	if l == nil {
		return Peak{}
	}
	n := calibrate(o, l)
	return Peak{Single: computeRate(pool, o, l, n, 1), All: computeRate(pool, o, l, n, pool.Size())}
}

// calibrate finds the iteration count that takes o.Interval on one thread.
func calibrate(o Options, l *loop) int {
	n := 1 << 12
	for {
		d := timed(o.WallClock, func() { l.run(n) })
		if d > o.Interval/4 || n > 1<<30 {
			return int(float64(n) * float64(o.Interval) / float64(max(d, time.Microsecond)))
		}
		n *= 4
	}
}

// computeRate is the best of o.Reps runs of n iterations on active threads, in G ops/s.
func computeRate(pool *threads.Pool, o Options, l *loop, n, active int) float64 {
	t := &computeTask{wall: o.WallClock, l: l, n: n, active: min(active, maxThreads)}
	best := 0.0
	for range o.Reps {
		pool.Run(t)
		best = max(best, float64(n)*l.opsPerIter*float64(t.active)/slowest(t.took[:t.active])/1e9)
	}
	return best
}

type readTask struct {
	wall   bool
	buf    []byte
	active int
	sink   [maxThreads]uint64
	took   [maxThreads]time.Duration
}

func (t *readTask) Run(w, _ int) {
	if w >= t.active {
		return
	}
	lo, hi := threads.Split(len(t.buf), 1<<16, w, t.active)
	t.took[w] = timed(t.wall, func() { t.sink[w] = readSum(t.buf[lo:hi]) })
}

func dramPeak(pool *threads.Pool, o Options, buf []byte) Peak {
	return Peak{Single: dramRate(pool, o, buf, 1), All: dramRate(pool, o, buf, pool.Size())}
}

// dramRate is the best of o.Reps reads of buf on active threads, in GB/s.
func dramRate(pool *threads.Pool, o Options, buf []byte, active int) float64 {
	t := &readTask{wall: o.WallClock, buf: buf, active: min(active, maxThreads)}
	best := 0.0
	for range o.Reps {
		pool.Run(t)
		best = max(best, float64(len(buf))/slowest(t.took[:t.active])/1e9)
	}
	return best
}
