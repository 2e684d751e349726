//go:build !purego

#include "textflag.h"

// Load-time kernels: what a load does once per weight, in the bytes and bits
// of their Go definitions.

// codeBlock (coded.go) of one tile-step block, bit for bit where ok: a pair
// of rows a zmm each, their low bytes in pairSlot order by VPACKUSWB (lane L:
// bf16 8L..8L+7 of the first row, then of the second), their high bytes the
// same way, each high byte's code by comparing it with the table's fifteen,
// and the codes of slots j and j+32 in code byte j. The block's escape is
// the first high byte without a code; a second one makes the block raw (ok
// false, dst partly written), as in Go, where the order they are met in
// changes nothing.

// func codeBlockAVX512(pairs *uint32, dst *byte, lut *[32]byte) (esc byte, ok bool)
TEXT ·codeBlockAVX512(SB), NOSPLIT, $0-26
	MOVQ pairs+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ lut+16(FP), DX
	// Z16-Z30: the table's high bytes, broadcast
	VPBROADCASTB 0(DX), Z16
	VPBROADCASTB 1(DX), Z17
	VPBROADCASTB 2(DX), Z18
	VPBROADCASTB 3(DX), Z19
	VPBROADCASTB 4(DX), Z20
	VPBROADCASTB 5(DX), Z21
	VPBROADCASTB 6(DX), Z22
	VPBROADCASTB 7(DX), Z23
	VPBROADCASTB 8(DX), Z24
	VPBROADCASTB 9(DX), Z25
	VPBROADCASTB 10(DX), Z26
	VPBROADCASTB 11(DX), Z27
	VPBROADCASTB 12(DX), Z28
	VPBROADCASTB 13(DX), Z29
	VPBROADCASTB 14(DX), Z30
	MOVL $0x00ff00ff, AX
	VPBROADCASTD AX, Z15 // low byte of each bf16
	VPTERNLOGD $0xff, Z14, Z14, Z14 // 0xff: no code yet
	XORL BX, BX // the escape
	XORL R9, R9 // whether it is set
	XORL CX, CX // pair of rows
pair:
	MOVQ CX, R8
	SHLQ $7, R8 // 128 bytes of pairs a pair of rows
	VMOVDQU64 0(SI)(R8*1), Z0
	VMOVDQU64 64(SI)(R8*1), Z1
	VPANDD Z15, Z0, Z2
	VPANDD Z15, Z1, Z3
	VPACKUSWB Z3, Z2, Z2
	MOVQ CX, R10
	SHLQ $6, R10
	VMOVDQU64 Z2, 0(DI)(R10*1) // the 64 low bytes
	VPSRLW $8, Z0, Z0
	VPSRLW $8, Z1, Z1
	VPACKUSWB Z1, Z0, Z0 // the 64 high bytes
	VMOVDQA64 Z14, Z1
	VPCMPEQB Z16, Z0, K1
	VPBROADCASTB codes<>+0(SB), K1, Z1
	VPCMPEQB Z17, Z0, K1
	VPBROADCASTB codes<>+1(SB), K1, Z1
	VPCMPEQB Z18, Z0, K1
	VPBROADCASTB codes<>+2(SB), K1, Z1
	VPCMPEQB Z19, Z0, K1
	VPBROADCASTB codes<>+3(SB), K1, Z1
	VPCMPEQB Z20, Z0, K1
	VPBROADCASTB codes<>+4(SB), K1, Z1
	VPCMPEQB Z21, Z0, K1
	VPBROADCASTB codes<>+5(SB), K1, Z1
	VPCMPEQB Z22, Z0, K1
	VPBROADCASTB codes<>+6(SB), K1, Z1
	VPCMPEQB Z23, Z0, K1
	VPBROADCASTB codes<>+7(SB), K1, Z1
	VPCMPEQB Z24, Z0, K1
	VPBROADCASTB codes<>+8(SB), K1, Z1
	VPCMPEQB Z25, Z0, K1
	VPBROADCASTB codes<>+9(SB), K1, Z1
	VPCMPEQB Z26, Z0, K1
	VPBROADCASTB codes<>+10(SB), K1, Z1
	VPCMPEQB Z27, Z0, K1
	VPBROADCASTB codes<>+11(SB), K1, Z1
	VPCMPEQB Z28, Z0, K1
	VPBROADCASTB codes<>+12(SB), K1, Z1
	VPCMPEQB Z29, Z0, K1
	VPBROADCASTB codes<>+13(SB), K1, Z1
	VPCMPEQB Z30, Z0, K1
	VPBROADCASTB codes<>+14(SB), K1, Z1
	VPCMPEQB Z14, Z1, K1 // high bytes without a code
	KORTESTQ K1, K1
	JZ codes
	TESTL R9, R9
	JNZ compare
	// the first high byte without a code is the escape: slot i is row
	// i>>3&1 of the pair, bf16 (i>>4)<<3 | i&7
	KMOVQ K1, AX
	TZCNTQ AX, AX
	MOVQ AX, R11
	SHRQ $3, R11
	ANDQ $1, R11
	SHLQ $6, R11 // the row's 64 bytes
	MOVQ AX, R12
	SHRQ $4, R12
	SHLQ $3, R12
	ANDQ $7, AX
	ORQ AX, R12
	LEAQ 1(R11)(R12*2), R11 // the bf16's high byte
	ADDQ R8, R11
	MOVBLZX 0(SI)(R11*1), BX
	MOVL $1, R9
