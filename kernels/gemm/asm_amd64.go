//go:build !purego

package gemm

import "github.com/ellm-dev/ellm/kernels"

//go:generate go run gen_asm.go

func init() {
	f := kernels.CPU()
	if f.AVX512F {
		simdPrep = &prepFuncs{absMaxBitsAVX512, quantizeQuadsAVX512, bf16PairsAVX512}
		siluAVX512 = siluMulAVX512
	}
	if f.AVX2 {
		siluAVX2 = func(h, u *float32, n int) { siluMulAVX2(h, u, n, &siluConstsAVX2) }
	}
}

// siluConstsAVX2 are silu.go's constants, 8 copies each, in the order
// silu_amd64.s reads them.
var siluConstsAVX2 = func() (c [16][8]uint32) {
	for i, bits := range []uint32{0x80000000, 0xc2ae0000, 0x42b00000, 0x3fb8aa3b, 0x4b400000, 0x3f318000, 0xb95e8083,
		0x39506967, 0x3ab743ce, 0x3c088908, 0x3d2aa9c1, 0x3e2aaaaa, 0x3f000000, 0x3f800000, 127} {
		for j := range c[i] {
			c[i][j] = bits
		}
	}
	return c
}()

//go:noescape
func siluMulAVX2(h, u *float32, n int, c *[16][8]uint32)

//go:noescape
func absMaxBitsAVX512(x []float32) uint32

//go:noescape
func quantizeQuadsAVX512(dst *uint32, stride int, x []float32, inv float32)

//go:noescape
func bf16PairsAVX512(dst *uint32, stride int, x []float32)

// asmKernels is the tile kernel set of path p on amd64. Int8 weights take the
// AVX2 integer kernels below the bf16 path (which needs VNNI anyway; the
// results are the same bits), and f32 weights take the f32 FMA kernels on
// the bf16 path.
func asmKernels(p kernels.Path) (kernelSet, bool) {
	switch p {
	case kernels.AVX2:
		return kernelSet{pairs: pairs256Kernels, f32: f32x256Kernels, quads: i8x256Kernels, rows: 4}, true
	case kernels.AVX512:
		return kernelSet{pairs: pairs512Kernels, f32: f32x512Kernels, quads: i8x256Kernels, rows: maxRows, quadRows: 4,
			widen: widenPairsAVX512}, true
	case kernels.AVX512BF16:
		return kernelSet{pairs: bf16x512Kernels, f32: f32x512Kernels, quads: vnni512Kernels, rows: maxRows, bf16Act: true}, true
	}
	return kernelSet{}, false
}

//go:noescape
func siluMulAVX512(h, u *float32, n int)

//go:noescape
func widenPairsAVX512(dst *float32, src *uint32, pairs int)
