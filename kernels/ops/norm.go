package ops

import (
	"fmt"
	"math"
)

// RMSNorm normalizes each row of x (rows of len(w) elements) into out:
// out = x / sqrt(mean(x²) + eps) * w, computed as Hugging Face's Qwen3RMSNorm
// does in f32 (x · rsqrt(variance + eps), then · w). out may be x.
// Qwen3's per-head q_norm / k_norm is this call with w of head_dim elements
// over [rows·heads, head_dim]: see HeadRMSNorm.
func (k *Kernels) RMSNorm(out, x, w []float32, eps float32) error {
	n := len(w)
	if err := checkRows("rmsnorm", len(out), len(x), n); err != nil {
		return err
	}
	for r := 0; r < len(x); r += n {
		xr, or := x[r:r+n], out[r:r+n]
		k.normRow(or, xr, w, k.sumSquares(xr), eps)
	}
	return nil
}

// HeadRMSNorm is Qwen3's q_norm / k_norm: RMSNorm over each head_dim-long
// head vector of x ([rows, heads, len(w)]), in place.
func (k *Kernels) HeadRMSNorm(x, w []float32, eps float32) error { return k.RMSNorm(x, x, w, eps) }

// AddRMSNorm is the fused residual step between sublayers:
// residual += x; out = RMSNorm(residual). out may be x.
func (k *Kernels) AddRMSNorm(out, residual, x, w []float32, eps float32) error {
	n := len(w)
	if err := checkRows("add-rmsnorm", len(out), len(x), n); err != nil {
		return err
	}
	if len(residual) != len(x) {
		return fmt.Errorf("add-rmsnorm: residual has %d elements, x has %d", len(residual), len(x))
	}
	for r := 0; r < len(x); r += n {
		res := residual[r : r+n]
		k.normRow(out[r:r+n], res, w, k.addSumSquares(res, x[r:r+n]), eps)
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
func (k *Kernels) normRow(out, x, w []float32, ss, eps float32) {
	variance := ss / float32(len(x))
	r := float32(1 / math.Sqrt(float64(variance+eps)))
	k.scaleMul(out, x, w, r)
}

// sumSquares accumulates x[i]² into lane i%16 (the product rounded to f32
// before the add) and folds the lanes; SIMD paths take the leading multiple
// of 16 elements.
func (k *Kernels) sumSquares(x []float32) float32 {
	var acc [lanes]float32
	i := k.lead16(len(x))
	if i > 0 {
		acc = k.asm.sumSq(x[:i])
	}
	for ; i < len(x); i++ {
		acc[i%lanes] += float32(x[i] * x[i])
	}
	return reduce16(&acc)
}

// addSumSquares does residual += x and returns the sum of squares of the
// new residual in sumSquares' order.
func (k *Kernels) addSumSquares(residual, x []float32) float32 {
	var acc [lanes]float32
	i := k.lead16(len(residual))
	if i > 0 {
		acc = k.asm.addSumSq(residual[:i], x[:i])
	}
	for ; i < len(residual); i++ {
		v := residual[i] + x[i]
		residual[i] = v
		acc[i%lanes] += float32(v * v)
	}
	return reduce16(&acc)
}

func (k *Kernels) scaleMul(out, x, w []float32, r float32) {
	i := k.lead16(len(out))
	if i > 0 {
		k.asm.scaleMul(&out[0], &x[:i][0], &w[:i][0], i, r)
	}
	for ; i < len(out); i++ {
		out[i] = float32(x[i]*r) * w[i]
	}
}
