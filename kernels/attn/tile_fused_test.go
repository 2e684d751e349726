package attn

import (
	"fmt"
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
	tileWith(o, ml, acc, q, k, v, s, n, scale, func(q, k []float32) float32 {
		var lane [16]float32
		for d, x := range q {
			lane[d%16] = fused.MulAdd(lane[d%16], x, k[d])
		}
		for _, h := range []int{8, 4, 2, 1} {
			for i := range h {
				lane[i] += lane[i+h]
			}
		}
		return lane[0]
	}, fused.MulAdd)
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
					kw, vw := make([]float32, Tile*hd), make([]float32, Tile*hd)
					threeTiles(t, rng, q, n, false, func(ml, acc, k, v, s []float32) {
						ks.tile(ml, acc, q, ks.widenK(kw, nil, k, n, hd), ks.widenV(vw, nil, v, n, hd), s, n, 0.125)
					}, func(ml, acc, k, v, s []float32) {
						tileFused(ks.ops, ml, acc, q, k, v, s, n, 0.125)
					})
				})
			}
		}
	}
}
