// Package ops holds the small per-token kernels of a transformer layer:
// RMSNorm (plain, fused with the residual add, per head), RoPE, SiLU×mul,
// softmax, top-k, argmax, bf16↔f32 conversion and the embedding gather.
//
// Every function computes each output row from that row's inputs alone with
// one fixed arithmetic sequence per kernel path, so results never depend on
// how many rows are processed together. Where an AVX2 or AVX-512 version
// exists it is bit-identical to the pure-Go version: the Go code spells out
// the lane order and uses separate multiply and add (no fused multiply-add),
// which the assembly repeats instruction for instruction.
package ops

import "github.com/ellm-dev/ellm/kernels"

// lanes is the width of the accumulation order every reduction in this
// package follows: element i is accumulated into lane i%lanes, and the lanes
// are folded pairwise (i, i+8), (i, i+4), (i, i+2), (i, i+1) — the shape of an
// AVX-512 register, which AVX2 emulates with two registers.
const lanes = 16

// reduce16 folds 16 lane sums in the package's fixed tree order.
func reduce16(a *[lanes]float32) float32 {
	var b [8]float32
	for i := range 8 {
		b[i] = a[i] + a[i+8]
	}
	for i := range 4 {
		b[i] += b[i+4]
	}
	for i := range 2 {
		b[i] += b[i+2]
	}
	return b[0] + b[1]
}

// simd reports which assembly path to take: an element of {generic, avx2,
// avx512}; the avx512bf16 path runs the avx512 code in this package.
func simd() kernels.Path {
	p := kernels.Active()
	if p > kernels.AVX512 {
		p = kernels.AVX512
	}
	if !haveAsm {
		p = kernels.Generic
	}
	return p
}
