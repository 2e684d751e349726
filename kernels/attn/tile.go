package attn

import "github.com/ellm-dev/ellm/kernels/ops"

// tileGo is one online-softmax step of one query head over n cached positions
// (rows of k and v): scores s = scale·q·k, new max m' = max(m, s), rescale
// of the running sum l and accumulator acc by e^(m−m'), then l += Σ e^(s−m')
// and acc += Σ e^(s−m')·v. ml holds (m, l); s is scratch of ≥ n.
func tileGo(ml, acc, q, k, v, s []float32, n int, scale float32) {
	hd := len(q)
	for t := range n {
		kt := k[t*hd : (t+1)*hd]
		var dot float32
		for d, x := range q {
			dot += float32(x * kt[d])
		}
		s[t] = dot * scale
	}
	m := ml[0]
	for _, x := range s[:n] {
		m = max(m, x)
	}
	corr := ops.Exp32(ml[0] - m)
	sum := ops.ExpSum(s[:n], s[:n], m)
	ml[0], ml[1] = m, float32(ml[1]*corr)+sum
	for d := range acc {
		acc[d] *= corr
	}
	for t, p := range s[:n] {
		vt := v[t*hd : (t+1)*hd]
		for d := range acc {
			acc[d] += float32(p * vt[d])
		}
	}
}

// dequantGo writes rows int8 rows of hd values as f32 rows: dst[t][d] =
// src[t][d]·scale[t], one rounding, as the SIMD dequantizers compute it.
func dequantGo(dst []float32, src []int8, scale []float32, rows, hd int) {
	for t := range rows {
		s, d, q := scale[t], dst[t*hd:(t+1)*hd], src[t*hd:(t+1)*hd]
		for i, x := range q {
			d[i] = float32(x) * s
		}
	}
}
