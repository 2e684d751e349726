package ops

import (
	"fmt"
	"math"

	"github.com/ellm-dev/ellm/kernels"
)

// RMSNorm normalizes each row of x (rows of len(w) elements) into out:
// out = x / sqrt(mean(x²) + eps) * w, computed as Hugging Face's Qwen3RMSNorm
// does in f32 (x · rsqrt(variance + eps), then · w). out may be x.
// Qwen3's per-head q_norm / k_norm is this call with w of head_dim elements
// over [rows·heads, head_dim]: see HeadRMSNorm.
func RMSNorm(out, x, w []float32, eps float32) error {
	n := len(w)
	if err := checkRows("rmsnorm", len(out), len(x), n); err != nil {
		return err
	}
	p := simd()
	for r := 0; r < len(x); r += n {
		xr, or := x[r:r+n], out[r:r+n]
		normRow(p, or, xr, w, sumSquares(p, xr), eps)
	}
	return nil
}

// HeadRMSNorm is Qwen3's q_norm / k_norm: RMSNorm over each head_dim-long
// head vector of x ([rows, heads, len(w)]), in place.
func HeadRMSNorm(x, w []float32, eps float32) error { return RMSNorm(x, x, w, eps) }

// AddRMSNorm is the fused residual step between sublayers:
// residual += x; out = RMSNorm(residual). out may be x.
func AddRMSNorm(out, residual, x, w []float32, eps float32) error {
	n := len(w)
	if err := checkRows("add-rmsnorm", len(out), len(x), n); err != nil {
		return err
	}
	if len(residual) != len(x) {
		return fmt.Errorf("add-rmsnorm: residual has %d elements, x has %d", len(residual), len(x))
	}
	p := simd()
	for r := 0; r < len(x); r += n {
		res := residual[r : r+n]
		normRow(p, out[r:r+n], res, w, addSumSquares(p, res, x[r:r+n]), eps)
	}
	return nil
}

func checkRows(op string, nout, nx, n int) error {
	if n == 0 || nx%n != 0 || nout != nx {
		return fmt.Errorf("%s: x has %d elements, out %d, want equal multiples of the weight's %d", op, nx, nout, n)
	}
	return nil
}

// normRow writes out = (x · rsqrt(ss/n + eps)) · w.
func normRow(p kernels.Path, out, x, w []float32, ss, eps float32) {
	variance := ss / float32(len(x))
	r := float32(1 / math.Sqrt(float64(variance+eps)))
	scaleMul(p, out, x, w, r)
}

// sumSquares accumulates x[i]² into lane i%16 (the product rounded to f32
// before the add) and folds the lanes; SIMD paths take the leading multiple
// of 16 elements.
func sumSquares(p kernels.Path, x []float32) float32 {
	var acc [lanes]float32
	for i := sumSqSIMD(p, &acc, x); i < len(x); i++ {
		acc[i%lanes] += float32(x[i] * x[i])
	}
	return reduce16(&acc)
}

// addSumSquares does residual += x and returns the sum of squares of the
// new residual in sumSquares' order.
func addSumSquares(p kernels.Path, residual, x []float32) float32 {
	var acc [lanes]float32
	for i := addSumSqSIMD(p, &acc, residual, x); i < len(residual); i++ {
		v := residual[i] + x[i]
		residual[i] = v
		acc[i%lanes] += float32(v * v)
	}
	return reduce16(&acc)
}

func scaleMul(p kernels.Path, out, x, w []float32, r float32) {
	for i := scaleMulSIMD(p, out, x, w, r); i < len(out); i++ {
		out[i] = float32(x[i]*r) * w[i]
	}
}
