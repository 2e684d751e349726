package gemm

import "math"

// The SwiGLU epilogue's SiLU, g/(1+e^-g), in f32. e^x is computed here
// rather than with math.Exp so that the AVX-512 version (silu_amd64.s) can
// give the same bits: Cody-Waite reduction and cephes' expf polynomial, every
// operation rounded to f32 on its own (no fused multiply-add), in this order.
var (
	log2e = math.Float32frombits(0x3fb8aa3b)
	magic = math.Float32frombits(0x4b400000) // 1.5·2^23: x+magic-magic rounds x to an integer
	ln2hi = math.Float32frombits(0x3f318000) // ln 2 = ln2hi + ln2lo, n·ln2hi exact for |n| ≤ 2^8
	ln2lo = math.Float32frombits(0xb95e8083)
	expC  = [6]float32{ // e^r ≈ 1 + r + r²·(c0 + c1·r + … + c5·r⁵) on |r| ≤ ln2/2
		math.Float32frombits(0x3f000000), math.Float32frombits(0x3e2aaaaa), math.Float32frombits(0x3d2aa9c1),
		math.Float32frombits(0x3c088908), math.Float32frombits(0x3ab743ce), math.Float32frombits(0x39506967),
	}
)

// expf is e^x for x clamped to [-87, 88], where the result is a normal f32.
func expf(x float32) float32 {
	x = min(max(x, -87), 88)
	n := float32(float32(x*log2e)+magic) - magic
	r := float32(x - float32(n*ln2hi))
	r = float32(r - float32(n*ln2lo))
	p := float32(float32(expC[5]*r) + expC[4])
	for i := 3; i >= 0; i-- {
		p = float32(float32(p*r) + expC[i])
	}
	p = float32(float32(p*float32(r*r))+r) + 1
	return p * math.Float32frombits(uint32(int32(n)+127)<<23)
}

// silu is g/(1+e^-g).
func silu(g float32) float32 { return g / (1 + expf(-g)) }

// siluMulFunc is an assembly siluMul for the first n elements, n a multiple of 16.
type siluMulFunc func(h, u *float32, n int)

// siluMul sets h[i] = silu(h[i])·u[i].
func siluMul(h, u []float32, simd siluMulFunc) {
	n := 0
	if simd != nil && len(h) >= 16 {
		n = len(h) &^ 15
		simd(&h[0], &u[0], n)
	}
	u = u[:len(h)]
	for i := n; i < len(h); i++ {
		h[i] = silu(h[i]) * u[i]
	}
}
