//go:build !purego

package attn

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ellm-dev/ellm/kernels"
)

// The NEON dequantizer against dequantGo, bit for bit, on random values with
// the extremes ±127 and zero, for row counts that end a tile early: nothing
// past the rows is written (the rest of dst is a NaN guard).
func TestDequantNEONMatchesGo(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	for _, hd := range []int{16, 48, 128, 256} {
		ks := bindKernels(kernels.NEON, hd)
		for _, rows := range []int{1, 5, 16, 63, Tile} {
			src, scale := dequantInputs(r, hd, rows)
			want := make([]float32, rows*hd)
			dequantGo(want, src, scale, rows, hd)
			for name, dq := range map[string]dequantFunc{"K": ks.dequantK, "V": ks.dequantV} {
				dst := make([]float32, Tile*hd)
				for i := range dst {
					dst[i] = float32(math.NaN())
				}
				got := dq(dst, src, scale, rows, hd)
				if !bitsEqual(got, want) {
					t.Fatalf("hd %d rows %d %s: differs from dequantGo", hd, rows, name)
				}
				for i, v := range dst[rows*hd:] {
					if v == v {
						t.Fatalf("hd %d rows %d %s: wrote dst[%d] past the rows", hd, rows, name, rows*hd+i)
					}
				}
			}
		}
	}
}
