// Package fused is the arithmetic of a fused multiply-add (FMA, FMLA) in
// Go, for the tests that hold the kernels of every path that fuses them
// (gemm, attn) to their definitions: Go's own a*b + c may or may not fuse,
// depending on the architecture and the compiler.
package fused

import "math"

// MulAdd is acc + x·w rounded once: FMA32 in the order the kernels'
// definitions take their multiply-add (gemm's pairsF32With, attn's tileWith).
func MulAdd(acc, x, w float32) float32 { return FMA32(x, w, acc) }

// FMA32 is a·b + c rounded once to f32, as FMA and FMLA compute it. The
// product of two f32 is exact in f64; the sum is rounded to odd in f64 (its
// error found exactly by TwoSum), and a sum rounded to odd with more than
// 24+1 bits rounds to f32 as the exact sum would.
func FMA32(a, b, c float32) float32 {
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
