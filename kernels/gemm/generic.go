package gemm

import (
	"math"
	"unsafe"

	"github.com/ellm-dev/ellm/kernels/ops"
)

// This file holds the pure-Go kernels and the exact arithmetic every SIMD
// kernel is held to. A kernel computes a tile of a.r rows × a.p panels: for
// each row and each of the 16 channels of a panel, one accumulator that runs
// through the K steps in order. Nothing else is summed, so the result for an
// output does not depend on the tile it lands in (row invariance).

// kargs is what a tile kernel reads. The asm kernels read it by offset
// (see gen_amd64.go): keep the field order.
type kargs struct {
	x   unsafe.Pointer // the tile's prepared activations, rows interleaved step by step
	w   unsafe.Pointer // first panel
	ps  uintptr        // bytes between panels
	ks  int            // reduction steps (pairs, singles or quads)
	y   unsafe.Pointer // output of row 0, channel 0 of the first panel
	ldy uintptr        // bytes between output rows
	add int            // 1: y += result, 0: y = result
	sx  unsafe.Pointer // int8: per-row activation scales
	sw  unsafe.Pointer // int8: per-channel weight scales of the first panel
	wc  unsafe.Pointer // int8: per-channel corrections of the first panel
	r   int            // rows (generic kernels only: asm kernels are specialised)
	p   int            // panels (generic kernels only)
	lx  uintptr        // bytes between rows of activations (formQuadRows)
	amx *amxTile       // the worker's AMX state
	// coded, if set, is the weight's coded copy for products of a few rows
	// on AMX tiles, and pi the index of w's panel in it.
	coded *codedPairs
	pi    int
	// ahead is how far ahead (bytes) the kernels that take it from the call
	// prefetch their panels (gen_asm.go, aheadAtRun).
	ahead uintptr
}

func (a *kargs) panel(p int) unsafe.Pointer { return unsafe.Add(a.w, uintptr(p)*a.ps) }

// out writes (or adds) one row's 16 results of panel p.
func (a *kargs) out(r, p int, acc *[panelWidth]float32) {
	y := (*[panelWidth]float32)(unsafe.Add(a.y, uintptr(r)*a.ldy+uintptr(p*panelWidth*4)))
	if a.add != 0 {
		for c := range acc {
			y[c] += acc[c]
		}
		return
	}
	*y = *acc
}

// genPairsF32 is the f32 path on bf16 weights: each bf16 widened exactly,
// even k before odd k, products and sums rounded to f32 one by one.
func genPairsF32(a *kargs) { pairsF32With(a, mulAdd) }

// pairsF32With is the f32 arithmetic on bf16 weights with mac as each
// step's multiply-add (the assembly paths' definition passes a fused one).
func pairsF32With(a *kargs, mac func(acc, x, w float32) float32) {
	x := unsafe.Slice((*float32)(a.x), 2*a.ks*a.r)
	for r := range a.r {
		for p := range a.p {
			w := unsafe.Slice((*uint32)(a.panel(p)), a.ks*panelWidth)
			var acc [panelWidth]float32
			for q := range a.ks {
				x0, x1 := x[2*(q*a.r+r)], x[2*(q*a.r+r)+1]
				for c, v := range w[q*panelWidth : q*panelWidth+panelWidth] {
					acc[c] = mac(acc[c], x0, even(v))
					acc[c] = mac(acc[c], x1, odd(v))
				}
			}
			a.out(r, p, &acc)
		}
	}
}

// mulAdd is acc + x·w, the product rounded before the sum.
func mulAdd(acc, x, w float32) float32 { return acc + float32(x*w) }

// even and odd are the two halves of a bf16 pair (even k low) widened exactly.
func even(v uint32) float32 { return math.Float32frombits(v << 16) }
func odd(v uint32) float32  { return math.Float32frombits(v & 0xffff0000) }

// genF32 is the f32 path on f32 weights.
func genF32(a *kargs) { f32With(a, mulAdd) }

