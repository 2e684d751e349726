package attn

import (
	"fmt"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/ops"
)

// Mode is the arithmetic attention runs over a bf16 cache. An f32 or int8
// cache always takes ModeF32.
type Mode uint8

const (
	// ModeF32 widens the bf16 K/V to f32 and computes scores and the V sum
	// by f32 FMA.
	ModeF32 Mode = iota
	// ModeBF16 computes q·k and Σ p·v by VDPBF16PS pairs with f32
	// accumulators, reading the bf16 K and V in place: each query (scale
	// folded in) as the sum of two bf16 (high and low part: 16 significant
	// bits, where one bf16 alone failed two alignment cases), each tile's
	// probabilities rounded to bf16; the online softmax stays f32. This is
	// GPU flash attention's arithmetic (bf16 operands, f32 accumulators, P
	// rounded before P·V) with a more exact q. It needs head_dim % 16 == 0;
	// other head sizes take ModeF32.
	ModeBF16
)

func (m Mode) String() string {
	switch m {
	case ModeF32:
		return "f32"
	case ModeBF16:
		return "bf16"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// ParseMode reads "f32" or "bf16".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "f32":
		return ModeF32, nil
	case "bf16":
		return ModeBF16, nil
	}
	return 0, fmt.Errorf("attention kernel %q: want f32 or bf16", s)
}

// ModeFor is the mode of the attention kernel path p (kernels.PathFor(
// kernels.Attention), chosen by kernels/tune): bf16 where VDPBF16PS is the
// path, f32 below it.
func ModeFor(p kernels.Path) Mode {
	if p.RoundsToBF16() {
		return ModeBF16
	}
	return ModeF32
}

// roundQuery writes x = q·scale as two bf16 rows into qb [2·len(q)]: the
// high part h = bf16(x) (nearest even, as the cache rounds K/V), then the
// low part bf16(x − h); tmp is scratch of 2·len(q). x − h is exact in f32,
// so h + lo is x to 2⁻¹⁷ relative. The scale is folded in first: a score
// is then the VDPBF16PS sum itself, one multiply fewer per score (for
// head_dim 64 and 256 the scale is a power of two and x is exact).
func roundQuery(o *ops.Kernels, qb []uint16, q, tmp []float32, scale float32) {
	hd := len(q)
	x, h := tmp[:hd], tmp[hd:2*hd]
	for d, v := range q {
		x[d] = v * scale
	}
	o.ToBF16(qb[:hd], x)
	o.ToF32(h, qb[:hd])
	for d := range x {
		x[d] -= h[d]
	}
	o.ToBF16(qb[hd:2*hd], x)
}

// pair is the bf16 pair (x[i], x[i+1]) as one VDPBF16PS lane reads it: the
// even element in the low half.
func pair(x []uint16, i int) uint32 { return uint32(x[i]) | uint32(x[i+1])<<16 }

// fold16 sums 16 lanes in the SIMD kernels' tree: (i, i+8), (i, i+4),
// (i, i+2), (i, i+1).
func fold16(l *[16]float32) float32 {
	for w := 8; w >= 1; w /= 2 {
		for i := range w {
			l[i] += l[i+w]
		}
	}
	return l[0]
}

// tileBF16Go is the definition of ModeBF16 (the assembly gives its bits):
// one online-softmax step of one query over n cached positions, with k and
// v the n bf16 rows of the tile and qb the query's high and low rows.
//
//   - score t: 16 f32 lanes, lane l accumulating, for each 32-dim chunk c
//     in order, the VDPBF16PS of the pairs (32c+2l, 32c+2l+1) of k_t with
//     those of the high part, then of the low part (zero pairs past
//     head_dim, where it is an odd multiple of 16); the lanes folded by
//     fold16 (no scale: it is in qb);
//   - m' = max(m, scores), corr = Exp32(m − m'), p_t = Exp32(s_t − m');
//     l' = l·corr + fold16 of the lane sums (lane t mod 16, t in order);
//   - acc = acc·corr, then for each position pair (2j, 2j+1) in order one
//     VDPBF16PS of (p_2j, p_2j+1) rounded to bf16 with (v_2j[d], v_2j+1[d]);
//     an odd n pads the last pair with zeros.
func tileBF16Go(ml, acc []float32, qb, k, v []uint16, s []float32, n int) {
	hd := len(qb) / 2
	qh, ql := qb[:hd], qb[hd:]
	for t := range n {
		kt := k[t*hd : (t+1)*hd]
		var lane [16]float32
		for c := 0; c < hd; c += 32 {
			for l := range lane {
				var h, lo, b uint32
				if i := c + 2*l; i < hd {
					h, lo, b = pair(qh, i), pair(ql, i), pair(kt, i)
				}
				lane[l] = ops.DotBF16(ops.DotBF16(lane[l], h, b), lo, b)
			}
		}
		s[t] = fold16(&lane)
	}
	m := ml[0]
	for _, x := range s[:n] {
		m = max(m, x)
	}
	corr := ops.Exp32(ml[0] - m)
	var lane [16]float32
	for t := range n {
		s[t] = ops.Exp32(s[t] - m)
		lane[t%16] += s[t]
	}
	ml[0], ml[1] = m, float32(ml[1]*corr)+fold16(&lane)
	for d := range acc {
		acc[d] *= corr
	}
	for t := 0; t < n; t += 2 {
		p := uint32(ops.F32ToBF16(s[t]))
		a := v[t*hd : (t+1)*hd]
		var b []uint16 // row t+1, if any
		if t+1 < n {
			p |= uint32(ops.F32ToBF16(s[t+1])) << 16
			b = v[(t+1)*hd : (t+2)*hd]
		}
		for d := range acc {
			x := uint32(a[d])
			if b != nil {
				x |= uint32(b[d]) << 16
			}
			acc[d] = ops.DotBF16(acc[d], p, x)
		}
	}
}

// dotGo runs the pending queries of w one by one through tileBF16Go over
// the n positions of the bf16 tile of c at element offset o.
func dotGo(w *scratch, c *Cache, o, n int) {
	hd := c.HeadDim
	k, v := c.K16[o:o+n*hd], c.V16[o:o+n*hd]
	for i := range w.np {
		p := &w.pend[i]
		tileBF16Go(p.ml, p.acc, p.qb, k, v, w.s[:Tile], n)
	}
	w.np = 0
}