compare:
	VPBROADCASTB BX, Z2
	VPCMPEQB Z2, Z0, K1, K2 // without a code, and the escape
	KXORQ K1, K2, K3
	KORTESTQ K3, K3
	JNZ raw
	VPBROADCASTB codes<>+15(SB), K1, Z1
codes:
	VEXTRACTI64X4 $1, Z1, Y2
	VPSLLW $4, Y2, Y2
	VPOR Y2, Y1, Y1
	MOVQ CX, R10
	SHLQ $5, R10
	VMOVDQU Y1, 512(DI)(R10*1)
	INCQ CX
	CMPQ CX, $8
	JLT pair
	VZEROUPPER
	MOVB BX, esc+24(FP)
	MOVB $1, ok+25(FP)
	RET
raw:
	VZEROUPPER
	MOVB $0, esc+24(FP)
	MOVB $0, ok+25(FP)
	RET

// codes is code c at byte c.
DATA codes<>+0(SB)/8, $0x0706050403020100
DATA codes<>+8(SB)/8, $0x0f0e0d0c0b0a0908
GLOBL codes<>(SB), RODATA|NOPTR, $16

// The largest |w| of each channel of a panel of bf16 pairs, as bits: a word
// maximum over the magnitudes (the integer order is the float order), then
// the larger of each pair's two.

// func panelAbsMaxAVX512(pairs *uint32, steps int, amax *[16]uint32)
TEXT ·panelAbsMaxAVX512(SB), NOSPLIT, $0-24
	MOVQ pairs+0(FP), SI
	MOVQ steps+8(FP), CX
	MOVQ amax+16(FP), DI
	MOVL $0x7fff7fff, AX
	VPBROADCASTD AX, Z1
	VPXORD Z0, Z0, Z0
amaxloop:
	VPANDD (SI), Z1, Z2
	VPMAXUW Z2, Z0, Z0
	ADDQ $64, SI
	DECQ CX
	JNZ amaxloop
	VPSRLD $16, Z0, Z2
	MOVL $0xffff, AX
	VPBROADCASTD AX, Z1
	VPANDD Z1, Z0, Z0
	VPMAXUD Z2, Z0, Z0
	VMOVDQU32 Z0, (DI)
	VZEROUPPER
	RET

// The screen's quantization and sums of a panel (screenPanelSIMD in
// screen.go), four weights of each channel a pass: q = round(w·inv) to
// nearest even after clamping w·inv to [−127, 127] (NaN to −127, as
// quantize), packed four to a quad; then for the weights in order the
// error w − s·q, its largest magnitude and the sum of its squares, in
// float64 (two halves of eight channels).

// QUANT(w, q): w (f32 weights) times inv, clamped and rounded into q.
#define QUANT(w, q) \
	VMULPS Z31, w, q; \
	VMAXPS Z27, q, q; \
	VMINPS Z26, q, q; \
	VCVTPS2DQ q, q

// ERRS(wy, qy, sw, maxe, sqe): the errors of eight channels' weights wy
// (f32) and codes qy (int32), whose scales are sw, into the largest |e|
// maxe and Σe² sqe.
#define ERRS(wy, qy, sw, maxe, sqe) \
	VCVTPS2PD wy, Z20; \
	VCVTDQ2PD qy, Z21; \
	VMULPD sw, Z21, Z21; \
	VSUBPD Z21, Z20, Z20; \
	VANDPD Z25, Z20, Z20; \
	VMAXPD Z20, maxe, maxe; \
	VMULPD Z20, Z20, Z20; \
	VADDPD Z20, sqe, sqe

