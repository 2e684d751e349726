//go:build !purego

#include "textflag.h"

// The interval ends of the logits screen (intervalEnds in screen.go), bit
// for bit: y = lo + hi, d = (min(n1·a, n2·b) + floor) + |y|·2⁻²¹, then
// [y − d, y + d], or [−Inf, +Inf] where d < +Inf fails (overflow, NaN). The
// products are never NaN (n1, n2, a and b are finite and not negative), so
// VMINPS, which returns its second source for a NaN, agrees with min.

// func intervalEndsAVX512(lo, hi, a, b *float32, n int, n1, n2, floor float32) int
TEXT ·intervalEndsAVX512(SB), NOSPLIT, $0-64
	MOVQ lo+0(FP), DI
	MOVQ hi+8(FP), SI
	MOVQ a+16(FP), R8
	MOVQ b+24(FP), R9
	MOVQ n+32(FP), CX
	SHRQ $4, CX
	MOVQ CX, AX
	SHLQ $4, AX
	MOVQ AX, ret+56(FP)
	TESTQ CX, CX
	JZ done
	VBROADCASTSS n1+40(FP), Z10
	VBROADCASTSS n2+44(FP), Z11
	VBROADCASTSS floor+48(FP), Z12
	MOVL $0x7fffffff, AX
	VPBROADCASTD AX, Z13
	MOVL $0x35000000, AX // 2⁻²¹
	VPBROADCASTD AX, Z14
	MOVL $0x7f800000, AX // +Inf
	VPBROADCASTD AX, Z15
	MOVL $0xff800000, AX // −Inf
	VPBROADCASTD AX, Z16
loop:
	VMOVUPS (DI), Z0
	VADDPS (SI), Z0, Z0
	VMULPS (R8), Z10, Z1
	VMULPS (R9), Z11, Z2
	VMINPS Z2, Z1, Z1
	VADDPS Z12, Z1, Z1
	VPANDD Z13, Z0, Z3
	VMULPS Z14, Z3, Z3
	VADDPS Z3, Z1, Z1
	VCMPPS $0x11, Z15, Z1, K1 // d < +Inf, false for NaN
	VSUBPS Z1, Z0, Z4
	VADDPS Z1, Z0, Z5
	VBLENDMPS Z4, Z16, K1, Z4
	VBLENDMPS Z5, Z15, K1, Z5
	VMOVUPS Z4, (DI)
	VMOVUPS Z5, (SI)
	ADDQ $64, DI
	ADDQ $64, SI
	ADDQ $64, R8
	ADDQ $64, R9
	DECQ CX
	JNZ loop
done:
	VZEROUPPER
	RET

// func intervalEndsAVX2(lo, hi, a, b *float32, n int, n1, n2, floor float32) int
TEXT ·intervalEndsAVX2(SB), NOSPLIT, $0-64
	MOVQ lo+0(FP), DI
	MOVQ hi+8(FP), SI
	MOVQ a+16(FP), R8
	MOVQ b+24(FP), R9
	MOVQ n+32(FP), CX
	SHRQ $3, CX
	MOVQ CX, AX
	SHLQ $3, AX
	MOVQ AX, ret+56(FP)
	TESTQ CX, CX
	JZ done
	VBROADCASTSS n1+40(FP), Y10
	VBROADCASTSS n2+44(FP), Y11
	VBROADCASTSS floor+48(FP), Y12
	MOVL $0x7fffffff, AX
	VMOVD AX, X13
	VPBROADCASTD X13, Y13
	MOVL $0x35000000, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14
	MOVL $0x7f800000, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	MOVL $0xff800000, AX
	VMOVD AX, X9
	VPBROADCASTD X9, Y9
loop:
	VMOVUPS (DI), Y0
	VADDPS (SI), Y0, Y0
	VMULPS (R8), Y10, Y1
	VMULPS (R9), Y11, Y2
	VMINPS Y2, Y1, Y1
	VADDPS Y12, Y1, Y1
	VPAND Y13, Y0, Y3
	VMULPS Y14, Y3, Y3
	VADDPS Y3, Y1, Y1
	VCMPPS $0x11, Y15, Y1, Y6 // d < +Inf, false for NaN
	VSUBPS Y1, Y0, Y4
	VADDPS Y1, Y0, Y5
	VBLENDVPS Y6, Y4, Y9, Y4  // mask set: y − d, else −Inf
	VBLENDVPS Y6, Y5, Y15, Y5
	VMOVUPS Y4, (DI)
	VMOVUPS Y5, (SI)
	ADDQ $32, DI
	ADDQ $32, SI
	ADDQ $32, R8
	ADDQ $32, R9
	DECQ CX
	JNZ loop
done:
	VZEROUPPER
	RET
