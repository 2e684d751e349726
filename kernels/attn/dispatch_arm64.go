//go:build !purego

package attn

import "github.com/ellm-dev/ellm/kernels"

// simdKernels puts the NEON tile into s for head sizes of whole 16-dim
// chunks: the scores and the values in assembly (tile_arm64.s), the
// softmax between them rescale's (its exponentials and sum ops' NEON
// ExpSum), each with the arithmetic of the AVX2 and AVX-512 tiles, so the
// same bits (TestTileKernelsMatchFused), and an int8 cache's rows
// dequantized in assembly too. K and V stay in rows; the grouped
// and in-place kernels of amd64 have no NEON version, so each query runs the
// tile on its own.
func simdKernels(s *kernelSet, p kernels.Path, hd int) {
	if p != kernels.NEON || hd%16 != 0 {
		return
	}
	o := s.ops
	s.tile = func(ml, acc, q, k, v, sc []float32, n int, scale float32) {
		_, _, _ = k[n*hd-1], v[n*hd-1], sc[n-1] // the assembly reads and writes up to here
		scoresNEON(&q[0], &k[0], &sc[0], n, hd, scale)
		rescale(o, ml, acc, sc[:n])
		valuesNEON(&acc[0], &sc[0], &v[0], n, hd)
	}
	s.dequantK = func(dst []float32, src []int8, scale []float32, rows, hd int) []float32 {
		_, _, _ = dst[rows*hd-1], src[rows*hd-1], scale[rows-1]
		dequantNEON(&dst[0], &src[0], &scale[0], rows, hd)
		return dst[:rows*hd]
	}
	s.dequantV = s.dequantK
}

// dequantNEON is dequantGo for hd a multiple of 16: each int8 widened
// exactly and multiplied by its row's scale, one rounding.
//
//go:noescape
func dequantNEON(dst *float32, src *int8, scale *float32, rows, hd int)

// scoresNEON sets s[t] = scale·q·k[t] for the n rows of k: per row a
// 16-lane FMA chain over the hd dims (lane l takes dims l, l+16, …), folded
// by the tree (i, i+8), (i, i+4), (i, i+2), (i, i+1). hd is a multiple of 16.
//
//go:noescape
func scoresNEON(q, k, s *float32, n, hd int, scale float32)

// valuesNEON adds p[t]·v[t] to acc for the n rows of v, one FMA per
// position, in order. hd is a multiple of 16.
//
//go:noescape
func valuesNEON(acc, p, v *float32, n, hd int)

// qref is only used by amd64's group kernels.
type qref struct{}