// f32With is the f32 arithmetic on f32 weights with mac as each step's
// multiply-add.
func f32With(a *kargs, mac func(acc, x, w float32) float32) {
	x := unsafe.Slice((*float32)(a.x), a.ks*a.r)
	for r := range a.r {
		for p := range a.p {
			w := unsafe.Slice((*float32)(a.panel(p)), a.ks*panelWidth)
			var acc [panelWidth]float32
			for k := range a.ks {
				xk := x[k*a.r+r]
				for c, v := range w[k*panelWidth : k*panelWidth+panelWidth] {
					acc[c] = mac(acc[c], xk, v)
				}
			}
			a.out(r, p, &acc)
		}
	}
}

// genPairsBF16 is the exact emulation of the avx512bf16 kernel: one
// VDPBF16PS per K pair on bf16-rounded activations (see toBF16Pairs).
func genPairsBF16(a *kargs) {
	x := unsafe.Slice((*uint32)(a.x), a.ks*a.r)
	for r := range a.r {
		for p := range a.p {
			w := unsafe.Slice((*uint32)(a.panel(p)), a.ks*panelWidth)
			var acc [panelWidth]float32
			for q := range a.ks {
				xq := x[q*a.r+r]
				for c, v := range w[q*panelWidth : q*panelWidth+panelWidth] {
					acc[c] = ops.DotBF16(acc[c], v, xq)
				}
			}
			a.out(r, p, &acc)
		}
	}
}

