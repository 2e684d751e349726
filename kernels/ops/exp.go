package ops

import "math"

// Exp32 is the package's f32 exponential (Cephes expf: range reduction by
// ln 2 in two parts, degree-7 polynomial, scaling by 2^n), evaluated with
// separate multiplies and adds so that the assembly versions reproduce it bit
// for bit. Its relative error is 8e-8 at most (~1.3 ulp; TestExp32Accuracy) for
// x in [-87, 88]; below -87 it returns 0 (the true value is under 1.7e-38),
// above 88 it returns e^88, and for NaN 0, as the SIMD versions do (they zero
// every lane that is not ≥ -87). The SIMD versions also clamp those lanes to
// -87 before computing, so that no lane forms a subnormal or NaN
// intermediate (each costs a ~100-cycle microcode assist); the zeroing hides
// the clamp.
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

const (
	expLo = -87.0
	expHi = 88.0
	log2e = 1.44269504088896341
	ln2Hi = 0.693359375 // few mantissa bits: n·ln2Hi is exact for |n| ≤ 128
	ln2Lo = -2.12194440e-4
	expP0 = 1.9875691500e-4
	expP1 = 1.3981999507e-3
	expP2 = 8.3334519073e-3
	expP3 = 4.1665795894e-2
	expP4 = 1.6666665459e-1
	expP5 = 5.0000001201e-1
)
