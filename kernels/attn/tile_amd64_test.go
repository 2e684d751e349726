//go:build amd64 && !purego

package attn

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/ops"
)

// The tile kernel's exponential is a copy of kernels/ops' (assembly cannot
// share macros across packages): it must stay bit-identical to ops.Exp32.
func TestExpMatchesOps(t *testing.T) {
	if !kernels.CPU().Supports(kernels.AVX512) {
		t.Skip("no AVX-512")
	}
	r := rand.New(rand.NewPCG(1, 1))
	src := make([]float32, 1<<14)
	for i := range src {
		src[i] = float32(r.Float64()*200 - 100)
	}
	copy(src, []float32{0, -87, -87.0001, 88, 88.5, float32(math.Inf(-1)), float32(math.Inf(1)), -0.5, 1e-30})
	dst := make([]float32, len(src))
	expAVX512(&dst[0], &src[0], len(src))
	for i, x := range src {
		if want := ops.Exp32(x); math.Float32bits(dst[i]) != math.Float32bits(want) {
			t.Fatalf("exp(%v) = %v, ops.Exp32 %v", x, dst[i], want)
		}
	}
}

// The group kernel must give each query exactly the bits of the single one.
func TestTile4MatchesTile(t *testing.T) {
	if !kernels.CPU().Supports(kernels.AVX512) {
		t.Skip("no AVX-512")
	}
	r := rand.New(rand.NewPCG(2, 2))
	rnd := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		return x
	}
	for _, hd := range []int{16, 64, 80, 128} {
		for _, n := range []int{1, 3, 5, 16, 17, 63, 64} {
			k, v := rnd(Tile*hd), rnd(Tile*hd)
			var w scratch
			w.s = make([]float32, groupQueries*Tile)
			var single [groupQueries]query
			for i := range w.pend {
				ml := []float32{float32(r.NormFloat64()), float32(r.Float64() * 10)}
				if i == 0 {
					ml[0], ml[1] = float32(math.Inf(-1)), 0 // a first tile
				}
				w.pend[i] = query{ml: ml, acc: rnd(hd), q: rnd(hd)}
				single[i] = query{ml: append([]float32(nil), ml...), acc: append([]float32(nil), w.pend[i].acc...), q: w.pend[i].q}
			}
			if !tileGroup(kernels.AVX512, &w, k, v, n, hd, 0.125) {
				t.Fatal("tileGroup declined")
			}
			for i, q := range single {
				tileAVX512(&q.ml[0], &q.acc[0], &q.q[0], &k[0], &v[0], &w.s[0], n, hd, 0.125)
				if !bitsEqual(q.ml, w.pend[i].ml) || !bitsEqual(q.acc, w.pend[i].acc) {
					t.Fatalf("hd %d n %d query %d: group kernel differs from single", hd, n, i)
				}
			}
		}
	}
}
