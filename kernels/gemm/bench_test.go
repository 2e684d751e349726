package gemm

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/ceiling"
	"github.com/ellm-dev/ellm/kernels/threads"
)

const benchThreads = 2

// The benchmarks run on 2 pinned threads and report each SIMD kernel as a
// fraction of this machine's ceiling (kernels/ceiling) measured alternately
// with it: on a shared machine only such same-run ratios mean anything. The
// generic kernel is benchmarked beside every SIMD one, without a ceiling.
//
//	go test -run '^$' -bench . -benchtime 3x ./kernels/gemm/

var bench struct {
	once  sync.Once
	pool  *threads.Pool
	meter *ceiling.Meter
	err   error
}

func benchEnv(b *testing.B) (*threads.Pool, *ceiling.Meter) {
	bench.once.Do(func() {
		bench.pool = threads.New(benchThreads, true)
		bench.meter, bench.err = ceiling.NewMeter(bench.pool, ceiling.Options{Interval: 5 * time.Millisecond, Reps: 2})
	})
	if bench.err != nil {
		b.Fatal(bench.err)
	}
	return bench.pool, bench.meter
}

// randBF16 fills n×k bf16 weights of magnitude ~0.05 from a cheap generator
// (the decode benchmarks need a gigabyte of them).
func randBF16(n, k int, seed uint64) []uint16 {
	w := make([]uint16, n*k)
	s := seed*0x9e3779b97f4a7c15 | 1
	for i := range w {
		s ^= s << 13
		s ^= s >> 7
		s ^= s << 17
		w[i] = toBF16(float32(int32(s>>32)) * (0.05 / (1 << 31)))
	}
	return w
}

func randX(n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i%23-11) * 0.09
	}
	return x
}

// ceilingOf is the ceiling a path's kernel for weights of kind k is held to,
// in the unit the benchmark reports (GFLOP/s, GOP/s or GB/s).
func ceilingOf(p kernels.Path, k kind, memoryBound bool) func(*ceiling.Meter) float64 {
	switch {
	case p == kernels.Generic:
		return nil // scalar Go: no instruction ceiling
	case memoryBound:
		return func(m *ceiling.Meter) float64 { return m.DRAM().All }
	}
	w := map[kind]ceiling.Weights{kindBF16: ceiling.BF16Weights, kindInt8: ceiling.Int8Weights, kindF32: ceiling.F32Weights}[k]
	return func(m *ceiling.Meter) float64 {
		c := m.Compute()
		return c.Peak(ceiling.ProductKind(p, w, c.VNNIGOPS.All > 0)).All
	}
}

// sameRun times run (which does `work` units) alternately with the ceiling,
// five rounds, and reports the best rate of each and their ratio (the
// generic kernels, which have no ceiling, get one round). Both are rated by
// CPU time, not wall time: on a shared machine wall time counts the other
// processes' time slices.
func sameRun(b *testing.B, m *ceiling.Meter, run func(), work float64, unit string, ceil func(*ceiling.Meter) float64) {
	b.Helper()
	rounds := 5
	if ceil == nil {
		rounds = 1
	}
	var best, peak float64
	for range rounds {
		if ceil != nil {
			peak = max(peak, ceil(m))
		}
		n := 0
		start, cpu := time.Now(), ceiling.CPUTime()
		for n == 0 || time.Since(start) < 50*time.Millisecond {
			run()
			n++
		}
		perThread := (ceiling.CPUTime() - cpu).Seconds() / float64(benchThreads)
		best = max(best, float64(n)*work/perThread/1e9)
	}
	b.ReportMetric(best, unit)
	if ceil != nil {
		b.ReportMetric(peak, unit+"-ceiling")
		b.ReportMetric(100*best/peak, "%ceiling")
	}
}

func forPaths(b *testing.B, f func(b *testing.B, p kernels.Path)) {
	for _, p := range kernels.Available() {
		b.Run(p.String(), func(b *testing.B) {
			prev, _ := kernels.Force(p)
			defer kernels.Force(prev)
			f(b, p)
		})
	}
}

// Qwen3-0.6B projections, N×K.
var prefillShapes = []struct {
	name string
	n, k int
}{
	{"qkv", 2048, 1024}, {"o", 1024, 2048}, {"gate_up", 6144, 1024}, {"down", 1024, 3072},
}

