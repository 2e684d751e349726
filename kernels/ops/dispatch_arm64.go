//go:build !purego

package ops

import "github.com/ellm-dev/ellm/kernels"

// asmFor is path p's assembly: the NEON code for neon (ops_arm64.s), each
// function bit for bit its Go loop, four lanes a register, the 16-lane
// sums in four registers.
func asmFor(p kernels.Path) *asmFuncs {
	if p != kernels.NEON {
		return nil
	}
	return &asmNEON
}

var asmNEON = asmFuncs{
	sumSq:    func(x []float32) (acc [lanes]float32) { sumSqNEON(&acc, &x[0], len(x)); return },
	addSumSq: func(res, x []float32) (acc [lanes]float32) { addSumSqNEON(&acc, &res[0], &x[0], len(res)); return },
	expSum: func(dst, src []float32, m float32) (acc [lanes]float32) {
		expSumNEON(&acc, &dst[0], &src[0], len(src), m)
		return
	},
	scaleMul: scaleMulNEON, rotate: rotateNEON, rotateBy: 4,
	siluMul: siluMulNEON, divide: divideNEON, toF32: toF32NEON, toBF16: toBF16NEON, max: maxNEON, findEq: findEqNEON,
}

// expConsts are Exp32's constants as the NEON exponential (ops_arm64.s,
// EXP) loads them, in this order.
var expConsts = [...]float32{expLo, expHi, log2e, ln2Hi, ln2Lo, expP0, expP1, expP2, expP3, expP4, expP5, 1}

//go:noescape
func sumSqNEON(acc *[lanes]float32, x *float32, n int)

//go:noescape
func addSumSqNEON(acc *[lanes]float32, res, x *float32, n int)

//go:noescape
func scaleMulNEON(out, x, w *float32, n int, r float32)

//go:noescape
func rotateNEON(x, cs *float32, h, heads int)

//go:noescape
func siluMulNEON(out, gate, up *float32, n int)

//go:noescape
func divideNEON(out, x *float32, n int, d float32)

//go:noescape
func expSumNEON(acc *[lanes]float32, dst, src *float32, n int, m float32)

//go:noescape
func toF32NEON(dst *float32, src *uint16, n int)

//go:noescape
func toBF16NEON(dst *uint16, src *float32, n int)

//go:noescape
func maxNEON(x *float32, n int) float32

//go:noescape
func findEqNEON(x *float32, n int, v float32) int
