package attn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/ops"
)

// tileDefinition is tileGo's arithmetic spelled out one sum at a time: each
// score and each output runs through its terms in order (the softmax's
// rescaling between them is tileGo's own).
func tileDefinition(o *ops.Kernels, ml, acc, q, k, v, s []float32, n int, scale float32) {
	mulAdd := func(acc, x, w float32) float32 { return acc + float32(x*w) }
	tileWith(o, ml, acc, q, k, v, s, n, scale, func(q, k []float32) (dot float32) {
		for d, x := range q {
			dot = mulAdd(dot, x, k[d])
		}
		return dot
	}, mulAdd)
}

// tileWith is a tile's steps with score as each key's q·k and mac as each
// output's multiply-add: the scaled scores, rescale, then the outputs, each
// summed over the positions in order.
func tileWith(o *ops.Kernels, ml, acc, q, k, v, s []float32, n int, scale float32,
	score func(q, k []float32) float32, mac func(acc, x, w float32) float32) {
	hd := len(q)
	for t := range n {
		s[t] = score(q, k[t*hd:(t+1)*hd]) * scale
	}
	rescale(o, ml, acc, s[:n])
	for t, p := range s[:n] {
		for d := range acc {
			acc[d] = mac(acc[d], p, v[t*hd+d])
		}
	}
}

// TestTileGoMatchesDefinition: tileGo, which interleaves four sums at a time,
// gives the bits of one sum at a time, for every head size and tile length
// the blocks of four leave a remainder of, over several tiles in a row.
func TestTileGoMatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	o := ops.For(kernels.Generic)
	for _, hd := range []int{1, 5, 16, 24, 128} {
		for _, n := range []int{1, 2, 3, 4, 5, 7, 63, Tile} {
			t.Run(fmt.Sprintf("hd%d/n%d", hd, n), func(t *testing.T) {
				q := randSlice(rng, hd)
				threeTiles(t, rng, q, n, true, func(ml, acc, k, v, s []float32) {
					tileGo(o, ml, acc, q, k, v, s, n, 0.125)
				}, func(ml, acc, k, v, s []float32) {
					tileDefinition(o, ml, acc, q, k, v, s, n, 0.125)
				})
			})
		}
	}
}

// threeTiles runs got and want over three tiles of n random keys and values
// in a row (the running state carried from tile to tile, the first tile's
// max −Inf), each on a query of len(q) dims, and fails where their states
// (m, l) or accumulators differ in a bit, and where checkS, their
// probabilities.
func threeTiles(t *testing.T, rng *rand.Rand, q []float32, n int, checkS bool, got, want func(ml, acc, k, v, s []float32)) {
	t.Helper()
	hd := len(q)
	var ml [2][2]float32
	acc := [2][]float32{make([]float32, hd), make([]float32, hd)}
	s := [2][]float32{make([]float32, Tile), make([]float32, Tile)}
	for i := range ml {
		ml[i] = [2]float32{float32(math.Inf(-1)), 0}
	}
	for range 3 {
		k, v := randSlice(rng, n*hd), randSlice(rng, n*hd)
		got(ml[0][:], acc[0], k, v, s[0])
		want(ml[1][:], acc[1], k, v, s[1])
		if !bitsEqual(acc[0], acc[1]) || !bitsEqual(ml[0][:], ml[1][:]) || checkS && !bitsEqual(s[0][:n], s[1][:n]) {
			t.Fatalf("acc %v, (m, l) %v; want %v, %v", acc[0][:min(hd, 4)], ml[0], acc[1][:min(hd, 4)], ml[1])
		}
	}
}

// dequantInputs is a tile of random int8 values with the extremes ±127 and
// zero, and its row scales, that of the last of rows rows 0 (an all-zero row
// quantizes to scale 0).
func dequantInputs(r *rand.Rand, hd, rows int) ([]int8, []float32) {
	src := make([]int8, Tile*hd)
	for i := range src {
		src[i] = int8(r.IntN(255) - 127)
	}
	src[0], src[1], src[2] = 127, -127, 0
	scale := make([]float32, Tile)
	for i := range scale {
		scale[i] = float32(r.ExpFloat64() * 0.01)
	}
	scale[rows-1] = 0
	return src, scale
}

func randSlice(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

func BenchmarkTileGo(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 8))
	o := ops.For(kernels.Generic)
	const hd, n = 128, Tile
	q, k, v := randSlice(rng, hd), randSlice(rng, n*hd), randSlice(rng, n*hd)
	acc, s := make([]float32, hd), make([]float32, n)
	for name, f := range map[string]func(o *ops.Kernels, ml, acc, q, k, v, s []float32, n int, scale float32){"tileGo": tileGo, "definition": tileDefinition} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				ml := [2]float32{float32(math.Inf(-1)), 0}
				f(o, ml[:], acc, q, k, v, s, n, 0.125)
			}
			b.ReportMetric(float64(4*n*hd)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
