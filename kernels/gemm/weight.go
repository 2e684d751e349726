package gemm

import (
	"fmt"
	"math"
	"unsafe"
)

// panelWidth is the number of output channels packed side by side: one zmm
// of f32 accumulators, so every path accumulates each output in one lane.
const panelWidth = 16

type kind uint8

const (
	kindBF16 kind = iota // bf16 pairs: panel × K/2 × 16 uint32 (lo = even k, hi = odd k)
	kindF32              // f32: panel × K × 16 float32
	kindInt8             // int8 quads: panel × K/4 × 16 uint32 (byte b = k%4), per-channel scale
)

// Weight is a matrix W[N,K] (out_features × in_features, as stored in
// safetensors) repacked once into panels of 16 output channels, so that a
// kernel streams one panel with unit-stride loads and keeps the 16 outputs
// of a row in one vector register for the whole reduction over K.
// The layout does not depend on the kernel path: every path reads the same
// panels, so a Weight can be shared by Contexts of different paths.
type Weight struct {
	N, K int

	kind   kind
	panels int // ceil(N/16)
	steps  int // reduction steps per panel: K/2 pairs, K singles or K/4 quads (rounded up)

	pairs []uint32  // kindBF16
	f32   []float32 // kindF32
	quads []uint32  // kindInt8
	scale []float32 // kindInt8: per channel (padded to panels*16), W ≈ scale·q
	corr  []int32   // kindInt8: 128·Σ_k q[n,k], undoes the +128 activation offset exactly
}

func checkShape(what string, have, n, k int) {
	if n < 1 || k < 1 {
		panic(fmt.Sprintf("gemm.%s: bad shape %d×%d", what, n, k))
	}
	if have != n*k {
		panic(fmt.Sprintf("gemm.%s: %d elements for a %d×%d matrix", what, have, n, k))
	}
}

// FromBF16 packs bf16 weights (raw bits, row-major [n,k]) into bf16 pairs:
// the storage stays 2 bytes per weight.
func FromBF16(w []uint16, n, k int) *Weight {
	checkShape("FromBF16", len(w), n, k)
	p := &Weight{N: n, K: k, kind: kindBF16, panels: ceilDiv(n, panelWidth), steps: ceilDiv(k, 2)}
	p.pairs = alignedU32(p.panels * p.steps * panelWidth)
	for ch := range n {
		row := w[ch*k : ch*k+k]
		dst := p.pairs[(ch/panelWidth)*p.steps*panelWidth+ch%panelWidth:]
		for q := range k / 2 {
			dst[q*panelWidth] = uint32(row[2*q]) | uint32(row[2*q+1])<<16
		}
		if k%2 == 1 {
			dst[(k/2)*panelWidth] = uint32(row[k-1])
		}
	}
	return p
}

// FromF32 packs f32 weights (row-major [n,k]) as they are: 4 bytes per weight.
// Every path computes them in f32 (the bf16 path too: rounding them to bf16
// would change the model).
func FromF32(w []float32, n, k int) *Weight {
	checkShape("FromF32", len(w), n, k)
	p := &Weight{N: n, K: k, kind: kindF32, panels: ceilDiv(n, panelWidth), steps: k}
	p.f32 = alignedF32(p.panels * k * panelWidth)
	for ch := range n {
		dst := p.f32[(ch/panelWidth)*k*panelWidth+ch%panelWidth:]
		for kk, v := range w[ch*k : ch*k+k] {
			dst[kk*panelWidth] = v
		}
	}
	return p
}

// QuantizeInt8 quantizes bf16 weights per output channel, symmetrically:
// q = round(w/s) in [-127, 127] with s = max|w|/127.
func QuantizeInt8(w []uint16, n, k int) *Weight {
	checkShape("QuantizeInt8", len(w), n, k)
	p := &Weight{N: n, K: k, kind: kindInt8, panels: ceilDiv(n, panelWidth), steps: ceilDiv(k, 4)}
	p.quads = alignedU32(p.panels * p.steps * panelWidth)
	p.scale = make([]float32, p.panels*panelWidth)
	p.corr = make([]int32, p.panels*panelWidth)
	for ch := range n {
		row := w[ch*k : ch*k+k]
		var amax float32
		for _, b := range row {
			amax = max(amax, abs32(bf16ToF32(b)))
		}
		s := amax / 127
		inv := float32(0)
		if s > 0 && !isInf32(s) {
			inv = 1 / s
		}
		dst := p.quads[(ch/panelWidth)*p.steps*panelWidth+ch%panelWidth:]
		var sum int32
		for kk, b := range row {
			q := quantize(bf16ToF32(b), inv)
			sum += q
			dst[(kk/4)*panelWidth] |= uint32(uint8(int8(q))) << (8 * (kk % 4))
		}
		p.scale[ch] = s
		p.corr[ch] = 128 * sum
	}
	return p
}

// Bytes is the memory the packed weight occupies.
func (w *Weight) Bytes() int {
	return 4 * (len(w.pairs) + len(w.f32) + len(w.quads) + len(w.scale) + len(w.corr))
}

// panelBytes is the distance between two panels.
func (w *Weight) panelBytes() uintptr { return uintptr(w.steps * panelWidth * 4) }

func (w *Weight) base() unsafe.Pointer {
	switch w.kind {
	case kindBF16:
		return unsafe.Pointer(&w.pairs[0])
	case kindF32:
		return unsafe.Pointer(&w.f32[0])
	}
	return unsafe.Pointer(&w.quads[0])
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// alignedU32 returns a zeroed slice starting on a 64-byte boundary, so that
// every panel row is one cache line.
func alignedU32(n int) []uint32 {
	b := make([]uint32, n+16)
	off := int((64 - uintptr(unsafe.Pointer(&b[0]))%64) % 64 / 4)
	return b[off : off+n : off+n]
}

func alignedF32(n int) []float32 {
	b := make([]float32, n+16)
	off := int((64 - uintptr(unsafe.Pointer(&b[0]))%64) % 64 / 4)
	return b[off : off+n : off+n]
}

func bf16ToF32(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

func isInf32(v float32) bool { return math.IsInf(float64(v), 0) }
