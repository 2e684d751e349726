package attn

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/ceiling"
	"github.com/ellm-dev/ellm/kernels/threads"
)

var (
	benchPool  *threads.Pool
	benchMeter *ceiling.Meter
	benchPeak  ceiling.Ceilings
	benchErr   error
	benchOnce  sync.Once
)

// benchSetup returns a 2-worker pool, a ceiling meter on it and the compute
// ceilings measured once, so that results read as fractions of what this
// machine does in the same run.
func benchSetup(b *testing.B) (*threads.Pool, *ceiling.Meter, ceiling.Ceilings) {
	benchOnce.Do(func() {
		benchPool = threads.New(2, false)
		benchMeter, benchErr = ceiling.NewMeter(benchPool, ceiling.Options{DRAMBytes: 512 << 20, Reps: 3})
		if benchErr == nil {
			benchPeak = benchMeter.Compute()
		}
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchPool, benchMeter, benchPeak
}

// timeBest runs f b.N times and returns the fastest call's wall time and
// the mean CPU time per call per pool thread, in seconds. The ceilings are
// rated by CPU time: on a shared machine wall time mostly measures the other
// tenants, CPU time what the kernel's own threads took.
func timeBest(b *testing.B, threads int, f func()) (best, cpu float64) {
	best = math.Inf(1)
	c0 := ceiling.CPUTime()
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		f()
		best = min(best, time.Since(t0).Seconds())
	}
	return best, (ceiling.CPUTime() - c0).Seconds() / float64(b.N) / float64(threads)
}

// mappedCache allocates a bf16 or int8 cache as pkg/kvcache does (anonymous
// mmap, transparent huge pages asked for), so that decode is not measured
// against the TLB misses of 4 KiB heap pages.
func mappedCache(b testing.TB, dt DType, slots, kvHeads, seqLen, headDim int) *Cache {
	n := slots * kvHeads * seqLen * headDim
	mem, err := unix.Mmap(-1, 0, 4*n+8*(n/headDim), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { unix.Munmap(mem) })
	_ = unix.Madvise(mem, unix.MADV_HUGEPAGE)
	c := &Cache{Slots: slots, KVHeads: kvHeads, SeqLen: seqLen, HeadDim: headDim}
	c.Init() // as pkg/kvcache does: a store rounds to bf16 with the ops bound here
	if dt == Int8 {
		c.K8 = unsafe.Slice((*int8)(unsafe.Pointer(&mem[0])), n)
		c.V8 = unsafe.Slice((*int8)(unsafe.Pointer(&mem[n])), n)
		c.KS = unsafe.Slice((*float32)(unsafe.Pointer(&mem[2*n])), n/headDim)
		c.VS = unsafe.Slice((*float32)(unsafe.Pointer(&mem[2*n+4*(n/headDim)])), n/headDim)
		return c
	}
	c.K16 = unsafe.Slice((*uint16)(unsafe.Pointer(&mem[0])), n)
	c.V16 = unsafe.Slice((*uint16)(unsafe.Pointer(&mem[2*n])), n)
	return c
}

// bytesPerValue is what one cached K or V value costs in dt, scales included.
func bytesPerValue(dt DType, headDim int) float64 {
	if dt == Int8 {
		return 1 + 4/float64(headDim)
	}
	return 2
}

// fillCache writes cheap pseudo-random K/V to positions [0, n) of every slot.
func fillCache(c *Cache, n int) {
	w := c.KVHeads * c.HeadDim
	k, v := make([]float32, n*w), make([]float32, n*w)
	x := uint32(1)
	for i := range k {
		x = x*1664525 + 1013904223
		k[i] = float32(int32(x>>8)) / (1 << 23)
		v[i] = float32(int32(x<<8)>>8) / (1 << 23)
	}
	for s := range c.Slots {
		c.StoreRun(s, 0, n, k, v)
	}
}

func forcePath(b *testing.B, p kernels.Path) func() {
	prev, err := kernels.Force(p)
	if err != nil {
		b.Skip(err)
	}
	return func() { kernels.Force(prev) }
}

// modesOf are the attention modes path p runs fast: ModeBF16 only where it
// has the VDPBF16PS kernels.
func modesOf(p kernels.Path) []Mode {
	if p.RoundsToBF16() {
		return []Mode{ModeF32, ModeBF16}
	}
	return []Mode{ModeF32}
}

// peakOf is the compute ceiling of mode m on path p: VDPBF16PS, or f32
// FMA at the path's width.
func peakOf(peak ceiling.Ceilings, p kernels.Path, m Mode) float64 {
	if m == ModeBF16 {
		return peak.BF16GFLOPS.All
	}
	return peak.Peak(ceiling.FMAKind(p)).All
}

// BenchmarkPrefill is causal attention over a prompt of T new rows after
// past cached positions (a conversation's next turn when past > 0): Qwen3
// shapes (16 query heads, 8 kv heads, head_dim 128), bf16 cache, in each
// mode. flops counts the two matrix products, the causal half of the new rows
// and the whole history: 2·2·T·(past + (T+1)/2)·heads·head_dim; of-peak is
// against the mode's own ceiling (f32 FMA, or VDPBF16PS). With slots > 1 the
// calls take the cache's slots in turn, whose histories together outgrow the
// last-level cache, so that each call reads its history from DRAM as a
// model's layer does.
func BenchmarkPrefill(b *testing.B) {
	for _, pc := range []prefillCase{{T: 512}, {T: 4096}, {T: 512, past: 4096}, {T: 512, past: 4096, slots: 8}} {
		for _, p := range kernels.Available() {
			if p == kernels.Generic && pc.T+pc.past > 512 {
				continue // minutes per call
			}
			for _, m := range modesOf(p) {
				b.Run(fmt.Sprintf("%v/%s/%s", pc, p, m), func(b *testing.B) {
					pool, _, peak := benchSetup(b)
					defer forcePath(b, p)()
					a, c, q, out, seqs := prefillSetup(b, pool, m, pc)
					call := 0
					b.ReportAllocs()
					best, cpu := timeBest(b, pool.Size(), func() {
						seqs[0].Slot = call % c.Slots
						call++
						a.Forward(out, q, c, seqs)
					})
					flops := pc.flops()
					b.ReportMetric(flops/best/1e9, "GFLOP/s-wall")
					b.ReportMetric(flops/cpu/1e9, "GFLOP/s-cpu")
					b.ReportMetric(flops/cpu/1e9/peakOf(peak, p, m), "of-peak")
				})
			}
		}
	}
}

// The attention shape of the prefill and mode benchmarks: Qwen3's 16 query
// heads and 8 kv heads of 128.
const benchQHeads, benchKVHeads, benchHeadDim = 16, 8, 128

// prefillCase is BenchmarkPrefill's prompt: T new rows after past cached
// positions, in one of slots slots (0: one).
type prefillCase struct{ T, past, slots int }

func (pc prefillCase) String() string {
	s := fmt.Sprintf("T%d", pc.T)
	if pc.past > 0 {
		s += fmt.Sprintf("-past%d", pc.past)
	}
	if pc.slots > 1 {
		s += fmt.Sprintf("-slots%d", pc.slots)
	}
	return s
}

// flops is the case's two matrix products.
func (pc prefillCase) flops() float64 {
	return 4 * float64(pc.T) * (float64(pc.past) + float64(pc.T+1)/2) * benchQHeads * benchHeadDim
}

// prefillSetup builds BenchmarkPrefill's attention of mode m and its inputs
// for pc: every slot's history and new rows' K/V in the cache.
func prefillSetup(b *testing.B, pool *threads.Pool, m Mode, pc prefillCase) (*Attention, *Cache, []float32, []float32, []Seq) {
	const qh, kvh, hd = benchQHeads, benchKVHeads, benchHeadDim
	n := pc.past + pc.T
	c := mappedCache(b, BF16, max(pc.slots, 1), kvh, n, hd)
	fillCache(c, n)
	a, err := NewMode(pool, pc.T, qh, kvh, hd, m)
	if err != nil {
		b.Fatal(err)
	}
	q, out := make([]float32, pc.T*qh*hd), make([]float32, pc.T*qh*hd)
	for i := range q {
		q[i] = float32(i%7) * 0.1
	}
	return a, c, q, out, []Seq{{Start: pc.past, N: pc.T}}
}

// BenchmarkModesAB alternates the f32 and bf16 modes call by call in one
// process (prefill of T = 4096, and a decode step at depth 4096 and 32768
// of one sequence, 16 q / 8 kv heads), so that a change of load hits both: the
// rates are per CPU second of the pool's threads, each against its own
// ceiling. The way to compare the modes on a shared machine.
func BenchmarkModesAB(b *testing.B) {
	if !kernels.CPU().Supports(kernels.AVX512BF16) {
		b.Skip("no AVX512_BF16")
	}
	for _, sc := range []struct {
		name string
		pc   prefillCase
	}{
		{"prefill-T4096", prefillCase{T: 4096}},
		// A decode step is one new row after the rest of the context.
		{"decode-depth4096", prefillCase{T: 1, past: 4095}},
		{"decode-depth32768", prefillCase{T: 1, past: 32767}},
	} {
		b.Run(sc.name, func(b *testing.B) {
			pool, _, peak := benchSetup(b)
			defer forcePath(b, kernels.AVX512BF16)()
			var cpu [2]float64
			var run [2]func()
			for i, m := range []Mode{ModeF32, ModeBF16} {
				a, c, q, out, seqs := prefillSetup(b, pool, m, sc.pc)
				run[i] = func() { a.Forward(out, q, c, seqs) }
			}
			flops := sc.pc.flops()
			b.ResetTimer()
			for b.Loop() {
				for i, f := range run {
					c0 := ceiling.CPUTime()
					f()
					cpu[i] += (ceiling.CPUTime() - c0).Seconds()
				}
			}
			for i, m := range []Mode{ModeF32, ModeBF16} {
				rate := flops * float64(b.N) / (cpu[i] / float64(pool.Size())) / 1e9
				b.ReportMetric(rate, "GFLOP/s-cpu-"+m.String())
				b.ReportMetric(rate/peakOf(peak, kernels.AVX512BF16, m), "of-peak-"+m.String())
			}
			b.ReportMetric(cpu[0]/cpu[1], "f32/bf16-cpu")
		})
	}
}

// BenchmarkDecode is one decode step of `slots` sequences over ctx cached
// positions each (16 query heads: two per kv head, as Qwen3-0.6B/1.7B; 32:
// four, as Qwen3-4B/8B) of a bf16 or int8 cache; it streams K and V once
// (bytes = 2·slots·kvHeads·ctx·head_dim·bytes per value), so it is measured
// against DRAM read bandwidth. ns/op compares the dtypes.
func BenchmarkDecode(b *testing.B) {
	const kvh, hd = 8, 128
	for _, sc := range []struct{ qh, slots, ctx int }{{16, 1, 4096}, {16, 1, 32768}, {16, 4, 8192}, {32, 1, 32768}} {
		qh := sc.qh
		for _, p := range kernels.Available() {
			for _, dt := range []DType{BF16, Int8} {
				for _, m := range modesOf(p) {
					if dt == Int8 && m == ModeBF16 {
						continue // an int8 cache takes ModeF32
					}
					b.Run(fmt.Sprintf("q%d-slots%d-ctx%d/%s/%s/%s", qh, sc.slots, sc.ctx, dt, p, m), func(b *testing.B) {
						benchDecode(b, p, m, dt, qh, kvh, hd, sc.slots, sc.ctx)
					})
				}
			}
		}
	}
}

func benchDecode(b *testing.B, p kernels.Path, m Mode, dt DType, qh, kvh, hd, slots, ctx int) {
	pool, meter, _ := benchSetup(b)
	defer forcePath(b, p)()
	c := mappedCache(b, dt, slots, kvh, ctx, hd)
	fillCache(c, ctx)
	a, err := NewMode(pool, slots, qh, kvh, hd, m)
	if err != nil {
		b.Fatal(err)
	}
	q, out := make([]float32, slots*qh*hd), make([]float32, slots*qh*hd)
	seqs := make([]Seq, slots)
	for i := range seqs {
		seqs[i] = Seq{Slot: i, Start: ctx - 1, N: 1, Row: i}
	}
	bytes := int64(2 * float64(slots*kvh*ctx*hd) * bytesPerValue(dt, hd))
	b.SetBytes(bytes)
	b.ReportAllocs()
	best, cpu := timeBest(b, pool.Size(), func() { a.Forward(out, q, c, seqs) })
	dram := meter.DRAM() // right after, in the same conditions
	b.ReportMetric(float64(bytes)/best/1e9, "GB/s-wall")
	b.ReportMetric(float64(bytes)/cpu/1e9, "GB/s-cpu")
	b.ReportMetric(float64(bytes)/cpu/1e9/dram.All, "of-dram-peak")
	b.ReportMetric(cpu*1e6, "cpu-us/step")
}
