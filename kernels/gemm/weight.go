package gemm

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ellm-dev/ellm/kernels/threads"
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

	fewRows bool        // SetFewRows
	coded   *codedPairs // Code
	arena   Arena       // where Code and Screen put their buffers (Packer)
}

// SetFewRows marks w as a weight whose products have a few rows by
// construction, as an lm_head that computes the logits of each sequence's
// last row: its bf16 products then skip AMX tiles for every M, and take the
// path's register kernels, which stream weights from memory faster
// (BenchmarkDecode/lm_head/bf16: 100–104 % of the DRAM read rate against
// 92–93 % on tiles). The choice is per weight, not per product, so row
// invariance holds; a product of many rows with w (all the logits of a
// prompt, for alignment or scoring) runs slower on the register kernels.
func (w *Weight) SetFewRows() { w.fewRows = true }

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
	return FromBF16Parts([][]uint16{w}, k)
}

// FromBF16Parts is FromBF16 of the rows of parts one after the other (the
// tensors of a fused weight, each of whole rows of k), read where they are
// rather than concatenated first.
func FromBF16Parts(parts [][]uint16, k int) *Weight { return Packer{}.BF16Parts(parts, k) }

// BF16Parts is FromBF16Parts into p's arena.
func (pk Packer) BF16Parts(parts [][]uint16, k int) *Weight {
	m := newRowParts("FromBF16Parts", parts, k)
	p := &Weight{N: m.n, K: k, kind: kindBF16, panels: ceilDiv(m.n, panelWidth), steps: ceilDiv(k, 2), arena: pk.Arena}
	p.pairs = packed[uint32](pk.Arena, p.panels*p.steps*panelWidth)
	parallelPanels(p.panels, func(panel int) {
		dst := p.pairs[panel*p.steps*panelWidth : (panel+1)*p.steps*panelWidth]
		chans := min(panelWidth, m.n-panel*panelWidth)
		// Read the 16 rows side by side, so that the panel is written in order.
		var rows [panelWidth][]uint16
		var words [panelWidth]unsafe.Pointer
		direct := chans == panelWidth && littleEndian
		for c := range chans {
			row := m.row(panel*panelWidth + c)
			rows[c] = row[:k/2*2]
			if k%2 == 1 {
				dst[(k/2)*panelWidth+c] = uint32(row[k-1])
			}
			words[c] = unsafe.Pointer(unsafe.SliceData(row))
			direct = direct && uintptr(words[c])%4 == 0
		}
		if direct {
			// A pair is the little-endian word at its first element: a
			// step is 16 word loads and stores, where the element loop
			// below shifts and checks bounds per element (with the fused
			// weights read in place, a warm load of Qwen3-0.6B packs in two
			// thirds of the time: docs/performance.md, "The load's packing").
			for q := range k / 2 {
				d := (*[panelWidth]uint32)(dst[q*panelWidth:])
				for c := range d {
					d[c] = *(*uint32)(unsafe.Add(words[c], 4*q))
				}
			}
			return
		}
		for q := range k / 2 {
			for c := range chans {
				dst[q*panelWidth+c] = uint32(rows[c][2*q]) | uint32(rows[c][2*q+1])<<16
			}
		}
	})
	settle(pk.Arena, p.panelMemory())
	return p
}

// littleEndian says whether a pair of bf16 (low element first) is the
// machine word the pairs layout stores.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// rowParts is a row-major matrix of k columns held in consecutive parts of
// whole rows.
type rowParts struct {
	parts [][]uint16
	n, k  int
}

// newRowParts checks that parts hold whole rows of k (at least one) and panics
// otherwise, as checkShape does.
func newRowParts(what string, parts [][]uint16, k int) rowParts {
	m := rowParts{parts: parts, k: k}
	for _, p := range parts {
		if k < 1 || len(p)%k != 0 {
			panic(fmt.Sprintf("gemm.%s: a part of %d elements is not rows of %d", what, len(p), k))
		}
		m.n += len(p) / k
	}
	if m.n < 1 {
		panic(fmt.Sprintf("gemm.%s: no rows", what))
	}
	return m
}

// row is row i (counted across the parts).
func (m rowParts) row(i int) []uint16 {
	for _, p := range m.parts {
		if n := len(p) / m.k; i >= n {
			i -= n
			continue
		}
		return p[i*m.k : (i+1)*m.k]
	}
	panic(fmt.Sprintf("gemm: row %d of %d", i, m.n))
}

// FromF32 packs f32 weights (row-major [n,k]) as they are: 4 bytes per weight.
// Every path computes them in f32 (the bf16 path too: rounding them to bf16
// would change the model).
func FromF32(w []float32, n, k int) *Weight { return Packer{}.F32(w, n, k) }

