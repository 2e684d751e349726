package gemm

import (
	"fmt"
	"math"
)

// Screen is an int8 copy of a bf16 weight that bounds its products: for a
// row x, Interval gives each output of MatMul on the bf16 weight an
// interval that holds it, from an int8 product that reads half the bytes of
// the bf16 pairs (two thirds of their coded copy). A caller that needs only
// the largest outputs (a greedy or top-k draw from a row of logits) then
// computes exactly, with Context.Prepare and Outputs, only the channels
// whose upper end reaches the k-th largest lower end: the same outputs
// where they matter, for fewer bytes.
//
// The int8 product runs on two rows for each row x (Split): x as the bf16
// product sees it (rounded to bf16 on the paths whose kernels take bf16
// activations, Context.RoundsActivations), and what quantizing that to int8
// leaves over, r = x − s_x·u, so that the activations' quantization is r's
// (a 254th of x's) and the weights' own dominates. For output n of a weight
// row w (K inputs, scale s_w, int8 row q, quantization error e), the bound
// adds up:
//   - the weights' quantization: min(max|e|·‖x‖₁, ‖e‖₂·‖x‖₂) (Cauchy–Schwarz
//     is the tighter one unless x has a few huge values);
//   - the bf16 product's sums in f32: (K+2)·2⁻²³·max|w|·‖x‖₁ (twice the
//     worst case), which is at most √K times as much with ‖x‖₂;
//   - r's quantization (to nearest, up to f32 rounding) and its product's
//     epilogue: s_w·Σ|q|·s_r·(1/2 + 2⁻⁹);
//   - the rounding of s_x·u in r (r = x − fl(s_x·u) is exact by Sterbenz)
//     and the epilogue of x's product (three roundings of at most
//     s_w·s_x·Σ|q|·127): under s_w·Σ|q|·s_x·2⁻¹⁴. With |r| ≤ s_x·(1/2 +
//     2⁻¹⁵) and s_x ≤ max|x|/127·(1 + 2⁻²³), these two terms are at most
//     s_w·Σ|q|·scaleBound·‖x‖₂ (and so ‖x‖₁);
//   - what flushing subnormal inputs and outputs to zero loses: under
//     K·(max|w| + 1)·2⁻¹¹⁰, with the largest |w| of all channels.
//
// So the bound is min(‖x‖₁·A_n, ‖x‖₂·B_n) + C, two factors a channel and
// one for all: Interval costs two multiplies and a min an output, and
// streams two factors beside the two outputs it turns into the ends.
type Screen struct {
	q       *Weight
	byNorm1 []float32 // A_n
	byNorm2 []float32 // B_n
	floor   float32   // C
}

// scaleBound bounds s_r·(1/2 + 2⁻⁹) + s_x·2⁻¹⁴ by a multiple of ‖x‖₂:
// (1/2 + 2⁻¹⁵)/254·(1/2 + 2⁻⁹) + 2⁻¹⁴ times s_x's 1/127, with a margin.
const scaleBound = 1.61e-5

// Screen returns w's screen, or nil when w is not a bf16 weight or holds a
// weight that is not finite (no bound would hold).
func (w *Weight) Screen() *Screen {
	if w.kind != kindBF16 {
		return nil
	}
	n, k := w.N, w.K
	s := &Screen{q: newInt8(w.arena, n, k), byNorm1: make([]float32, n), byNorm2: make([]float32, n)}
	maxW := make([]float64, w.panels) // the panels' largest |w|; NaN if one is not finite
	parallelPanels(w.panels, func(panel int) {
		if screenPanelSIMD != nil && k%4 == 0 {
			maxW[panel] = s.panelSIMD(w, panel)
			return
		}
		row := make([]uint16, k)
		for c := range min(panelWidth, n-panel*panelWidth) {
			ch := panel*panelWidth + c
			w.bf16Row(ch, row)
			s.q.quantizeChannel(ch, row)
			maxW[panel] = max(maxW[panel], s.bound(ch, row))
		}
	})
	var all float64
	for _, m := range maxW {
		if math.IsNaN(m) {
			return nil
		}
		all = max(all, m)
	}
	s.floor = roundUp(float64(k) * (all + 1) * 0x1p-110)
	settle(w.arena, s.q.panelMemory())
	return s
}

// bf16Row copies output channel ch of bf16 weight w into row.
func (w *Weight) bf16Row(ch int, row []uint16) {
	panel, c := ch/panelWidth, ch%panelWidth
	pairs := w.pairs[panel*w.steps*panelWidth : (panel+1)*w.steps*panelWidth]
	for q := range w.steps {
		p := pairs[q*panelWidth+c]
		row[2*q] = uint16(p)
		if 2*q+1 < w.K {
			row[2*q+1] = uint16(p >> 16)
		}
	}
}

