//go:build !purego

#include "textflag.h"

// Activation preparation with AVX-512F or AVX2, bit for bit the Go
// functions in generic.go (absMaxBits ~ the amax loop of quantizeRow,
// quantizeQuads ~ quantize, bf16Pairs ~ toBF16, f32Strided ~ the f32 form's
// copy). Each handles len(x)/16 blocks of 16; the caller does the rest. dst
// is written every `stride` bytes.

// func absMaxBitsAVX512(x []float32) uint32
TEXT ·absMaxBitsAVX512(SB), NOSPLIT, $0-28
	MOVQ x_base+0(FP), SI
	MOVQ x_len+8(FP), CX
	SHRQ $4, CX
	MOVL $0x7fffffff, AX
	VPBROADCASTD AX, Z2
	VPXORD Z1, Z1, Z1
	TESTQ CX, CX
	JZ reduce
loop:
	VPANDD (SI), Z2, Z0
	VPMAXUD Z0, Z1, Z1
	ADDQ $64, SI
	DECQ CX
	JNZ loop
reduce:
	VEXTRACTI64X4 $1, Z1, Y0
	VPMAXUD Y0, Y1, Y1
	VEXTRACTI128 $1, Y1, X0
	VPMAXUD X0, X1, X1
	VPSHUFD $0x4e, X1, X0
	VPMAXUD X0, X1, X1
	VPSHUFD $0xb1, X1, X0
	VPMAXUD X0, X1, X1
	VMOVD X1, AX
	MOVL AX, ret+24(FP)
	VZEROUPPER
	RET

// func quantizeQuadsAVX512(dst *uint32, stride int, x []float32, inv float32)
// Per element: f = x·inv; NaN or f ≤ -127 → -127, f > 127 → 127, else
// round to nearest even (VCVTPS2DQ in the default MXCSR mode); +128 as u8.
TEXT ·quantizeQuadsAVX512(SB), NOSPLIT, $0-44
	MOVQ dst+0(FP), DI
	MOVQ stride+8(FP), R8
	MOVQ x_base+16(FP), SI
	MOVQ x_len+24(FP), CX
	SHRQ $4, CX
	JZ done
	LEAQ (R8)(R8*2), R9
	LEAQ (R8*4), R10
	VBROADCASTSS inv+40(FP), Z4
	MOVL $0xc2fe0000, AX // -127
	VPBROADCASTD AX, Z5
	MOVL $0x42fe0000, AX // 127
	VPBROADCASTD AX, Z6
	MOVL $128, AX
	VPBROADCASTD AX, Z7
loop:
	VMULPS (SI), Z4, Z0
	VMAXPS Z5, Z0, Z0 // a NaN in Z0 gives the second source, -127
	VMINPS Z6, Z0, Z0
	VCVTPS2DQ Z0, Z0
	VPADDD Z7, Z0, Z0
	VPMOVDB Z0, X0
	VMOVD X0, (DI)
	VPEXTRD $1, X0, (DI)(R8*1)
	VPEXTRD $2, X0, (DI)(R8*2)
	VPEXTRD $3, X0, (DI)(R9*1)
	ADDQ R10, DI
	ADDQ $64, SI
	DECQ CX
	JNZ loop
done:
	VZEROUPPER
	RET