// BenchmarkPrefill: M = 512 and 2048 rows (a prompt's tokens in one pass);
// rates in GFLOP/s (int8: GOP/s) = 2·M·N·K / time.
func BenchmarkPrefill(b *testing.B) {
	pool, meter := benchEnv(b)
	for _, m := range prefillRows {
		for _, s := range prefillShapes {
			raw := randBF16(s.n, s.k, 1)
			x := randX(m * s.k)
			y := make([]float32, m*s.n)
			for _, w := range []*Weight{FromBF16(raw, s.n, s.k), QuantizeInt8(raw, s.n, s.k)} {
				b.Run(fmt.Sprintf("M%d/%s/%s", m, s.name, kindName[w.kind]), func(b *testing.B) {
					forPaths(b, func(b *testing.B, p kernels.Path) {
						c := NewContext(pool, m, s.k)
						run := func() { c.MatMul(y, x, m, w) }
						flops := 2 * float64(m*s.n*s.k)
						b.ReportAllocs()
						for b.Loop() {
							run()
						}
						sameRun(b, meter, run, flops, "GFLOP/s", ceilingOf(p, w.kind, false))
					})
				})
			}
		}
	}
}

// BenchmarkPrefillCold is BenchmarkPrefill's bf16 products at M = 512 with
// the weights cold, as in a forward pass: it cycles through 28 copies (one
// per Qwen3-0.6B layer, 112–168 MiB, beyond the L3), so every product
// streams its weights from DRAM as the model's do, where BenchmarkPrefill
// multiplies one weight the L3 holds.
func BenchmarkPrefillCold(b *testing.B) {
	pool, meter := benchEnv(b)
	const m, copies = 512, 28
	for _, s := range prefillShapes {
		raw := randBF16(s.n, s.k, 1)
		ws := make([]*Weight, copies)
		for i := range ws {
			ws[i] = FromBF16(raw, s.n, s.k)
		}
		x := randX(m * s.k)
		y := make([]float32, m*s.n)
		b.Run(fmt.Sprintf("M%d/%s/bf16", m, s.name), func(b *testing.B) {
			forPaths(b, func(b *testing.B, p kernels.Path) {
				c := NewContext(pool, m, s.k)
				i := 0
				run := func() {
					c.MatMul(y, x, m, ws[i])
					i = (i + 1) % copies
				}
				b.ReportAllocs()
				for b.Loop() {
					run()
				}
				sameRun(b, meter, run, 2*float64(m*s.n*s.k), "GFLOP/s", ceilingOf(p, kindBF16, false))
			})
		})
	}
}

// BenchmarkSwiGLU: the fused gate/up projection with its SiLU·mul epilogue,
// M = 512, gate and up 3072×1024 each.
func BenchmarkSwiGLU(b *testing.B) {
	pool, meter := benchEnv(b)
	const m, n, k = 512, 3072, 1024
	g, u := FromBF16(randBF16(n, k, 2), n, k), FromBF16(randBF16(n, k, 3), n, k)
	x := randX(m * k)
	h := make([]float32, m*n)
	forPaths(b, func(b *testing.B, p kernels.Path) {
		c := NewContext(pool, m, k)
		run := func() { c.SwiGLU(h, x, m, g, u) }
		flops := 4 * float64(m*n*k)
		b.ReportAllocs()
		for b.Loop() {
			run()
		}
		sameRun(b, meter, run, flops, "GFLOP/s", ceilingOf(p, kindBF16, false))
	})
}

var kindName = map[kind]string{kindBF16: "bf16", kindF32: "f32", kindInt8: "int8"}

// BenchmarkDecode: a decode step of one, two and four sequences (M = 1, 2, 4),
// memory-bound; rates in GB/s of packed weights streamed. lm_head
// (151936×1024, 311 MB bf16) and the 196 projections of Qwen3-0.6B's 28
// layers in sequence (840 MB bf16), both beyond the L3.
func BenchmarkDecode(b *testing.B) {
	pool, meter := benchEnv(b)
	type layerShape struct{ n, k int }
	layer := []layerShape{{2048, 1024}, {1024, 1024}, {1024, 1024}, {1024, 2048}, {3072, 1024}, {3072, 1024}, {1024, 3072}}
	for _, kind := range []struct {
		name string
		pack func([]uint16, int, int) *Weight
	}{{"bf16", FromBF16}, {"bf16-coded", fromBF16Coded}, {"bf16-coded-l1", fromBF16CodedL1}, {"int8", QuantizeInt8}} {
		lm := kind.pack(randBF16(151936, 1024, 4), 151936, 1024)
		var layers []*Weight
		for i, s := range layer {
			raw := randBF16(s.n, s.k, uint64(10+i))
			for range 28 {
				layers = append(layers, kind.pack(raw, s.n, s.k))
			}
		}
		x, y := randX(4*3072), make([]float32, 4*151936)
		for _, tc := range []struct {
			name string
			ws   []*Weight
		}{{"lm_head", []*Weight{lm}}, {"layers", layers}} {
			// The bytes a step streams: a coded weight's coded copy.
			bytes := 0
			for _, w := range tc.ws {
				if w.coded != nil {
					bytes += w.coded.Bytes()
				} else {
					bytes += w.Bytes()
				}
			}
			for _, m := range []int{1, 2, 4} {
				name := fmt.Sprintf("%s/%s", tc.name, kind.name)
				if m > 1 {
					name += fmt.Sprintf("/m%d", m)
				}
				b.Run(name, func(b *testing.B) {
					forPaths(b, func(b *testing.B, p kernels.Path) {
						if lm.coded != nil && !ReadsCoded(p) {
							b.Skip("this path does not read coded weights")
						}
						c := NewContext(pool, m, 3072)
						run := func() {
							for _, w := range tc.ws {
								c.MatMul(y, x, m, w)
							}
						}
						b.SetBytes(int64(bytes))
						b.ReportAllocs()
						for b.Loop() {
							run()
						}
						sameRun(b, meter, run, float64(bytes), "GB/s", ceilingOf(p, lm.kind, true))
					})
				})
			}
		}
	}
}

