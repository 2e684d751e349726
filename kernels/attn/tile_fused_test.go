package attn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/internal/fused"
	"github.com/ellm-dev/ellm/kernels/ops"
)

// tileFused is the arithmetic of the SIMD tile kernels (AVX2, AVX-512,
// NEON) spelt out: each score a 16-lane chain of fused multiply-adds over
// the head's dims (lane l takes dims l, l+16, …), folded by the tree (i,
// i+8), (i, i+4), (i, i+2), (i, i+1) and scaled; tileGo's softmax
// (rescale); each output one fused multiply-add per position, in order.
func tileFused(o *ops.Kernels, ml, acc, q, k, v, s []float32, n int, scale float32) {
	fma := func(acc, x, w float32) float32 { return fused.FMA32(x, w, acc) }
	tileWith(o, ml, acc, q, k, v, s, n, scale, func(q, k []float32) float32 {
		var lane [16]float32
		for d, x := range q {
			lane[d%16] = fma(lane[d%16], x, k[d])
		}
		for _, h := range []int{8, 4, 2, 1} {
			for i := range h {
				lane[i] += lane[i+h]
			}
		}
		return lane[0]
	}, fma)
}

// TestTileKernelsMatchFused: the single-query tile of every SIMD path, over
// K and V as the path widens them, gives tileFused's bits, for head sizes
// whose dims it takes, every remainder of a tile's keys, three tiles in a
// row, with scores large enough that a tile's maximum moves.
func TestTileKernelsMatchFused(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, p := range kernels.Available() {
		if p == kernels.Generic || !kernels.Assembly() {
			continue
		}
		for _, hd := range []int{16, 48, 64, 128, 144, 256} {
			ks := bindKernels(p, hd)
			for _, n := range []int{1, 3, 4, 5, 8, 15, 17, 63, Tile} {
				t.Run(fmt.Sprintf("%s/hd%d/n%d", p, hd, n), func(t *testing.T) {
					q := randSlice(rng, hd)
					for d := range q {
						q[d] *= 4
					}
					var ml [2][2]float32
					acc := [2][]float32{make([]float32, hd), make([]float32, hd)}
					s := [2][]float32{make([]float32, Tile), make([]float32, Tile)}
					for i := range ml {
						ml[i] = [2]float32{float32(math.Inf(-1)), 0}
					}
					kw, vw := make([]float32, Tile*hd), make([]float32, Tile*hd)
					for range 3 {
						k, v := randSlice(rng, n*hd), randSlice(rng, n*hd)
						ks.tile(ml[0][:], acc[0], q, ks.widenK(kw, nil, k, n, hd), ks.widenV(vw, nil, v, n, hd), s[0], n, 0.125)
						tileFused(ks.ops, ml[1][:], acc[1], q, k, v, s[1], n, 0.125)
						if !bitsEqual(acc[0], acc[1]) || !bitsEqual(ml[0][:], ml[1][:]) {
							t.Fatalf("tile: acc %v, (m, l) %v; fused: %v, %v", acc[0][:4], ml[0], acc[1][:4], ml[1])
						}
					}
				})
			}
		}
	}
}
