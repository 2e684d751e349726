package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/internal/fused"
	"github.com/ellm-dev/ellm/kernels/threads"
)

// fusedPairsF32 and fusedF32 are the arithmetic of the f32 kernels of every
// assembly path (AVX2, AVX-512 and NEON): genPairsF32 and genF32 with each
// product and its sum one fused multiply-add.
func fusedPairsF32(a *kargs) { pairsF32With(a, fused.MulAdd) }
func fusedF32(a *kargs)      { f32With(a, fused.MulAdd) }

// TestAsmKernelsMatchDefinitions: the f32 products of every assembly path
// (bf16 weights widened, f32 weights) are the same bits as fusedPairsF32 and
// fusedF32 (NaN for NaN), so an output is the same on an x86 CPU and an
// arm64 one, and its int8 products those of genQuads, both with the int8
// kernels this CPU takes and with those of a CPU without its int8 dot
// products (withoutInt8Dots): every tile shape, both sides of the widening
// threshold, odd K, MatMul and MatMulAdd, with subnormal, overflowing,
// infinite and NaN values.
func TestAsmKernelsMatchDefinitions(t *testing.T) {
	if !kernels.Assembly() {
		t.Skip("no assembly kernels in this build")
	}
	pool := threads.New(2, false)
	defer pool.Close()
	values := map[string][]float32{
		"normal":   nil,
		"extremes": {math.Float32frombits(1), -math.Float32frombits(0x7fffff), 0x1p-126, 0x1.8p-140, 3e38, -3e38, 1e20},
		"specials": {float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0x1p-149, 2e38},
	}
	forEachPath(t, func(t *testing.T, p kernels.Path) {
		if p == kernels.Generic {
			return
		}
		for name, sp := range values {
			rng := rand.New(rand.NewPCG(11, 12))
			for _, s := range shapes {
				if sp != nil && s[0]*s[1]*s[2] > 1e6 {
					continue // the widened products are covered by the smaller shapes of more than 16 rows
				}
				pr := newProblem(rng, s[0], s[1], s[2])
				if sp != nil {
					sprinkle(rng, pr, sp)
				}
				c := NewContext(pool, pr.m, pr.k)
				def := NewContext(pool, pr.m, pr.k)
				def.prep, def.set = nil, genericSet(fusedPairsF32, fusedF32, genQuads, false)
				noDots := NewContext(pool, pr.m, pr.k)
				set, _ := asmKernels(p, withoutInt8Dots(kernels.CPU()))
				noDots.set.quads, noDots.set.quadRows = set.quads, set.int8Rows()
				int8 := QuantizeInt8(pr.w, pr.n, pr.k)
				weights := map[string]*Weight{"f32": FromF32(pr.wf, pr.n, pr.k), "int8": int8}
				if !p.RoundsToBF16() {
					weights["bf16"] = FromBF16(pr.w, pr.n, pr.k)
				}
				for kind, w := range weights {
					what := fmt.Sprintf("%s %s %v %s", p, name, s, kind)
					got, want := make([]float32, pr.m*pr.n), make([]float32, pr.m*pr.n)
					c.MatMul(got, pr.x, pr.m, w)
					def.MatMul(want, pr.x, pr.m, w)
					assertBits(t, what+" MatMul", got, want, pr.n)
					c.MatMulAdd(got, pr.x, pr.m, w)
					def.MatMulAdd(want, pr.x, pr.m, w)
					assertBits(t, what+" MatMulAdd", got, want, pr.n)
					if w == int8 {
						noDots.MatMul(got, pr.x, pr.m, w)
						def.MatMul(want, pr.x, pr.m, w)
						assertBits(t, what+" MatMul without int8 dot products", got, want, pr.n)
					}
				}
			}
		}
	})
}

// withoutInt8Dots is f without the instructions the int8 kernels take
// where a CPU has them (AVX512_VNNI, AVX-VNNI, dotprod), so that a test on
// this CPU covers the kernels of a CPU that lacks them too.
func withoutInt8Dots(f kernels.Features) kernels.Features {
	f.AVX512VNNI, f.AVXVNNI, f.ASIMDDP = false, false, false
	return f
}

// TestQuantizeRoundsTheProduct: quantize rounds v·inv to f32 before rounding
// to an integer, on every CPU. Where Go fuses the product with the add
// (arm64), a product whose f32 rounding is a tie while the exact one is not
// came out as the other integer; these are such products.
func TestQuantizeRoundsTheProduct(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	found := 0
	for found < 1000 {
		// Aim v·inv at a half: the f32 product is often the half itself.
		inv := float32(0.5 + rng.Float64()*1.5)
		v := float32((float64(rng.IntN(253)-126) + 0.5) / float64(inv))
		p := float32(v * inv)
		exact := float64(v) * float64(inv)
		if math.Abs(float64(p)) >= 127 || p-float32(math.Trunc(float64(p))) != 0.5*float32(math.Copysign(1, float64(p))) || exact == float64(p) {
			continue
		}
		found++
		if got, want := quantize(v, inv), int32(math.RoundToEven(float64(p))); got != want {
			t.Fatalf("quantize(%g, %g) = %d, want %d: the product %g (exactly %g) was not rounded on its own", v, inv, got, want, p, exact)
		}
	}
}
