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

// func siluMulAVX2(h, u *float32, n int, c *[16][8]uint32)
// The same in ymm registers, 8 elements at a time (n a multiple of 8); the
// constants come from c (siluConstsAVX2, the bits above, 8 copies each),
// as there are too few registers to hold them.
#define C(i) (32*i)(R8)
TEXT ·siluMulAVX2(SB), NOSPLIT, $0-32
	MOVQ h+0(FP), DI
	MOVQ u+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ c+24(FP), R8
	SHRQ $3, CX
	JZ done2
	VMOVDQU C(0), Y8   // sign
	VMOVDQU C(1), Y9   // -87
	VMOVDQU C(2), Y10  // 88
	VMOVDQU C(3), Y11  // log2e
	VMOVDQU C(4), Y12  // magic
	VMOVDQU C(13), Y13 // 1
	VMOVDQU C(14), Y14 // 127
loop2:
	VMOVUPS (DI), Y0
	VXORPS Y8, Y0, Y1
	VMAXPS Y9, Y1, Y1
	VMINPS Y10, Y1, Y1
	VMULPS Y11, Y1, Y2
	VADDPS Y12, Y2, Y2
	VSUBPS Y12, Y2, Y2
	VMULPS C(5), Y2, Y3
	VSUBPS Y3, Y1, Y3
	VMULPS C(6), Y2, Y4
	VSUBPS Y4, Y3, Y3
	VMULPS C(7), Y3, Y4
	VADDPS C(8), Y4, Y4
	VMULPS Y3, Y4, Y4
	VADDPS C(9), Y4, Y4
	VMULPS Y3, Y4, Y4
	VADDPS C(10), Y4, Y4
	VMULPS Y3, Y4, Y4
	VADDPS C(11), Y4, Y4
	VMULPS Y3, Y4, Y4
	VADDPS C(12), Y4, Y4
	VMULPS Y3, Y3, Y5
	VMULPS Y5, Y4, Y4
	VADDPS Y3, Y4, Y4
	VADDPS Y13, Y4, Y4
	VCVTPS2DQ Y2, Y5
	VPADDD Y14, Y5, Y5
	VPSLLD $23, Y5, Y5
	VMULPS Y5, Y4, Y4
	VADDPS Y13, Y4, Y4
	VDIVPS Y4, Y0, Y0
	VMULPS (SI), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	DECQ CX
	JNZ loop2
done2:
	VZEROUPPER
	RET
