//go:build amd64 && !purego

package attn

import (
	"math"
	"math/rand/v2"
	"slices"
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

// The group kernels must give each query exactly the bits of the single one.
func TestGroupKernelsMatchTile(t *testing.T) {
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
	for _, hd := range []int{16, 64, 80, 128, 144} {
		for _, n := range []int{1, 3, 5, 8, 9, 16, 17, 63, 64} {
			k, v := rnd(Tile*hd), rnd(Tile*hd)
			var start [groupQueries]query
			for i := range start {
				ml := []float32{float32(r.NormFloat64()), float32(r.Float64() * 10)}
				if i == 0 {
					ml[0], ml[1] = float32(math.Inf(-1)), 0 // a first tile
				}
				start[i] = query{ml: ml, acc: rnd(hd), q: rnd(hd)}
			}
			clone := func() (w scratch) {
				w.s = make([]float32, groupQueries*Tile)
				for i, q := range start {
					w.pend[i] = query{ml: slices.Clone(q.ml), acc: slices.Clone(q.acc), q: q.q}
				}
				return w
			}
			want := clone()
			for _, q := range want.pend {
				tileAVX512(&q.ml[0], &q.acc[0], &q.q[0], &k[0], &v[0], &want.s[0], n, hd, 0.125)
			}
			for _, c := range []struct {
				name  string
				np, i int
			}{{"four", 4, 0}, {"pair", 2, 0}, {"pair after two", 4, 2}} {
				got := clone()
				got.np = c.np
				if took := tileGroup(kernels.AVX512, &got, c.i, k, v, n, hd, 0.125); took != c.np-c.i {
					t.Fatalf("%s: tileGroup took %d queries", c.name, took)
				}
				for i := c.i; i < c.np; i++ {
					if !bitsEqual(got.pend[i].ml, want.pend[i].ml) || !bitsEqual(got.pend[i].acc, want.pend[i].acc) {
						t.Fatalf("hd %d n %d %s: query %d differs from the single kernel", hd, n, c.name, i)
					}
				}
			}
		}
	}
}