// BOUND(wz, wy, qz, qy): the errors of sixteen weights with their codes.
#define BOUND(wz, wy, qz, qy) \
	ERRS(wy, qy, Z29, Z2, Z4); \
	VEXTRACTF32X8 $1, wz, Y22; \
	VEXTRACTI32X8 $1, qz, Y23; \
	ERRS(Y22, Y23, Z30, Z3, Z5)

// func screenPanelAVX512(pairs *uint32, steps int, sw *float32, inv *[16]float32, quads *uint32, f *panelSums)
TEXT ·screenPanelAVX512(SB), NOSPLIT, $0-48
	MOVQ pairs+0(FP), SI
	MOVQ steps+8(FP), CX
	SHRQ $1, CX
	MOVQ sw+16(FP), AX
	MOVQ inv+24(FP), DX
	MOVQ quads+32(FP), DI
	MOVQ f+40(FP), R8
	VCVTPS2PD (AX), Z29
	VCVTPS2PD 32(AX), Z30
	VMOVUPS (DX), Z31
	MOVL $0xc2fe0000, AX // −127
	VPBROADCASTD AX, Z27
	MOVL $0x42fe0000, AX // 127
	VPBROADCASTD AX, Z26
	MOVQ $0x7fffffffffffffff, AX
	VPBROADCASTQ AX, Z25
	MOVL $0xffff0000, AX
	VPBROADCASTD AX, Z24
	MOVL $0xff, AX
	VPBROADCASTD AX, Z28
	VPXORD Z0, Z0, Z0 // Σq
	VPXORD Z1, Z1, Z1 // Σ|q|
	VPXORD Z2, Z2, Z2 // largest |e|, channels 0-7
	VPXORD Z3, Z3, Z3 // 8-15
	VPXORD Z4, Z4, Z4 // Σe², channels 0-7
	VPXORD Z5, Z5, Z5 // 8-15
quadloop:
	VMOVDQU32 (SI), Z6
	VMOVDQU32 64(SI), Z7
	VPSLLD $16, Z6, Z8  // weight 4i
	VPANDD Z24, Z6, Z9  // 4i+1
	VPSLLD $16, Z7, Z10 // 4i+2
	VPANDD Z24, Z7, Z11 // 4i+3
	QUANT(Z8, Z12)
	QUANT(Z9, Z13)
	QUANT(Z10, Z14)
	QUANT(Z11, Z15)
	VPADDD Z12, Z13, Z16
	VPADDD Z14, Z15, Z17
	VPADDD Z16, Z17, Z16
	VPADDD Z16, Z0, Z0
	VPABSD Z12, Z16
	VPABSD Z13, Z17
	VPADDD Z16, Z17, Z16
	VPABSD Z14, Z17
	VPADDD Z16, Z17, Z16
	VPABSD Z15, Z17
	VPADDD Z16, Z17, Z16
	VPADDD Z16, Z1, Z1
	// quad: the four codes' low bytes, weight 4i in the lowest
	VPANDD Z28, Z12, Z16
	VPSLLD $24, Z13, Z17
	VPSRLD $16, Z17, Z17
	VPSLLD $24, Z14, Z18
	VPSRLD $8, Z18, Z18
	VPSLLD $24, Z15, Z19
	VPTERNLOGD $0xfe, Z18, Z17, Z16
	VPORD Z19, Z16, Z16
	VMOVDQU32 Z16, (DI)
	BOUND(Z8, Y8, Z12, Y12)
	BOUND(Z9, Y9, Z13, Y13)
	BOUND(Z10, Y10, Z14, Y14)
	BOUND(Z11, Y11, Z15, Y15)
	ADDQ $128, SI
	ADDQ $64, DI
	DECQ CX
	JNZ quadloop
	VMOVDQU32 Z0, 0(R8)
	VMOVDQU32 Z1, 64(R8)
	VMOVUPD Z2, 128(R8)
	VMOVUPD Z3, 192(R8)
	VMOVUPD Z4, 256(R8)
	VMOVUPD Z5, 320(R8)
	VZEROUPPER
	RET
