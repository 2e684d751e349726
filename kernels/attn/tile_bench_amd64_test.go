//go:build amd64 && !purego

package attn

import (
	"testing"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/ceiling"
	"github.com/ellm-dev/ellm/kernels/threads"
)

// BenchmarkTileAVX512 is the inner kernel alone on one thread, 100 query heads
// (one at a time, or in groups of four) over a full tile of 64 positions at head_dim 128 (2·2·64·128 flops), best
// of b.N runs of 100 calls, against
// the single-thread FMA peak measured just before.
func BenchmarkTileAVX512(b *testing.B) {
	if !kernels.CPU().Supports(kernels.AVX512) {
		b.Skip("no AVX-512")
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
	var w scratch
	w.s = make([]float32, groupQueries*Tile)
	for i := range w.pend {
		w.pend[i] = query{ml: []float32{0, 1}, acc: make([]float32, hd), q: q}
	}
	for _, group := range []bool{false, true} {
		name, calls := "single", 100
		if group {
			name, calls = "group4", 25
		}
		b.Run(name, func(b *testing.B) {
			best, _ := timeBest(b, 1, func() {
				for range calls {
					if group {
						w.np = groupQueries
						tileGroup(&w, 0, k, v, Tile, hd, 0.1)
					} else {
						tileAVX512(&ml[0], &acc[0], &q[0], &k[0], &v[0], &s[0], Tile, hd, 0.1)
					}
				}
			})
			gf := 4 * Tile * hd * 100 / best / 1e9
			b.ReportMetric(gf, "GFLOP/s")
			b.ReportMetric(gf/peak.FMAGFLOPS.Single, "of-fma-peak")
		})
	}
}
