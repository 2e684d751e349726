//go:build !purego

package gemm

import "github.com/ellm-dev/ellm/kernels"

//go:generate go run gen_asm.go

func init() {
	if kernels.CPU().AVX512F {
		simdPrep = &prepFuncs{absMaxBitsAVX512, quantizeQuadsAVX512, bf16PairsAVX512, siluMulAVX512}
	}
}

//go:noescape
func absMaxBitsAVX512(x []float32) uint32

//go:noescape
func quantizeQuadsAVX512(dst *uint32, stride int, x []float32, inv float32)

//go:noescape
func bf16PairsAVX512(dst *uint32, stride int, x []float32)

// asmKernels is the tile kernel set of path p on amd64. Int8 weights take the
// generic integer kernels below the bf16 path (which needs VNNI anyway), and
// f32 weights take the f32 FMA kernels on the bf16 path.
func asmKernels(p kernels.Path) (kernelSet, bool) {
	var s kernelSet
	switch p {
	case kernels.AVX2:
		s = kernelSet{pairs: pairs256Kernels, f32: f32x256Kernels, rows: 4}
	case kernels.AVX512:
		s = kernelSet{pairs: pairs512Kernels, f32: f32x512Kernels, rows: maxRows}
	case kernels.AVX512BF16:
		s = kernelSet{pairs: bf16x512Kernels, f32: f32x512Kernels, quads: vnni512Kernels, rows: maxRows, bf16Act: true}
		return s, true
	default:
		return s, false
	}
	for r := 1; r <= s.rows; r++ {
		for np := 1; np <= maxPanels; np++ {
			s.quads[r][np] = genQuads
		}
	}
	return s, true
}

//go:noescape
func siluMulAVX512(h, u *float32, n int)
