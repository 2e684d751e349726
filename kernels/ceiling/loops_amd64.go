//go:build !purego

package ceiling

//go:generate go run ../internal/asmgen bf16_amd64.h amx_amd64.h

import "github.com/ellm-dev/ellm/kernels"

//go:noescape
func fma512(n int)

//go:noescape
func fma256(n int)

//go:noescape
func bf16dot(n int)

//go:noescape
func vnni(n int)

//go:noescape
func amxBF16(n int)

//go:noescape
func amxInt8(n int)

//go:noescape
func readSumAsm(p *byte, n int) uint64

// readSum sums b (a multiple of 256 bytes) as 64-bit lanes with 512-bit
// loads, falling back to 64-bit loads without AVX-512.
func readSum(b []byte) uint64 {
	if len(b) == 0 || !kernels.CPU().AVX512F {
		return readSumGo(b)
	}
	return readSumAsm(&b[0], len(b))
}

func loops() loopSet {
	f := kernels.CPU()
	var s loopSet
	if f.AVX512F {
		s.fma512 = &loop{fma512, 24 * 16 * 2}
	}
	if f.AVX2 && f.FMA {
		s.fma256 = &loop{fma256, 12 * 8 * 2}
	}
	if f.AVX512BF16 {
		s.bf16 = &loop{bf16dot, 24 * 16 * 4}
	}
	if f.AVX512VNNI {
		s.vnni = &loop{vnni, 24 * 16 * 8}
	}
	if f.AMXGranted && f.AMXBF16 {
		s.amxBF16 = &loop{amxBF16, 4 * 16 * 16 * 32 * 2}
	}
	if f.AMXGranted && f.AMXInt8 {
		s.amxInt8 = &loop{amxInt8, 4 * 16 * 16 * 64 * 2}
	}
	return s
}
