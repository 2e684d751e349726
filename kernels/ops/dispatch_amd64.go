//go:build amd64 && !purego

package ops

import (
	"math"

	"github.com/ellm-dev/ellm/kernels"
)

// Each SIMD hook runs the assembly for the leading multiple of 16 elements
// and returns how many it handled; the Go loop that called it finishes the
// tail in the same lane order. The assembly is in ops_amd64.s, with the Go
// loop it repeats named in each function's comment.

const haveAsm = true

//go:noescape
func sumSq512(acc *[lanes]float32, x *float32, n int)

//go:noescape
func sumSq256(acc *[lanes]float32, x *float32, n int)

//go:noescape
func addSumSq512(acc *[lanes]float32, res, x *float32, n int)

//go:noescape
func addSumSq256(acc *[lanes]float32, res, x *float32, n int)

//go:noescape
func scaleMul512(out, x, w *float32, n int, r float32)

//go:noescape
func scaleMul256(out, x, w *float32, n int, r float32)

//go:noescape
func rotate512(x, cs *float32, h, heads int)

//go:noescape
func rotate256(x, cs *float32, h, heads int)

//go:noescape
func siluMul512(out, gate, up *float32, n int)

//go:noescape
func siluMul256(out, gate, up *float32, n int)

//go:noescape
func expSum512(acc *[lanes]float32, dst, src *float32, n int, m float32)

//go:noescape
func expSum256(acc *[lanes]float32, dst, src *float32, n int, m float32)

//go:noescape
func toF32_512(dst *float32, src *uint16, n int)

//go:noescape
func toF32_256(dst *float32, src *uint16, n int)

//go:noescape
func toBF16_512(dst *uint16, src *float32, n int)

//go:noescape
func toBF16_256(dst *uint16, src *float32, n int)

//go:noescape
func max512(x *float32, n int) float32

//go:noescape
func max256(x *float32, n int) float32

//go:noescape
func findEq512(x *float32, n int, v float32) int

//go:noescape
func findEq256(x *float32, n int, v float32) int

func sumSqSIMD(p kernels.Path, acc *[lanes]float32, x []float32) int {
	n := len(x) &^ 15
	switch {
	case n == 0:
	case p == kernels.AVX512:
		sumSq512(acc, &x[0], n)
	case p == kernels.AVX2:
		sumSq256(acc, &x[0], n)
	default:
		return 0
	}
	return n
}

func addSumSqSIMD(p kernels.Path, acc *[lanes]float32, res, x []float32) int {
	n := len(res) &^ 15
	switch {
	case n == 0:
	case p == kernels.AVX512:
		addSumSq512(acc, &res[0], &x[:n][0], n)
	case p == kernels.AVX2:
		addSumSq256(acc, &res[0], &x[:n][0], n)
	default:
		return 0
	}
	return n
}

func scaleMulSIMD(p kernels.Path, out, x, w []float32, r float32) int {
	n := len(out) &^ 15
	switch {
	case n == 0:
	case p == kernels.AVX512:
		scaleMul512(&out[0], &x[:n][0], &w[:n][0], n, r)
	case p == kernels.AVX2:
		scaleMul256(&out[0], &x[:n][0], &w[:n][0], n, r)
	default:
		return 0
	}
	return n
}

func rotateSIMD(p kernels.Path, x, cs []float32) bool {
	h := len(cs) / 2
	switch {
	case p == kernels.AVX512 && h%16 == 0:
		rotate512(&x[0], &cs[0], h, len(x)/(2*h))
	case p == kernels.AVX2 && h%8 == 0:
		rotate256(&x[0], &cs[0], h, len(x)/(2*h))
	default:
		return false
	}
	return true
}

func siluMulSIMD(p kernels.Path, out, gate, up []float32) int {
	n := len(gate) &^ 15
	switch {
	case n == 0:
	case p == kernels.AVX512:
		siluMul512(&out[:n][0], &gate[0], &up[:n][0], n)
	case p == kernels.AVX2:
		siluMul256(&out[:n][0], &gate[0], &up[:n][0], n)
	default:
		return 0
	}
	return n
}

func expSumSIMD(p kernels.Path, acc *[lanes]float32, dst, src []float32, m float32) int {
	n := len(src) &^ 15
	switch {
	case n == 0:
	case p == kernels.AVX512:
		expSum512(acc, &dst[:n][0], &src[0], n, m)
	case p == kernels.AVX2:
		expSum256(acc, &dst[:n][0], &src[0], n, m)
	default:
		return 0
	}
	return n
}

func toF32SIMD(p kernels.Path, dst []float32, src []uint16) int {
	n := len(src) &^ 15
	switch {
	case n == 0:
	case p == kernels.AVX512:
		toF32_512(&dst[:n][0], &src[0], n)
	case p == kernels.AVX2:
		toF32_256(&dst[:n][0], &src[0], n)
	default:
		return 0
	}
	return n
}

func toBF16SIMD(p kernels.Path, dst []uint16, src []float32) int {
	n := len(src) &^ 15
	switch {
	case n == 0:
	case p == kernels.AVX512:
		toBF16_512(&dst[:n][0], &src[0], n)
	case p == kernels.AVX2:
		toBF16_256(&dst[:n][0], &src[0], n)
	default:
		return 0
	}
	return n
}

// argmaxSIMD finds the largest non-NaN value, then its first index: the
// same answer as argmaxGo (which returns 0 when every element is NaN).
func argmaxSIMD(p kernels.Path, x []float32) (int, bool) {
	if p != kernels.AVX512 && p != kernels.AVX2 {
		return 0, false
	}
	n := len(x) &^ 15
	m := float32(math.Inf(-1))
	if n > 0 {
		if p == kernels.AVX512 {
			m = max512(&x[0], n)
		} else {
			m = max256(&x[0], n)
		}
	}
	for _, v := range x[n:] {
		if v > m {
			m = v
		}
	}
	if n > 0 {
		var i int
		if p == kernels.AVX512 {
			i = findEq512(&x[0], n, m)
		} else {
			i = findEq256(&x[0], n, m)
		}
		if i >= 0 {
			return i, true
		}
	}
	for i, v := range x[n:] {
		if v == m {
			return n + i, true
		}
	}
	return 0, true
}
