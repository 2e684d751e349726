//go:build !purego

package gemm

import "github.com/ellm-dev/ellm/kernels"

// asmKernels is the tile kernel set of the NEON path (gen_neon.go) for a CPU
// with features f. Int8 weights take the SDOT kernels where it has the
// dotprod extension, else the Go kernel (the same bits either way). The bf16
// products of more than 16 rows widen their weights block by block for the
// f32 kernels, the AVX2 path's threshold: no arm64 machine was at hand to
// measure one of its own.
func asmKernels(p kernels.Path, f kernels.Features) (kernelSet, bool) {
	if p != kernels.NEON {
		return kernelSet{}, false
	}
	s := kernelSet{pairs: pairsNEONKernels, f32: f32NEONKernels, quads: quadsNEONKernels,
		rows: 4, quadRows: 6, f32Rows: 6, widen: widenPairsNEON, widenRows: 16}
	if !f.ASIMDDP {
		s.quads, s.quadRows = genericSet(nil, nil, scalarQuads, false).quads, regRows
	}
	return s, true
}
