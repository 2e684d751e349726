package ops

import (
	"fmt"

	"github.com/ellm-dev/ellm/kernels"
)

// SiLUMul is the SwiGLU activation for rows laid out gate‖up: x is [T, 2I]
// and out is [T, I] with out = silu(gate) · up, silu(g) = g / (1 + e^-g).
func SiLUMul(out, x []float32, inter int) error {
	if inter <= 0 || len(x)%(2*inter) != 0 || len(out) != len(x)/2 {
		return fmt.Errorf("silu-mul: x has %d elements, out %d, want [T, 2·%d] and [T, %d]", len(x), len(out), inter, inter)
	}
	p := simd()
	for t := 0; t < len(out)/inter; t++ {
		xr := x[2*t*inter : 2*(t+1)*inter]
		siluMul(p, out[t*inter:(t+1)*inter], xr[:inter], xr[inter:])
	}
	return nil
}

func siluMul(p kernels.Path, out, gate, up []float32) {
	for i := siluMulSIMD(p, out, gate, up); i < len(gate); i++ {
		g := gate[i]
		out[i] = g / (1 + Exp32(-g)) * up[i]
	}
}

// Softmax replaces x by softmax(x) in f32: ExpSum(x, x, max(x)), then each
// element scaled by the reciprocal of the sum (as torch's CPU softmax does).
func Softmax(x []float32) {
	if len(x) == 0 {
		return
	}
	m := x[0]
	for _, v := range x[1:] {
		m = max(m, v)
	}
	inv := 1 / ExpSum(x, x, m)
	for i := range x {
		x[i] *= inv
	}
}

// ExpSum writes dst[i] = Exp32(src[i] − m) and returns the sum of the results,
// accumulated in the package's 16-lane order. dst may be src. It is the
// exponent step of softmax and of attention's online softmax.
func ExpSum(dst, src []float32, m float32) float32 {
	return expSum(simd(), dst[:len(src)], src, m)
}

func expSum(p kernels.Path, dst, src []float32, m float32) float32 {
	var acc [lanes]float32
	for i := expSumSIMD(p, &acc, dst, src, m); i < len(src); i++ {
		e := Exp32(src[i] - m)
		dst[i] = e
		acc[i%lanes] += e
	}
	return reduce16(&acc)
}
