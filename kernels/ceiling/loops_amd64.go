//go:build !purego

package ceiling

//go:generate go run ../internal/asmgen bf16_amd64.h amx_amd64.h vnni256_amd64.h

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
func vnni256(n int)

//go:noescape
func maddubs256(n int)

//go:noescape
func amxBF16(n int)

//go:noescape
func amxInt8(n int)

//go:noescape
func readSumAsm(p *byte, n int) uint64

//go:noescape
func readSum256Asm(p *byte, n int) uint64

// readSum sums b (a multiple of 256 bytes) as 64-bit lanes with the widest
// loads the CPU has (512 or 256 bits), else 64-bit loads: a decode kernel's
// fraction of DRAM bandwidth must not be measured against a reader slower
// than the kernel.
func readSum(b []byte) uint64 {
	switch f := kernels.CPU(); {
	case len(b) == 0:
		return 0
	case f.AVX512F:
		return readSumAsm(&b[0], len(b))
	case f.AVX2:
		return readSum256Asm(&b[0], len(b))
	}
	return readSumGo(b)
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
	switch {
	case f.AVXVNNI:
		s.int8x256 = &loop{vnni256, 12 * 8 * 8}
	case f.AVX2:
		s.int8x256 = &loop{maddubs256, 6 * 8 * 8}
	}
	if f.AMXGranted && f.AMXBF16 {
		s.amxBF16 = &loop{amxBF16, 4 * 16 * 16 * 32 * 2}
	}
	if f.AMXGranted && f.AMXInt8 {
		s.amxInt8 = &loop{amxInt8, 4 * 16 * 16 * 64 * 2}
	}
	return s
}
