//go:build !purego

package gemm

import "github.com/ellm-dev/ellm/kernels"

//go:generate go run gen_asm.go
//go:generate go run ../internal/asmgen bf16_amd64.h amx_amd64.h vnni256_amd64.h

func init() {
	if kernels.CPU().Supports(kernels.AVX2) {
		avx2Prep = &prepFuncs{absMaxBits: absMaxBitsAVX2, quads: quantizeQuadsAVX2, f32: f32StridedAVX2}
		endsAVX2 = intervalEndsAVX2
	}
	if kernels.CPU().AVX512F {
		simdPrep = &prepFuncs{absMaxBitsAVX512, quantizeQuadsAVX512, bf16PairsAVX512, f32StridedAVX2}
		endsAVX512 = intervalEndsAVX512
	}
	if kernels.CPU().AVX512BW {
		codeBlockSIMD = codeBlockAVX512
		screenPanelSIMD, panelAbsMaxSIMD = screenPanelAVX512, panelAbsMaxAVX512
	}
}

//go:noescape
func screenPanelAVX512(pairs *uint32, steps int, sw *float32, inv *[panelWidth]float32, quads *uint32, f *panelSums)

//go:noescape
func panelAbsMaxAVX512(pairs *uint32, steps int, amax *[panelWidth]uint32)

//go:noescape
func codeBlockAVX512(pairs *uint32, dst *byte, lut *[32]byte) (esc byte, ok bool)

//go:noescape
func intervalEndsAVX512(lo, hi, a, b *float32, n int, n1, n2, floor float32) int

//go:noescape
func intervalEndsAVX2(lo, hi, a, b *float32, n int, n1, n2, floor float32) int

//go:noescape
func absMaxBitsAVX2(x []float32) uint32

//go:noescape
func quantizeQuadsAVX2(dst *uint32, stride int, x []float32, inv float32)

//go:noescape
func f32StridedAVX2(dst *float32, stride int, x []float32)

//go:noescape
func absMaxBitsAVX512(x []float32) uint32

//go:noescape
func quantizeQuadsAVX512(dst *uint32, stride int, x []float32, inv float32)

//go:noescape
func bf16PairsAVX512(dst *uint32, stride int, x []float32)

// asmKernels is the tile kernel set of path p on amd64 for a CPU with
// features f. Int8 weights take the VPDPBUSD kernels wherever the CPU has
// them: zmm on the avx512 path with AVX512_VNNI (Intel Cascade Lake and Ice
// Lake have it without AVX512_BF16), ymm on the avx2 path with AVX-VNNI,
// else the AVX2 integer kernels (the same bits on every path). F32 weights
// take the f32 FMA kernels on the bf16 path. The AMX path is the bf16 path
// with AMX tiles for bf16 and int8 weights whose K fills whole tile steps
// (the others take its VDPBF16PS and VNNI kernels).
func asmKernels(p kernels.Path, f kernels.Features) (kernelSet, bool) {
	switch p {
	case kernels.AVX2:
		s := kernelSet{pairs: pairs256Kernels, f32: f32x256Kernels, quads: i8x256Kernels, rows: 4, f32Rows: 6,
			widen: widenPairsAVX2, widenRows: 16}
		if f.AVXVNNI {
			s.quads, s.quadRows = vnni256Kernels, 6
		}
		return s, true
	case kernels.AVX512:
		s := kernelSet{pairs: pairs512Kernels, f32: f32x512Kernels, quads: i8x256Kernels, rows: regRows, quadRows: 4,
			widen: widenPairsAVX512, widenRows: 24, coded: [numPrefetches]*[maxRows + 1]kernel{PrefetchL2: pairs512Coded}}
		if f.AVX512VNNI {
			s.quads, s.quadRows = vnni512Kernels, regRows
		}
		return s, true
	case kernels.AVX512BF16, kernels.AMX:
		s := kernelSet{pairs: bf16x512Kernels, f32: f32x512Kernels, quads: vnni512Kernels, rows: regRows, bf16Act: true,
			coded: [numPrefetches]*[maxRows + 1]kernel{PrefetchL2: bf16x512Coded, PrefetchL1: bf16x512CodedL1}}
		if p == kernels.AMX {
			s.tilePairs, s.tileQuads, s.tileCoded = &amxPairsKernels, &amxQuadsKernels, &amxCodedKernels
		}
		return s, true
	}
	return kernelSet{}, false
}

//go:noescape
func widenPairsAVX512(dst *float32, src *uint32, pairs int)

//go:noescape
func widenPairsAVX2(dst *float32, src *uint32, pairs int)
