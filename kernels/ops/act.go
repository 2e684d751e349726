package ops

// SiLUMul is the SwiGLU activation: out[i] = silu(gate[i])·up[i] with
// silu(g) = g / (1 + e^-g) = g / (1 + Exp32(-g)), in f32, for the len(gate)
// elements (out and up at least as long). out may be gate. kernels/gemm's
// SwiGLU runs it as its epilogue.
func (k *Kernels) SiLUMul(out, gate, up []float32) {
	out, up = out[:len(gate)], up[:len(gate)]
	i := k.lead16(len(gate))
	if i > 0 {
		k.asm.siluMul(&out[0], &gate[0], &up[0], i)
	}
	for ; i < len(gate); i++ {
		g := gate[i]
		out[i] = g / (1 + Exp32(-g)) * up[i]
	}
}

// Divide writes out[i] = x[i] / d, each a true division (not a multiply by
// 1/d, which rounds twice): attention's normalisation of its accumulators
// by the softmax sum. out may be x.
func (k *Kernels) Divide(out, x []float32, d float32) {
	out = out[:len(x)]
	i := k.lead16(len(x))
	if i > 0 {
		k.asm.divide(&out[0], &x[0], i, d)
	}
	for ; i < len(x); i++ {
		out[i] = x[i] / d
	}
}

// Softmax replaces x by softmax(x) in f32: ExpSum(x, x, max(x)), then each
// element scaled by the reciprocal of the sum (as torch's CPU softmax does).
func (k *Kernels) Softmax(x []float32) {
	if len(x) == 0 {
		return
	}
	m := x[0]
	for _, v := range x[1:] {
		m = max(m, v)
	}
	inv := 1 / k.ExpSum(x, x, m)
	for i := range x {
		x[i] *= inv
	}
}

// ExpSum writes dst[i] = Exp32(src[i] − m) and returns the sum of the results,
// accumulated in the package's 16-lane order. dst may be src. It is the
// exponent step of softmax and of attention's online softmax.
func (k *Kernels) ExpSum(dst, src []float32, m float32) float32 {
	dst = dst[:len(src)]
	var acc [lanes]float32
	i := k.lead16(len(src))
	if i > 0 {
		acc = k.asm.expSum(dst[:i], src[:i], m)
	}
	for ; i < len(src); i++ {
		e := Exp32(src[i] - m)
		dst[i] = e
		acc[i%lanes] += e
	}
	return reduce16(&acc)
}