// toBF16 rounds f32 to bf16 as VCVTNEPS2BF16 does: to nearest even,
// denormals to signed zero, NaNs kept NaN (quieted).
func toBF16(v float32) uint16 {
	b := math.Float32bits(v)
	switch {
	case b&0x7fffffff > 0x7f800000:
		return uint16(b>>16) | 0x40
	case b&0x7f800000 == 0:
		return uint16(b>>16) & 0x8000
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// prepFuncs are assembly versions of the activation preparation, bit for
// bit the Go code below; each handles the first len(x)/16·16 elements and
// writes dst every stride bytes. pairs is nil where the path never takes
// bf16 activations (AVX2).
type prepFuncs struct {
	absMaxBits func(x []float32) uint32
	quads      func(dst *uint32, stride int, x []float32, inv float32)
	pairs      func(dst *uint32, stride int, x []float32)
	f32        func(dst *float32, stride int, x []float32)
}

// simdPrep (AVX-512) and avx2Prep are set where the CPU has the assembly
// (asm_amd64.go).
var simdPrep, avx2Prep *prepFuncs

// toF32Strided copies a row of activations into dst[0], dst[stride],
// dst[2·stride]…: its place in a row tile of the f32 form.
func toF32Strided(dst []float32, stride int, x []float32, simd *prepFuncs) {
	n := 0
	if simd != nil && len(x) >= 16 {
		n = len(x) &^ 15
		_ = dst[(n-1)*stride] // the assembly writes up to here
		simd.f32(&dst[0], stride*4, x[:n])
	}
	for kk := n; kk < len(x); kk++ {
		dst[kk*stride] = x[kk]
	}
}

// toBF16Pairs rounds a row of activations to bf16 pairs (even k low), the
// zero-padded odd tail included, into dst[0], dst[stride], dst[2·stride]…
func toBF16Pairs(dst []uint32, stride int, x []float32, simd *prepFuncs) {
	n := 0
	if simd != nil && simd.pairs != nil && len(x) >= 16 {
		n = len(x) &^ 15
		simd.pairs(&dst[0], stride*4, x[:n])
	}
	for q := n / 2; q < len(x)/2; q++ {
		dst[q*stride] = uint32(toBF16(x[2*q])) | uint32(toBF16(x[2*q+1]))<<16
	}
	if len(x)%2 == 1 {
		dst[len(x)/2*stride] = uint32(toBF16(x[len(x)-1]))
	}
}

// genQuads is the int8 kernel: u8 activations (q+128) × s8 weights summed
// exactly in int32 as VPDPBUSD does, the offset removed with the channel's
// correction, then scaled in f32: (f32(Σ) · sx) · sw.
func genQuads(a *kargs) {
	x := unsafe.Slice((*uint32)(a.x), a.ks*a.r)
	for r := range a.r {
		for p := range a.p {
			w := unsafe.Slice((*uint32)(a.panel(p)), a.ks*panelWidth)
			var acc [panelWidth]int32
			for q := range a.ks {
				xq := x[q*a.r+r]
				for c, v := range w[q*panelWidth : q*panelWidth+panelWidth] {
					acc[c] += dot4(xq, v)
				}
			}
			a.quadsOut(r, p, &acc)
		}
	}
}

// quadsOut writes (or adds) the int8 results of row r's 16 sums of panel p:
// the offset removed with the channel's correction, then scaled in f32,
// (f32(Σ − corr) · sx) · sw.
func (a *kargs) quadsOut(r, p int, acc *[panelWidth]int32) {
	sx := *(*float32)(unsafe.Add(a.sx, r*4))
	sw := (*[panelWidth]float32)(unsafe.Add(a.sw, p*panelWidth*4))
	wc := (*[panelWidth]int32)(unsafe.Add(a.wc, p*panelWidth*4))
	var out [panelWidth]float32
	for c := range out {
		out[c] = float32(float32(float32(acc[c]-wc[c])*sx) * sw[c])
	}
	a.out(r, p, &out)
}

// quantize rounds v·inv to the nearest integer (ties to even) in [-127, 127].
// Adding and subtracting 1.5·2^23 rounds an f32 below 2^22 in magnitude to
// an integer in the current (nearest-even) mode; larger values are clamped.
// The product is rounded on its own (the explicit conversion): Go may fuse
// it with the add where the CPU has an FMA (arm64 does), and a different
// integer then comes out of a product close to a half.
func quantize(v, inv float32) int32 {
	f := float32(v * inv)
	if !(f > -127) {
		return -127 // also NaN: the row's scale is NaN anyway
	}
	if f > 127 {
		return 127
	}
	return int32(float32(f+0x1.8p23) - 0x1.8p23)
}

// dot4 is one lane of VPDPBUSD: four unsigned × signed byte products.
func dot4(u, s uint32) int32 {
	return int32(uint8(u))*int32(int8(s)) + int32(uint8(u>>8))*int32(int8(s>>8)) +
		int32(uint8(u>>16))*int32(int8(s>>16)) + int32(uint8(u>>24))*int32(int8(s>>24))
}

// rowScale is the int8 scale of a row whose largest |x| has the bits amax,
// and its inverse (0 for an all-zero row).
func rowScale(amax uint32) (s, inv float32) {
	s = math.Float32frombits(amax) / 127
	if math.IsNaN(float64(s)) || isInf32(s) {
		s = float32(math.NaN())
	}
	if s > 0 {
		inv = 1 / s
	}
	return s, inv
}

// quantizeRow quantizes a row of activations symmetrically to u8 quads
// (q+128, q in [-127, 127]) into dst[0], dst[stride]…, and returns its
// scale. A row with Inf or NaN gets a NaN scale, so its outputs are NaN
// rather than quietly finite.
func quantizeRow(dst []uint32, stride int, x []float32, simd *prepFuncs) float32 {
	// The largest |x| as bits: for non-negative floats the integer order is
	// the float order, and any NaN is above +Inf.
	var bits uint32
	n := 0
	if simd != nil && len(x) >= 16 {
		n = len(x) &^ 15
		bits = simd.absMaxBits(x[:n])
	}
	s, inv := rowScale(max(bits, absMax(x[n:])))
	if n > 0 {
		simd.quads(&dst[0], stride*4, x[:n], inv)
	}
	for q := n / 4; q < ceilDiv(len(x), 4); q++ {
		var quad uint32
		for b, v := range x[4*q : min(4*q+4, len(x))] {
			quad |= uint32(quantize(v, inv)+128) << (8 * b)
		}
		dst[q*stride] = quad
	}
	// Padding k ≥ len(x) holds byte 0, i.e. q = -128 against a zero weight: no contribution.
	return s
}
