package fused

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// TestFMA32 holds FMA32 to the exact sum rounded by math/big, on random
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
		if got, want := FMA32(a, b, c), exact(a, b, c); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("FMA32(%g, %g, %g) = %g (%#x), exact %g (%#x)", a, b, c, got, math.Float32bits(got), want, math.Float32bits(want))
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
