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