// roundUp makes a bound computed in float64 a float32 no smaller.
func roundUp(v float64) float32 {
	f := float32(v)
	if float64(f) < v {
		f = math.Nextafter32(f, float32(math.Inf(1)))
	}
	return f
}

// bound sets channel ch's factors from its bf16 row (quantized already) and
// returns its largest |w|, NaN if the row is not finite.
func (s *Screen) bound(ch int, row []uint16) float64 {
	maxBits, sumQ, maxErr, sqErr, finite := s.sums(ch, row)
	if !finite {
		return math.NaN()
	}
	return s.factors(ch, maxBits, sumQ, maxErr, sqErr)
}

// sums is what channel ch's factors come from, for its bf16 row quantized
// already: the largest |w| as bits, Σ|q|, the largest |w − s·q| and
// Σ(w − s·q)² in float64, the weights in order; finite is false if a weight
// is not. What needs no float (the finite check, the largest |w|, Σ|q|) is
// done on integers: a bf16's magnitude bits order as its magnitude does.
func (s *Screen) sums(ch int, row []uint16) (maxBits uint16, sumQ int, maxErr, sqErr float64, finite bool) {
	q := s.q
	panel, c := ch/panelWidth, ch%panelWidth
	quads := q.quads[panel*q.steps*panelWidth:]
	sw := float64(q.scale[ch])
	for i, b := range row {
		if b&0x7f80 == 0x7f80 {
			return 0, 0, 0, 0, false
		}
		maxBits = max(maxBits, b&0x7fff)
		qv := int8(quads[(i/4)*panelWidth+c] >> (8 * (i % 4)))
		sumQ += max(int(qv), -int(qv))
		e := math.Abs(float64(bf16ToF32(b)) - sw*float64(qv))
		maxErr = max(maxErr, e)
		sqErr += e * e
	}
	return maxBits, sumQ, maxErr, sqErr, true
}

// factors sets channel ch's factors from its largest |w| (as bits), Σ|q|,
// the largest quantization error and the sum of the errors' squares, and
// returns its largest |w|.
func (s *Screen) factors(ch int, maxBits uint16, sumQ int, maxErr, sqErr float64) float64 {
	k, sw := s.q.K, float64(s.q.scale[ch])
	maxW := float64(bf16ToF32(maxBits))
	sums := float64(k+2) * 0x1p-23 * maxW
	scales := scaleBound * sw * float64(sumQ)
	s.byNorm1[ch] = roundUp(maxErr + sums + scales)
	s.byNorm2[ch] = roundUp(math.Sqrt(sqErr)*(1+0x1p-40) + math.Sqrt(float64(k))*sums + scales)
	return maxW
}

// screenPanelSIMD quantizes a panel of bf16 pairs (steps of 16 channels,
// steps even) with each channel's 1/scale (inv) into int8 quads, as
// quantizeChannel does, and sums up what bound needs, in its order: each
// channel's errors in the order of its weights. panelAbsMaxSIMD is the
// largest |w| of each channel, as bits.
var (
	screenPanelSIMD func(pairs *uint32, steps int, sw *float32, inv *[panelWidth]float32, quads *uint32, f *panelSums)
	panelAbsMaxSIMD func(pairs *uint32, steps int, amax *[panelWidth]uint32)
)

// panelSums is what screenPanelSIMD sums up for each channel of a panel:
// Σq (for the int8 weight's correction), Σ|q|, the largest |w − s·q| and
// Σ(w − s·q)² in float64.
type panelSums struct {
	sum, sumQ     [panelWidth]int32
	maxErr, sqErr [panelWidth]float64
}

// panelSIMD is the loop in Screen for one panel, on the SIMD kernels:
// the same bytes and factors.
func (s *Screen) panelSIMD(w *Weight, panel int) float64 {
	q := s.q
	pairs := w.pairs[panel*w.steps*panelWidth:]
	var amax [panelWidth]uint32
	panelAbsMaxSIMD(&pairs[0], w.steps, &amax)
	ch0 := panel * panelWidth
	var inv [panelWidth]float32
	for c, a := range amax {
		if a >= 0x7f80 { // Inf or NaN
			return math.NaN()
		}
		q.scale[ch0+c], inv[c] = rowScale(a << 16)
	}
	var f panelSums
	screenPanelSIMD(&pairs[0], w.steps, &q.scale[ch0], &inv, &q.quads[panel*q.steps*panelWidth], &f)
	var maxW float64
	for c := range min(panelWidth, q.N-ch0) {
		q.corr[ch0+c] = 128 * f.sum[c]
		maxW = max(maxW, s.factors(ch0+c, uint16(amax[c]), int(f.sumQ[c]), f.maxErr[c], f.sqErr[c]))
	}
	return maxW
}

// Weight is the int8 copy, for MatMul.
func (s *Screen) Weight() *Weight { return s.q }

// ScreenBytes is the memory the screen of an n×k weight holds, less the
// padding of its last panel.
func ScreenBytes(n, k int) int64 { return int64(n) * int64(ceilDiv(k, 4)*4+8+4*2) }