// func bf16PairsAVX512(dst *uint32, stride int, x []float32)
// Per element b (f32 bits): NaN → b|0x00400000, zero or denormal → sign
// only, else b + 0x7fff + (b>>16 & 1); the bf16 is then bits 16-31, and
// VPMOVDW packs the 16 of them in order: pairs with the even k low.
TEXT ·bf16PairsAVX512(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ stride+8(FP), R8
	MOVQ x_base+16(FP), SI
	MOVQ x_len+24(FP), CX
	SHRQ $4, CX
	JZ done
	LEAQ (R8)(R8*2), R9
	LEAQ (R8*4), R10
	MOVL $0x7fffffff, AX
	VPBROADCASTD AX, Z10
	MOVL $0x7f800000, AX
	VPBROADCASTD AX, Z11
	MOVL $1, AX
	VPBROADCASTD AX, Z12
	MOVL $0x7fff, AX
	VPBROADCASTD AX, Z13
	MOVL $0x00400000, AX
	VPBROADCASTD AX, Z14
	MOVL $0x80000000, AX
	VPBROADCASTD AX, Z15
loop:
	VMOVDQU32 (SI), Z0
	VPANDD Z10, Z0, Z1
	VPCMPUD $6, Z11, Z1, K1 // |b| > Inf: NaN
	VPTESTNMD Z11, Z0, K2   // exponent 0: zero or denormal
	VPSRLD $16, Z0, Z2
	VPANDD Z12, Z2, Z2
	VPADDD Z13, Z2, Z2
	VPADDD Z0, Z2, Z2
	VPORD Z14, Z0, K1, Z2
	VPANDD Z15, Z0, K2, Z2
	VPSRLD $16, Z2, Z2
	VPMOVDW Z2, Y2
	VMOVD X2, (DI)
	VPEXTRD $1, X2, (DI)(R8*1)
	VPEXTRD $2, X2, (DI)(R8*2)
	VPEXTRD $3, X2, (DI)(R9*1)
	ADDQ R10, DI
	VEXTRACTI128 $1, Y2, X2
	VMOVD X2, (DI)
	VPEXTRD $1, X2, (DI)(R8*1)
	VPEXTRD $2, X2, (DI)(R8*2)
	VPEXTRD $3, X2, (DI)(R9*1)
	ADDQ R10, DI
	ADDQ $64, SI
	DECQ CX
	JNZ loop
done:
	VZEROUPPER
	RET

// func widenPairsAVX512(dst *float32, src *uint32, pairs int)
// Widens `pairs` steps of a bf16-pair panel to two steps of an f32 panel
// each: lo = bits<<16 (even k), hi = bits&0xffff0000 (odd k), exactly.
TEXT ·widenPairsAVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ pairs+16(FP), CX
	TESTQ CX, CX
	JZ done
	VPTERNLOGD $0xff, Z2, Z2, Z2
	VPSLLD $16, Z2, Z2
loop:
	VMOVDQU32 (SI), Z0
	VPSLLD $16, Z0, Z1
	VPANDD Z2, Z0, Z0
	VMOVUPS Z1, (DI)
	VMOVUPS Z0, 64(DI)
	ADDQ $64, SI
	ADDQ $128, DI
	DECQ CX
	JNZ loop
done:
	VZEROUPPER
	RET

// func widenPairsAVX2(dst *float32, src *uint32, pairs int)
// widenPairsAVX512 on ymm: a step's 16 pairs in two halves of 8.
TEXT ·widenPairsAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ pairs+16(FP), CX
	TESTQ CX, CX
	JZ done
	VPCMPEQD Y4, Y4, Y4
	VPSLLD $16, Y4, Y4
loop:
	VMOVDQU (SI), Y0
	VMOVDQU 32(SI), Y1
	VPSLLD $16, Y0, Y2
	VPSLLD $16, Y1, Y3
	VPAND Y4, Y0, Y0
	VPAND Y4, Y1, Y1
	VMOVUPS Y2, (DI)
	VMOVUPS Y3, 32(DI)
	VMOVUPS Y0, 64(DI)
	VMOVUPS Y1, 96(DI)
	ADDQ $64, SI
	ADDQ $128, DI
	DECQ CX
	JNZ loop
done:
	VZEROUPPER
	RET

// func absMaxBitsAVX2(x []float32) uint32
TEXT ·absMaxBitsAVX2(SB), NOSPLIT, $0-28
	MOVQ x_base+0(FP), SI
	MOVQ x_len+8(FP), CX
	SHRQ $4, CX
	MOVL $0x7fffffff, AX
	VMOVD AX, X2
	VPBROADCASTD X2, Y2
	VPXOR Y1, Y1, Y1
	VPXOR Y3, Y3, Y3
	TESTQ CX, CX
	JZ reduce
loop:
	VPAND (SI), Y2, Y0
	VPMAXUD Y0, Y1, Y1
	VPAND 32(SI), Y2, Y0
	VPMAXUD Y0, Y3, Y3
	ADDQ $64, SI
	DECQ CX
	JNZ loop
reduce:
	VPMAXUD Y3, Y1, Y1
	VEXTRACTI128 $1, Y1, X0
	VPMAXUD X0, X1, X1
	VPSHUFD $0x4e, X1, X0
	VPMAXUD X0, X1, X1
	VPSHUFD $0xb1, X1, X0
	VPMAXUD X0, X1, X1
	VMOVD X1, AX
	MOVL AX, ret+24(FP)
	VZEROUPPER
	RET

// func quantizeQuadsAVX2(dst *uint32, stride int, x []float32, inv float32)
// quantizeQuadsAVX512's steps on two halves of 8; the bytes are packed
// with unsigned saturation (the values are 1..255 already), which within
// 128-bit lanes leaves the four quads in the order 0, 2, 1, 3.
TEXT ·quantizeQuadsAVX2(SB), NOSPLIT, $0-44
	MOVQ dst+0(FP), DI
	MOVQ stride+8(FP), R8
	MOVQ x_base+16(FP), SI
	MOVQ x_len+24(FP), CX
	SHRQ $4, CX
	JZ done
	LEAQ (R8)(R8*2), R9
	LEAQ (R8*4), R10
	VBROADCASTSS inv+40(FP), Y4
	MOVL $0xc2fe0000, AX // -127
	VMOVD AX, X5
	VPBROADCASTD X5, Y5
	MOVL $0x42fe0000, AX // 127
	VMOVD AX, X6
	VPBROADCASTD X6, Y6
	MOVL $128, AX
	VMOVD AX, X7
	VPBROADCASTD X7, Y7
loop:
	VMULPS (SI), Y4, Y0
	VMULPS 32(SI), Y4, Y1
	VMAXPS Y5, Y0, Y0 // a NaN in Y0 gives the second source, -127
	VMAXPS Y5, Y1, Y1
	VMINPS Y6, Y0, Y0
	VMINPS Y6, Y1, Y1
	VCVTPS2DQ Y0, Y0
	VCVTPS2DQ Y1, Y1
	VPADDD Y7, Y0, Y0
	VPADDD Y7, Y1, Y1
	VPACKUSDW Y1, Y0, Y0 // words: 0-3, 8-11 | 4-7, 12-15
	VEXTRACTI128 $1, Y0, X1
	VPACKUSWB X1, X0, X0 // quads: 0-3, 8-11, 4-7, 12-15
	VMOVD X0, (DI)
	VPEXTRD $2, X0, (DI)(R8*1)
	VPEXTRD $1, X0, (DI)(R8*2)
	VPEXTRD $3, X0, (DI)(R9*1)
	ADDQ R10, DI
	ADDQ $64, SI
	DECQ CX
	JNZ loop
done:
	VZEROUPPER
	RET

// func f32StridedAVX2(dst *float32, stride int, x []float32)
// Copies x[i] to dst + i·stride bytes: a row into its place in a row tile
// of the f32 form.
TEXT ·f32StridedAVX2(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ stride+8(FP), R8
	MOVQ x_base+16(FP), SI
	MOVQ x_len+24(FP), CX
	SHRQ $3, CX
	ANDQ $-2, CX // blocks of 16, in halves of 8
	JZ done
	LEAQ (R8)(R8*2), R9
	LEAQ (R8*4), R10
loop:
	VMOVUPS (SI), X0
	VMOVUPS 16(SI), X1
	VMOVSS X0, (DI)
	VEXTRACTPS $1, X0, (DI)(R8*1)
	VEXTRACTPS $2, X0, (DI)(R8*2)
	VEXTRACTPS $3, X0, (DI)(R9*1)
	ADDQ R10, DI
	VMOVSS X1, (DI)
	VEXTRACTPS $1, X1, (DI)(R8*1)
	VEXTRACTPS $2, X1, (DI)(R8*2)
	VEXTRACTPS $3, X1, (DI)(R9*1)
	ADDQ R10, DI
	ADDQ $32, SI
	DECQ CX
	JNZ loop
done:
	RET
