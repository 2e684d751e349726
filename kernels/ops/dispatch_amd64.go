//go:build amd64 && !purego

package ops

import "github.com/ellm-dev/ellm/kernels"

// asmFor is path p's assembly: the avx512 code for avx512 and avx512bf16
// (this package has no bf16 arithmetic), the avx2 code for avx2.
func asmFor(p kernels.Path) *asmFuncs {
	switch {
	case p >= kernels.AVX512:
		return &asm512
	case p == kernels.AVX2:
		return &asm256
	}
	return nil
}

var asm512 = asmFuncs{
	sumSq:    func(x []float32) (acc [lanes]float32) { sumSq512(&acc, &x[0], len(x)); return },
	addSumSq: func(res, x []float32) (acc [lanes]float32) { addSumSq512(&acc, &res[0], &x[0], len(res)); return },
	expSum: func(dst, src []float32, m float32) (acc [lanes]float32) {
		expSum512(&acc, &dst[0], &src[0], len(src), m)
		return
	},
	scaleMul: scaleMul512, rotate: rotate512, rotateBy: 16,
	siluMul: siluMul512, divide: divide512, toF32: toF32_512, toBF16: toBF16_512, max: max512, findEq: findEq512,
}

var asm256 = asmFuncs{
	sumSq:    func(x []float32) (acc [lanes]float32) { sumSq256(&acc, &x[0], len(x)); return },
	addSumSq: func(res, x []float32) (acc [lanes]float32) { addSumSq256(&acc, &res[0], &x[0], len(res)); return },
	expSum: func(dst, src []float32, m float32) (acc [lanes]float32) {
		expSum256(&acc, &dst[0], &src[0], len(src), m)
		return
	},
	scaleMul: scaleMul256, rotate: rotate256, rotateBy: 8,
	siluMul: siluMul256, divide: divide256, toF32: toF32_256, toBF16: toBF16_256, max: max256, findEq: findEq256,
}

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
func divide512(out, x *float32, n int, d float32)

//go:noescape
func divide256(out, x *float32, n int, d float32)

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
