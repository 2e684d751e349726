package ops

import "math"

//go:generate go run ../internal/asmgen exp_amd64.h exp_const.go

// Exp32 is ellm's one f32 exponential: softmax (ops, the sampler), the
// online softmax of attention and SiLU (the SwiGLU epilogue of gemm) all use
// it, in Go or as the EXP512 / EXP256 assembly macros of exp_amd64.h, which
// give its bits. It is Cephes expf: range reduction by ln 2 in two parts
// (Cody-Waite), a degree-5 polynomial, scaling by 2^n, evaluated with
// separate multiplies and adds so that the assembly reproduces it bit for bit.
//
// Error against math.Exp: a relative error of at most 8.2e-8, under 1 ulp,
// for x in [-87, 88] (measured on every f32 of the range; TestExp32Accuracy
// checks a sweep of it). Clamping, the one rule every version
// follows: below -87 (and for NaN) it returns 0, the true value being under
// 1.7e-38; above 88 it returns e^88. The SIMD versions also clamp those lanes
// to -87 before computing, so that no lane forms a subnormal or NaN
// intermediate (each costs a ~100-cycle microcode assist); zeroing them
// afterwards hides the clamp. The constants are generated with the assembly's
// from one table (kernels/internal/asmgen).
func Exp32(x float32) float32 {
	if !(x >= expLo) {
		return 0
	}
	x = min(x, expHi)
	n := float32(math.RoundToEven(float64(float32(x * log2e))))
	r := x - float32(n*ln2Hi)
	r -= float32(n * ln2Lo)
	p := float32(expP0*r) + expP1
	p = float32(p*r) + expP2
	p = float32(p*r) + expP3
	p = float32(p*r) + expP4
	p = float32(p*r) + expP5
	y := float32(float32(p*float32(r*r))+r) + 1
	return y * math.Float32frombits(uint32(int32(n)+127)<<23)
}
