package attn

import (
	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/ops"
)

// kernelSet is the kernels an Attention runs, bound by New for the active
// path and its head size: the Go kernels, with the path's assembly in their
// place where it has some (simdKernels). group and direct are nil where the
// path has no grouped or in-place kernels. dot runs the pending queries of
// a ModeBF16 block over a bf16 tile in place (dotGo, or the path's VDPBF16PS
// kernels with the same bits), pairV the V tile it can read instead.
type kernelSet struct {
	path  kernels.Path
	ops   *ops.Kernels
	dot   func(w *scratch, c *Cache, o, n int)
	pairV func(dst []float32, src []uint16, rows, hd int) // nil: dot reads V in place
	// prefetch requests a bf16 span into L2 without waiting for it (nil: none)
	prefetch func(p []uint16)
	roundQ   func(qb []uint16, q, tmp []float32, scale float32) // roundQuery's bits
	// dotRefs writes the block's nq queries into w.allRefs, dotAll runs
	// count of them from i0 over a tile as dot would and returns how many
	// it took (nil: dot takes them all)
	dotRefs  func(w *scratch, nq int)
	dotAll   func(w *scratch, c *Cache, o, n, i0, count int) int
	tile     func(ml, acc, q, k, v, s []float32, n int, scale float32)
	group    func(w *scratch, i int, k, v []float32, n, hd int, scale float32) int
	direct   func(w *scratch, c *Cache, o, n int, scale float32) bool
	widenK   widenFunc
	widenV   widenFunc
	dequantK dequantFunc
	dequantV dequantFunc
}

// widenFunc returns a K or V tile of rows positions as f32, from a bf16
// (src16) or f32 (src32) cache, widened into dst where needed.
type widenFunc func(dst []float32, src16 []uint16, src32 []float32, rows, hd int) []float32

// dequantFunc returns a K or V tile of rows int8 positions as f32, in dst.
type dequantFunc func(dst []float32, src []int8, scale []float32, rows, hd int) []float32

// bindKernels is the kernel set of path p for head size hd.
func bindKernels(p kernels.Path, hd int) kernelSet {
	o := ops.For(p)
	s := kernelSet{
		path: p,
		ops:  o,
		dot:  dotGo,
		roundQ: func(qb []uint16, q, tmp []float32, scale float32) {
			roundQuery(o, qb, q, tmp, scale)
		},
		tile: func(ml, acc, q, k, v, s []float32, n int, scale float32) { tileGo(o, ml, acc, q, k, v, s, n, scale) },
		widenK: func(dst []float32, src16 []uint16, src32 []float32, rows, hd int) []float32 {
			if src32 != nil {
				return src32[:rows*hd]
			}
			o.ToF32(dst[:rows*hd], src16[:rows*hd])
			return dst[:rows*hd]
		},
		dequantK: func(dst []float32, src []int8, scale []float32, rows, hd int) []float32 {
			dequantGo(dst, src, scale, rows, hd)
			return dst[:rows*hd]
		},
	}
	s.widenV, s.dequantV = s.widenK, s.dequantK
	simdKernels(&s, p, hd)
	return s
}

// tileGo is one online-softmax step of one query head over n cached positions
// (rows of k and v): scores s = scale·q·k, new max m' = max(m, s), rescale
// of the running sum l and accumulator acc by e^(m−m'), then l += Σ e^(s−m')
// and acc += Σ e^(s−m')·v. ml holds (m, l); s is scratch of ≥ n.
//
// Each score is one sum over the head's dimensions in order, and each
// output one sum over the positions in order; the loops only interleave
// four of them (scores4, values4), each of which is otherwise a chain of
// dependent adds.
func tileGo(o *ops.Kernels, ml, acc, q, k, v, s []float32, n int, scale float32) {
	hd := len(q)
	t := 0
	for ; t+4 <= n; t += 4 {
		s0, s1, s2, s3 := scores4(q, k[t*hd:(t+4)*hd])
		s[t], s[t+1], s[t+2], s[t+3] = s0*scale, s1*scale, s2*scale, s3*scale
	}
	for ; t < n; t++ {
		kt := k[t*hd : (t+1)*hd]
		var dot float32
		for d, x := range q {
			dot += float32(x * kt[d])
		}
		s[t] = dot * scale
	}
	rescale(o, ml, acc, s[:n])
	d := 0
	for ; d+4 <= hd; d += 4 {
		values4((*[4]float32)(acc[d:]), s[:n], v[d:], hd)
	}
	for ; d < hd; d++ {
		for t, p := range s[:n] {
			acc[d] += float32(p * v[t*hd+d])
		}
	}
}

// rescale takes a tile's scores s into the running softmax state (m, l) =
// ml: the new max m', l·e^(m−m') + Σ e^(s−m') (s becomes the e^(s−m')), and
// acc scaled by e^(m−m').
func rescale(o *ops.Kernels, ml, acc, s []float32) {
	m := ml[0]
	for _, x := range s {
		m = max(m, x)
	}
	corr := ops.Exp32(ml[0] - m)
	sum := o.ExpSum(s, s, m)
	ml[0], ml[1] = m, float32(ml[1]*corr)+sum
	for d := range acc {
		acc[d] *= corr
	}
}

// scores4 is q·k for four rows of k, each summed in order.
func scores4(q, k []float32) (s0, s1, s2, s3 float32) {
	hd := len(q)
	k0, k1, k2, k3 := k[:hd], k[hd:2*hd], k[2*hd:3*hd], k[3*hd:4*hd]
	for d, x := range q {
		s0 += float32(x * k0[d])
		s1 += float32(x * k1[d])
		s2 += float32(x * k2[d])
		s3 += float32(x * k3[d])
	}
	return
}

// values4 adds Σ p[t]·v[t·hd + j] over the positions in order to acc[j],
// j < 4.
func values4(acc *[4]float32, p, v []float32, hd int) {
	a0, a1, a2, a3 := acc[0], acc[1], acc[2], acc[3]
	for t, pt := range p {
		vt := v[t*hd : t*hd+4]
		a0 += float32(pt * vt[0])
		a1 += float32(pt * vt[1])
		a2 += float32(pt * vt[2])
		a3 += float32(pt * vt[3])
	}
	*acc = [4]float32{a0, a1, a2, a3}
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