// BenchmarkPack is the load-time cost of packing (spread over the CPUs):
// wall and CPU nanoseconds per weight.
// fromBF16Coded packs a bf16 weight with its coded copy (Weight.Code).
func fromBF16Coded(raw []uint16, n, k int) *Weight {
	w := FromBF16(raw, n, k)
	w.Code()
	return w
}

// fromBF16CodedL1 is fromBF16Coded with the copy prefetched into L1 where
// the path's kernels can.
func fromBF16CodedL1(raw []uint16, n, k int) *Weight {
	w := fromBF16Coded(raw, n, k)
	w.SetCodedPrefetch(PrefetchL1)
	return w
}

func BenchmarkPack(b *testing.B) {
	const n, k = 8192, 1024
	raw := randBF16(n, k, 5)
	for name, pack := range map[string]func([]uint16, int, int) *Weight{"FromBF16": FromBF16, "FromBF16+Code": fromBF16Coded, "QuantizeInt8": QuantizeInt8} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(2 * n * k))
			cpu := ceiling.CPUTime()
			for b.Loop() {
				pack(raw, n, k)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(n*k), "ns/weight")
			b.ReportMetric(float64((ceiling.CPUTime()-cpu).Nanoseconds())/float64(b.N)/(n*k), "cpu-ns/weight")
		})
	}
}

// BenchmarkCommonHighBytes is the coded copy's table of an 8192×1024
// weight (bytes: the bf16 weights counted).
func BenchmarkCommonHighBytes(b *testing.B) {
	const n, k = 8192, 1024
	w := FromBF16(randBF16(n, k, 6), n, k)
	b.SetBytes(2 * n * k)
	for b.Loop() {
		w.commonHighBytes()
	}
}

var prefillRows = []int{512, 2048}

// BenchmarkScreen is a decode step's logits for m rows of Qwen3-0.6B's
// lm_head (151936×1024, coded where the path has tiles) computed in full,
// against screened: the int8 product of the 2m split rows, then Interval
// for each row on one thread, and Interval alone. Two rows as well as one
// and four: the screen costs the same for one and two and more at four,
// which is what the residual rows' arithmetic costs (docs/performance.md,
// "forty-fifth pass").
func BenchmarkScreen(b *testing.B) {
	pool, _ := benchEnv(b)
	const n, k = 151936, 1024
	lm := fromBF16Coded(randBF16(n, k, 4), n, k)
	screen := lm.Screen()
	for _, m := range []int{1, 2, 4} {
		x := randX(m * k)
		y, ends, split := make([]float32, m*n), make([]float32, 2*m*n), make([]float32, 2*m*k)
		c := NewContext(pool, 2*m, k)
		intervals := func() {
			for i := range m {
				screen.Interval(ends[2*i*n:(2*i+1)*n], ends[(2*i+1)*n:(2*i+2)*n], split[2*i*k:], 0, n)
			}
		}
		for _, tc := range []struct {
			name string
			run  func()
		}{
			{"full", func() { c.MatMul(y, x, m, lm) }},
			{"screened", func() {
				for i := range m {
					screen.Split(split[2*i*k:], x[i*k:(i+1)*k], c.RoundsActivations(m, lm))
				}
				c.MatMul(ends, split, 2*m, screen.Weight())
				intervals()
			}},
			{"intervals", intervals},
		} {
			b.Run(fmt.Sprintf("m%d/%s", m, tc.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					tc.run()
				}
			})
		}
	}
}