// F32 is FromF32 into p's arena.
func (pk Packer) F32(w []float32, n, k int) *Weight {
	checkShape("FromF32", len(w), n, k)
	p := &Weight{N: n, K: k, kind: kindF32, panels: ceilDiv(n, panelWidth), steps: k, arena: pk.Arena}
	p.f32 = packed[float32](pk.Arena, p.panels*k*panelWidth)
	parallelPanels(p.panels, func(panel int) {
		dst := p.f32[panel*k*panelWidth : (panel+1)*k*panelWidth]
		for c := range min(panelWidth, n-panel*panelWidth) {
			for kk, v := range w[(panel*panelWidth+c)*k : (panel*panelWidth+c+1)*k] {
				dst[kk*panelWidth+c] = v
			}
		}
	})
	settle(pk.Arena, p.panelMemory())
	return p
}

// QuantizeInt8 quantizes bf16 weights per output channel, symmetrically:
// q = round(w/s) in [-127, 127] with s = max|w|/127.
func QuantizeInt8(w []uint16, n, k int) *Weight {
	checkShape("QuantizeInt8", len(w), n, k)
	return QuantizeInt8Parts([][]uint16{w}, k)
}

// QuantizeInt8Parts is QuantizeInt8 of the rows of parts one after the
// other, as FromBF16Parts reads them.
func QuantizeInt8Parts(parts [][]uint16, k int) *Weight { return Packer{}.Int8Parts(parts, k) }

// Int8Parts is QuantizeInt8Parts into p's arena.
func (pk Packer) Int8Parts(parts [][]uint16, k int) *Weight {
	m := newRowParts("QuantizeInt8Parts", parts, k)
	p := newInt8(pk.Arena, m.n, k)
	parallelPanels(p.panels, func(panel int) {
		for c := range min(panelWidth, m.n-panel*panelWidth) {
			ch := panel*panelWidth + c
			p.quantizeChannel(ch, m.row(ch))
		}
	})
	settle(pk.Arena, p.panelMemory())
	return p
}

// newInt8 allocates an int8 weight [n, k] in arena a for quantizeChannel
// to fill.
func newInt8(a Arena, n, k int) *Weight {
	p := &Weight{N: n, K: k, kind: kindInt8, panels: ceilDiv(n, panelWidth), steps: ceilDiv(k, 4), arena: a}
	p.quads = packed[uint32](a, p.panels*p.steps*panelWidth)
	p.scale = make([]float32, p.panels*panelWidth)
	p.corr = make([]int32, p.panels*panelWidth)
	return p
}

// quantizeChannel quantizes output channel ch of int8 weight p from its bf16
// row, with the scale of an activation row (rowScale): a channel with Inf or
// NaN gets a NaN scale and zeros, so its outputs are NaN.
func (p *Weight) quantizeChannel(ch int, row []uint16) {
	var amax uint16 // largest |w| as bits: the integer order is the float order, NaN above Inf
	for _, b := range row {
		amax = max(amax, b&0x7fff)
	}
	s, inv := rowScale(uint32(amax) << 16)
	panel, c := ch/panelWidth, ch%panelWidth
	dst := p.quads[panel*p.steps*panelWidth : (panel+1)*p.steps*panelWidth]
	var sum int32
	for q := range ceilDiv(p.K, 4) {
		var quad uint32
		for b, v := range row[4*q : min(4*q+4, p.K)] {
			qv := quantize(bf16ToF32(v), inv)
			sum += qv
			quad |= uint32(uint8(int8(qv))) << (8 * b)
		}
		dst[q*panelWidth+c] = quad
	}
	p.scale[ch] = s
	p.corr[ch] = 128 * sum
}

// parallelPanels runs pack(panel) for every panel, spread over the CPUs:
// packing is load-time work, proportional to the model size.
func parallelPanels(panels int, pack func(panel int)) {
	workers := min(runtime.GOMAXPROCS(0), ceilDiv(panels, 64))
	if workers <= 1 {
		for p := range panels {
			pack(p)
		}
		return
	}
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			lo, hi := threads.Split(panels, 1, i, workers)
			for p := lo; p < hi; p++ {
				pack(p)
			}
		})
	}
	wg.Wait()
}

// Bytes is the memory the packed weight occupies.
func (w *Weight) Bytes() int {
	n := 4 * (len(w.pairs) + len(w.f32) + len(w.quads) + len(w.scale) + len(w.corr))
	if w.coded != nil {
		n += w.coded.Bytes()
	}
	return n
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

// aligned returns n zeroed elements starting on an align-byte boundary (a
// power of two): 64 makes every panel row one cache line.
func aligned[T uint32 | float32](n int, align uintptr) []T {
	b := make([]T, n+int(align/4))
	off := int((align - uintptr(unsafe.Pointer(&b[0]))%align) % align / 4)
	return b[off : off+n : off+n]
}

func alignedU32(n int) []uint32 { return aligned[uint32](n, 64) }

func alignedF32(n int) []float32 { return aligned[float32](n, 64) }

func bf16ToF32(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

func isInf32(v float32) bool { return math.IsInf(float64(v), 0) }