// Bytes is the memory the screen holds.
func (s *Screen) Bytes() int {
	return s.q.Bytes() + 4*(len(s.byNorm1)+len(s.byNorm2))
}

// Memory is the screen's buffers, for placing their pages (pkg/numa).
func (s *Screen) Memory() [][]byte { return s.q.Memory() }

// Split writes the two rows the int8 product takes for the row x into dst
// (2·K elements): x as the bf16 product sees it (rounded to bf16 if round,
// Context.RoundsActivations), and what quantizing that leaves over.
func (s *Screen) Split(dst, x []float32, round bool) {
	k := s.q.K
	if len(x) != k || len(dst) < 2*k {
		panic(fmt.Sprintf("gemm.Screen.Split: %d inputs into %d for K = %d", len(x), len(dst), k))
	}
	copy(dst, x)
	if round {
		for i, v := range dst[:k] {
			dst[i] = bf16ToF32(toBF16(v))
		}
	}
	sx, inv := rowScale(absMax(dst[:k]))
	for i, v := range dst[:k] {
		dst[k+i] = v - sx*float32(quantize(v, inv))
	}
}

// absMax is the largest |x| as bits (NaN above Inf).
func absMax(x []float32) uint32 {
	var bits uint32
	for _, v := range x {
		bits = max(bits, math.Float32bits(v)&0x7fffffff)
	}
	return bits
}

// Interval turns y0 and y1, outputs [from, to) of MatMul with the int8
// copy for the two rows Split made of a row x (split), into the ends of
// intervals that hold MatMul's outputs for x with the bf16 weight: y0[n] ≤
// y_n ≤ y1[n]. It returns false, changing nothing, when x is not finite (no
// bound holds). Calls for disjoint ranges may run at once.
func (s *Screen) Interval(y0, y1, split []float32, from, to int) bool {
	n, k := s.q.N, s.q.K
	if len(split) < 2*k || from < 0 || from > to || to > n || len(y0) < to || len(y1) < to {
		panic(fmt.Sprintf("gemm.Screen.Interval: %d split inputs, outputs [%d, %d) of %d and %d for a %d×%d weight",
			len(split), from, to, len(y0), len(y1), n, k))
	}
	var norm1, sq float64
	for _, v := range split[:k] {
		norm1 += math.Abs(float64(v))
		sq += float64(v) * float64(v)
	}
	if math.IsNaN(norm1) || math.IsInf(norm1, 0) || math.IsInf(sq, 0) {
		return false
	}
	// Two margins of 2⁻¹²: one for the norms' rounding (summed in float64,
	// then rounded to float32), one for the float32 arithmetic of each
	// bound; the rounding of ŷ ± bound is covered by widening each end by
	// 2⁻²¹·|ŷ|, twice its worst case.
	const margin = 1 + 0x1p-12
	n1, n2 := float32(norm1*margin*margin), float32(math.Sqrt(sq)*margin*margin)
	simd := endsAVX512
	if simd == nil {
		simd = endsAVX2
	}
	intervalEnds(y0[from:to], y1[from:to], s.byNorm1[from:to], s.byNorm2[from:to], n1, n2, s.floor, simd)
	return true
}

// endsFunc is intervalEnds' loop in assembly over the first n/16 (AVX-512)
// or n/8 (AVX2) blocks of its slices' elements; it returns how many it did.
type endsFunc func(lo, hi, a, b *float32, n int, n1, n2, floor float32) int

// endsAVX512 and endsAVX2 are set where the CPU has them (asm_amd64.go);
// Interval takes the wider. At four rows of Qwen3's vocabulary the Go loop
// took half a millisecond of a decode step on two cores.
var endsAVX512, endsAVX2 endsFunc

// intervalEnds turns lo[i] + hi[i], an int8 product, into the ends of an
// interval around it, in place: ± min(n1·a[i], n2·b[i]) + floor + 2⁻²¹·|ŷ|.
// An output that overflowed (or NaN) bounds nothing. simd, if not nil, does
// the blocks it can, with the same bits.
func intervalEnds(lo, hi, a, b []float32, n1, n2, floor float32, simd endsFunc) {
	done := 0
	if simd != nil && len(lo) > 0 {
		hi, a, b = hi[:len(lo)], a[:len(lo)], b[:len(lo)]
		done = simd(&lo[0], &hi[0], &a[0], &b[0], len(lo), n1, n2, floor)
	}
	inf := float32(math.Inf(1))
	for i := done; i < len(lo); i++ {
		y := lo[i] + hi[i]
		d := min(n1*a[i], n2*b[i]) + floor + math.Float32frombits(math.Float32bits(y)&0x7fffffff)*0x1p-21
		if !(d < inf) {
			lo[i], hi[i] = -inf, inf
			continue
		}
		lo[i], hi[i] = y-d, y+d
	}
}
