//go:build amd64 && !purego

package attn

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/ceiling"
	"github.com/ellm-dev/ellm/kernels/ops"
	"github.com/ellm-dev/ellm/kernels/threads"
)

// BenchmarkTile is the inner kernels alone on one thread, 100 query heads
// (one at a time, or in the path's groups) over a full tile of 64 positions
// at head_dim 128 (2·2·64·128 flops each), best of b.N runs of 100 calls,
// against the single-thread FMA peak of the path's width measured just
// before.
func BenchmarkTile(b *testing.B) {
	if !kernels.CPU().Supports(kernels.AVX2) {
		b.Skip("no AVX2")
	}
	pool := threads.New(1, false)
	defer pool.Close()
	peak, err := ceiling.Measure(pool, ceiling.Options{NoDRAM: true, Reps: 3})
	if err != nil {
		b.Fatal(err)
	}
	const hd = 128
	k, v := make([]float32, Tile*hd), make([]float32, Tile*hd)
	q, acc, s := make([]float32, hd), make([]float32, hd), make([]float32, Tile)
	for i := range k {
		k[i], v[i] = float32(i%13)*0.01, float32(i%5)*0.1
	}
	ml := []float32{0, 1}
	for _, p := range []kernels.Path{kernels.AVX512, kernels.AVX2} {
		if !kernels.CPU().Supports(p) {
			continue
		}
		var ks kernelSet
		simdKernels(&ks, p, hd)
		var w scratch
		w.s = make([]float32, groupQueries*Tile)
		for i := range w.pend {
			w.pend[i] = query{ml: []float32{0, 1}, acc: make([]float32, hd), q: q}
		}
		fma := peak.Peak(ceiling.FMAKind(p)).Single
		for _, group := range []bool{false, true} {
			if group && ks.group == nil {
				continue
			}
			name := map[bool]string{false: "single", true: "group"}[group]
			b.Run(fmt.Sprintf("%s/%s", p, name), func(b *testing.B) {
				best, _ := timeBest(b, 1, func() {
					for range 100 / groupQueries {
						if group {
							w.np = groupQueries
							ks.group(&w, 0, k, v, Tile, hd, 0.1)
							continue
						}
						for range groupQueries {
							ks.tile(ml, acc, q, k, v, s, Tile, 0.1)
						}
					}
				})
				gf := 4 * Tile * hd * 100 / best / 1e9
				b.ReportMetric(gf, "GFLOP/s")
				b.ReportMetric(gf/fma, "of-fma-peak")
			})
		}
	}
}

// BenchmarkInPlaceKernels compares the in-place kernels of the two modes on
// one thread, L1/L2-resident (one tile of a bf16 cache, 2 or 4 queries per
// call, head_dim 128): tile2/4BF16AVX512 (f32 FMA, K/V widened in
// registers) against tile2/4DotAVX512 (VDPBF16PS), thread CPU time per
// call, alternating call by call.
func BenchmarkInPlaceKernels(b *testing.B) {
	if !kernels.CPU().Supports(kernels.AVX512BF16) {
		b.Skip("no AVX512_BF16")
	}
	const hd = 128
	c := NewCache(1, 1, 2*Tile, hd, BF16)
	kv := make([]float32, 2*Tile*hd)
	for i := range kv {
		kv[i] = float32(i%13)*0.01 - 0.05
	}
	c.StoreRun(0, 0, 2*Tile, kv, kv)
	o := ops.For(kernels.Generic)
	for _, np := range []int{2, 4} {
		b.Run(fmt.Sprintf("queries%d", np), func(b *testing.B) {
			mk := func() *scratch {
				w := &scratch{s: make([]float32, groupQueries*Tile)}
				for i := range w.pend {
					q := make([]float32, hd)
					for d := range q {
						q[d] = float32(d%7) * 0.1
					}
					qb := make([]uint16, 2*hd)
					roundQuery(o, qb, q, make([]float32, 2*hd), 0.1)
					w.pend[i] = query{ml: []float32{0, 1}, acc: make([]float32, hd), q: q, qb: qb}
				}
				return w
			}
			wf, wb := mk(), mk()
			runtime.LockOSThread() // ThreadCPU is this thread's
			defer runtime.UnlockOSThread()
			var cpu [2]time.Duration
			for b.Loop() {
				for m, w := range []*scratch{wf, wb} {
					t0 := ceiling.ThreadCPU()
					for range 100 {
						w.np, w.pn = np, Tile
						if m == 0 {
							inPlaceAVX512.direct(w, c, 0, Tile, 0.1)
						} else {
							dotAVX512(w, c, 0, Tile)
						}
					}
					cpu[m] += ceiling.ThreadCPU() - t0
				}
			}
			flops := float64(4*Tile*hd*np*100) * float64(b.N)
			b.ReportMetric(flops/cpu[0].Seconds()/1e9, "GFLOP/s-f32")
			b.ReportMetric(flops/cpu[1].Seconds()/1e9, "GFLOP/s-bf16")
		})
	}
}
