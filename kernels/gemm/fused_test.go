package gemm

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/threads"
)

// fma32 is a·b + c rounded once to f32, as FMA and FMLA compute it. The
// product of two f32 is exact in f64; the sum is rounded to odd in f64 (its
// error found exactly by TwoSum), and a sum rounded to odd with more than
// 24+1 bits rounds to f32 as the exact sum would.
func fma32(a, b, c float32) float32 {
	p, z := float64(a)*float64(b), float64(c)
	s := p + z
	if math.IsInf(s, 0) || math.IsNaN(s) {
		return float32(s)
	}
	v := s - p
	if e := (p - (s - v)) + (z - v); e != 0 {
		bits := math.Float64bits(s)
		if bits&1 == 0 {
			if (e > 0) == (s > 0) {
				bits++
			} else {
				bits--
			}
		}
		s = math.Float64frombits(bits)
	}
	return float32(s)
}

// TestFMA32 holds fma32 to the exact sum rounded by math/big, on random
// operands and on sums built to fall on, and just beside, an f32 tie.
func TestFMA32(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	exact := func(a, b, c float32) float32 {
		x := new(big.Float).SetPrec(200).SetFloat64(float64(a))
		x.Mul(x, new(big.Float).SetPrec(200).SetFloat64(float64(b)))
		x.Add(x, new(big.Float).SetPrec(200).SetFloat64(float64(c)))
		f, _ := x.Float32()
		return f
	}
	check := func(a, b, c float32) {
		if got, want := fma32(a, b, c), exact(a, b, c); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("fma32(%g, %g, %g) = %g (%#x), exact %g (%#x)", a, b, c, got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
	for range 200000 {
		a, b := float32(rng.NormFloat64()), float32(rng.NormFloat64())
		c := float32(rng.NormFloat64() * math.Exp2(float64(rng.IntN(60)-30)))
		check(a, b, c)
		// c + a·b a hair from a tie of c's ulp: a·b = h·(1 − i²·2⁻⁴⁶), h
		// a half ulp of c, where the sum rounded in f64 alone would land on
		// the tie and then round to even, the wrong way for an odd c.
		h := math.Float32frombits(math.Float32bits(c)&0xff800000) * 0x1p-24
		i := float32(1 + rng.IntN(1000))
		check(h*(1+i*0x1p-23), 1-i*0x1p-23, c)
		check(h, 1+i*0x1p-23, c)
		check(a, math.Float32frombits(1+uint32(rng.IntN(1<<23))), math.Float32frombits(uint32(rng.IntN(1<<23))))
	}
	check(0x1p-126, -0x1p-24, 0x1p-149) // a subnormal result
	check(0x1p127, 2, -0x1p127)         // the product beyond f32, the sum not
}

// fusedPairsF32 and fusedF32 are the arithmetic of the f32 kernels of every
// assembly path (AVX2, AVX-512 and NEON): genPairsF32 and genF32 with each
// product and its sum one fused multiply-add.
func fusedPairsF32(a *kargs) {
	x := unsafe.Slice((*float32)(a.x), 2*a.ks*a.r)
	for r := range a.r {
		for p := range a.p {
			w := unsafe.Slice((*uint32)(a.panel(p)), a.ks*panelWidth)
			var acc [panelWidth]float32
			for q := range a.ks {
				x0, x1 := x[2*(q*a.r+r)], x[2*(q*a.r+r)+1]
				for c, v := range w[q*panelWidth : q*panelWidth+panelWidth] {
					acc[c] = fma32(x0, even(v), acc[c])
					acc[c] = fma32(x1, odd(v), acc[c])
				}
			}
			a.out(r, p, &acc)
		}
	}
}

func fusedF32(a *kargs) {
	x := unsafe.Slice((*float32)(a.x), a.ks*a.r)
	for r := range a.r {
		for p := range a.p {
			w := unsafe.Slice((*float32)(a.panel(p)), a.ks*panelWidth)
			var acc [panelWidth]float32
			for k := range a.ks {
				for c, v := range w[k*panelWidth : k*panelWidth+panelWidth] {
					acc[c] = fma32(x[k*a.r+r], v, acc[c])
				}
			}
			a.out(r, p, &acc)
		}
	}
}

// TestFusedKernelsMatchDefinition: the f32 products of every assembly path
// (bf16 weights widened, f32 weights) are the same bits as fusedPairsF32 and
// fusedF32 (NaN for NaN), so an output is the same on an x86 CPU and an
// arm64 one: every tile shape, both sides of the widening threshold, odd K,
// MatMul and MatMulAdd, with subnormal, overflowing, infinite and NaN values.
func TestFusedKernelsMatchDefinition(t *testing.T) {
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
				weights := map[string]*Weight{"f32": FromF32(pr.wf, pr.n, pr.k)}
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
				}
			}
		}
	})
}
