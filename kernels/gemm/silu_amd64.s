//go:build !purego

#include "textflag.h"

#define BCAST(bits, z) MOVL $bits, AX; VPBROADCASTD AX, z

// func siluMulAVX512(h, u *float32, n int)
// h[i] = silu(h[i])·u[i] for n (a multiple of 16) elements, the same
// operations in the same order as siluMul in silu.go.
TEXT ·siluMulAVX512(SB), NOSPLIT, $0-24
	MOVQ h+0(FP), DI
	MOVQ u+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	JZ done
	BCAST(0x80000000, Z16) // sign
	BCAST(0xc2ae0000, Z17) // -87
	BCAST(0x42b00000, Z18) // 88
	BCAST(0x3fb8aa3b, Z19) // log2e
	BCAST(0x4b400000, Z20) // magic
	BCAST(0x3f318000, Z21) // ln2hi
	BCAST(0xb95e8083, Z22) // ln2lo
	BCAST(0x39506967, Z23) // c5
	BCAST(0x3ab743ce, Z24) // c4
	BCAST(0x3c088908, Z25) // c3
	BCAST(0x3d2aa9c1, Z26) // c2
	BCAST(0x3e2aaaaa, Z27) // c1
	BCAST(0x3f000000, Z28) // c0
	BCAST(0x3f800000, Z29) // 1
	BCAST(127, Z30)
loop:
	VMOVUPS (DI), Z0       // g
	VPXORD Z16, Z0, Z1     // x = -g
	VMAXPS Z17, Z1, Z1
	VMINPS Z18, Z1, Z1
	VMULPS Z19, Z1, Z2     // n = round(x·log2e)
	VADDPS Z20, Z2, Z2
	VSUBPS Z20, Z2, Z2
	VMULPS Z21, Z2, Z3     // r = x - n·ln2hi - n·ln2lo
	VSUBPS Z3, Z1, Z3
	VMULPS Z22, Z2, Z4
	VSUBPS Z4, Z3, Z3
	VMULPS Z23, Z3, Z4     // p = c5·r + c4, then p·r + c3 … c0
	VADDPS Z24, Z4, Z4
	VMULPS Z3, Z4, Z4
	VADDPS Z25, Z4, Z4
	VMULPS Z3, Z4, Z4
	VADDPS Z26, Z4, Z4
	VMULPS Z3, Z4, Z4
	VADDPS Z27, Z4, Z4
	VMULPS Z3, Z4, Z4
	VADDPS Z28, Z4, Z4
	VMULPS Z3, Z3, Z5      // p·r² + r + 1
	VMULPS Z5, Z4, Z4
	VADDPS Z3, Z4, Z4
	VADDPS Z29, Z4, Z4
	VCVTPS2DQ Z2, Z5       // · 2^n
	VPADDD Z30, Z5, Z5
	VPSLLD $23, Z5, Z5
	VMULPS Z5, Z4, Z4
	VADDPS Z29, Z4, Z4     // g / (1 + e^x) · u
	VDIVPS Z4, Z0, Z0
	VMULPS (SI), Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ $64, DI
	ADDQ $64, SI
	DECQ CX
	JNZ loop
done:
	VZEROUPPER
	RET
