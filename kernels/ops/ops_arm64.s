//go:build !purego

#include "textflag.h"

// The NEON versions of this package's loops (dispatch_arm64.go): each the
// Go loop's operations, separately rounded, four lanes a register; n is a
// multiple of 16, and a 16-lane sum lives in four registers (lanes 0-3,
// 4-7, 8-11, 12-15).

// EXP_CONSTS loads expConsts into V16-V27 and the integer 127 into V28.
#define EXP_CONSTS \
	MOVD $·expConsts(SB), R9; \
	VLD1.P 16(R9), [V16.S4]; \
	VDUP V16.S[1], V17.S4; \
	VDUP V16.S[2], V18.S4; \
	VDUP V16.S[3], V19.S4; \
	VDUP V16.S[0], V16.S4; \
	VLD1.P 16(R9), [V20.S4]; \
	VDUP V20.S[1], V21.S4; \
	VDUP V20.S[2], V22.S4; \
	VDUP V20.S[3], V23.S4; \
	VDUP V20.S[0], V20.S4; \
	VLD1 (R9), [V24.S4]; \
	VDUP V24.S[1], V25.S4; \
	VDUP V24.S[2], V26.S4; \
	VDUP V24.S[3], V27.S4; \
	VDUP V24.S[0], V24.S4; \
	MOVD $127, R9; \
	VDUP R9, V28.S4

// EXP(x, mask, n, t, p) sets x to Exp32(x) on four lanes, with the constants
// of EXP_CONSTS: lanes below -87 (and NaN) clamped, computed, then zeroed.
#define EXP(x, mask, n, t, p) \
	VFCMGE V16.S4, x.S4, mask.S4; \
	VFMAX V16.S4, x.S4, x.S4; \
	VFMIN V17.S4, x.S4, x.S4; \
	VFMUL V18.S4, x.S4, n.S4; \
	VFRINTN n.S4, n.S4; \
	VFMUL V19.S4, n.S4, t.S4; \
	VFSUB t.S4, x.S4, x.S4; \
	VFMUL V20.S4, n.S4, t.S4; \
	VFSUB t.S4, x.S4, x.S4; \
	VFMUL V21.S4, x.S4, p.S4; \
	VFADD V22.S4, p.S4, p.S4; \
	VFMUL x.S4, p.S4, p.S4; \
	VFADD V23.S4, p.S4, p.S4; \
	VFMUL x.S4, p.S4, p.S4; \
	VFADD V24.S4, p.S4, p.S4; \
	VFMUL x.S4, p.S4, p.S4; \
	VFADD V25.S4, p.S4, p.S4; \
	VFMUL x.S4, p.S4, p.S4; \
	VFADD V26.S4, p.S4, p.S4; \
	VFMUL x.S4, x.S4, t.S4; \
	VFMUL t.S4, p.S4, p.S4; \
	VFADD x.S4, p.S4, p.S4; \
	VFADD V27.S4, p.S4, p.S4; \
	VFCVTZS n.S4, n.S4; \
	VADD V28.S4, n.S4, n.S4; \
	VSHL $23, n.S4, n.S4; \
	VFMUL n.S4, p.S4, x.S4; \
	VAND mask.B16, x.B16, x.B16

// ROUND(b, t, u, m) rounds the four f32 in b to bf16 as F32ToBF16 does,
// each in the low half of its lane; t, u, m are scratch. The constants:
// V31 1, V30 0x7fff, V29 0x7fffffff, V28 0x7f800000, V27 0x40.
#define ROUND(b, t, u, m) \
	VUSHR $16, b.S4, t.S4; \
	VAND V29.B16, b.B16, m.B16; \
	VCMHI V28.S4, m.S4, m.S4; \
	VAND V31.B16, t.B16, u.B16; \
	VADD V30.S4, u.S4, u.S4; \
	VADD u.S4, b.S4, b.S4; \
	VUSHR $16, b.S4, b.S4; \
	VORR V27.B16, t.B16, t.B16; \
	VBIT m.B16, t.B16, b.B16

// SQUARES_ADD adds the squares of V4-V7 (each product rounded) to the
// lane sums in V0-V3.
#define SQUARES_ADD \
	VFMUL V4.S4, V4.S4, V4.S4; \
	VFMUL V5.S4, V5.S4, V5.S4; \
	VFMUL V6.S4, V6.S4, V6.S4; \
	VFMUL V7.S4, V7.S4, V7.S4; \
	VFADD V4.S4, V0.S4, V0.S4; \
	VFADD V5.S4, V1.S4, V1.S4; \
	VFADD V6.S4, V2.S4, V2.S4; \
	VFADD V7.S4, V3.S4, V3.S4

#define ZERO4(a, b, c, d) \
	VEOR a.B16, a.B16, a.B16; \
	VEOR b.B16, b.B16, b.B16; \
	VEOR c.B16, c.B16, c.B16; \
	VEOR d.B16, d.B16, d.B16

// func sumSqNEON(acc *[16]float32, x *float32, n int)
TEXT ·sumSqNEON(SB), NOSPLIT, $0-24
	MOVD acc+0(FP), R0
	MOVD x+8(FP), R1
	MOVD n+16(FP), R2
	ZERO4(V0, V1, V2, V3)
loop:
	VLD1.P 64(R1), [V4.S4, V5.S4, V6.S4, V7.S4]
	SQUARES_ADD
	SUBS   $16, R2, R2
	BNE    loop
	VST1   [V0.S4, V1.S4, V2.S4, V3.S4], (R0)
	RET

// func addSumSqNEON(acc *[16]float32, res, x *float32, n int)
TEXT ·addSumSqNEON(SB), NOSPLIT, $0-32
	MOVD acc+0(FP), R0
	MOVD res+8(FP), R1
	MOVD x+16(FP), R2
	MOVD n+24(FP), R3
	ZERO4(V0, V1, V2, V3)
loop:
	VLD1   (R1), [V4.S4, V5.S4, V6.S4, V7.S4]
	VLD1.P 64(R2), [V8.S4, V9.S4, V10.S4, V11.S4]
	VFADD  V8.S4, V4.S4, V4.S4
	VFADD  V9.S4, V5.S4, V5.S4
	VFADD  V10.S4, V6.S4, V6.S4
	VFADD  V11.S4, V7.S4, V7.S4
	VST1.P [V4.S4, V5.S4, V6.S4, V7.S4], 64(R1)
	SQUARES_ADD
	SUBS   $16, R3, R3
	BNE    loop
	VST1   [V0.S4, V1.S4, V2.S4, V3.S4], (R0)
	RET

// func scaleMulNEON(out, x, w *float32, n int, r float32)
TEXT ·scaleMulNEON(SB), NOSPLIT, $0-36
	MOVD  out+0(FP), R0
	MOVD  x+8(FP), R1
	MOVD  w+16(FP), R2
	MOVD  n+24(FP), R3
	FMOVS r+32(FP), F31
	VDUP  V31.S[0], V31.S4
loop:
	VLD1.P 64(R1), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1.P 64(R2), [V4.S4, V5.S4, V6.S4, V7.S4]
	VFMUL  V31.S4, V0.S4, V0.S4
	VFMUL  V31.S4, V1.S4, V1.S4
	VFMUL  V31.S4, V2.S4, V2.S4
	VFMUL  V31.S4, V3.S4, V3.S4
	VFMUL  V4.S4, V0.S4, V0.S4
	VFMUL  V5.S4, V1.S4, V1.S4
	VFMUL  V6.S4, V2.S4, V2.S4
	VFMUL  V7.S4, V3.S4, V3.S4
	VST1.P [V0.S4, V1.S4, V2.S4, V3.S4], 64(R0)
	SUBS   $16, R3, R3
	BNE    loop
	RET

// func divideNEON(out, x *float32, n int, d float32)
TEXT ·divideNEON(SB), NOSPLIT, $0-28
	MOVD  out+0(FP), R0
	MOVD  x+8(FP), R1
	MOVD  n+16(FP), R2
	FMOVS d+24(FP), F31
	VDUP  V31.S[0], V31.S4
loop:
	VLD1.P 64(R1), [V0.S4, V1.S4, V2.S4, V3.S4]
	VFDIV  V31.S4, V0.S4, V0.S4
	VFDIV  V31.S4, V1.S4, V1.S4
	VFDIV  V31.S4, V2.S4, V2.S4
	VFDIV  V31.S4, V3.S4, V3.S4
	VST1.P [V0.S4, V1.S4, V2.S4, V3.S4], 64(R0)
	SUBS   $16, R2, R2
	BNE    loop
	RET

// func rotateNEON(x, cs *float32, h, heads int)
// Each head: a = x[0:h], b = x[h:2h], c = cs[0:h], s = cs[h:2h];
// a' = x0·c − x1·s, b' = x1·c + x0·s. h is a multiple of 4.
TEXT ·rotateNEON(SB), NOSPLIT, $0-32
	MOVD x+0(FP), R0
	MOVD cs+8(FP), R1
	MOVD h+16(FP), R2
	MOVD heads+24(FP), R3
	LSL  $2, R2, R4 // bytes of half a head
	CBZ  R3, done
head:
	MOVD R0, R5      // a
	ADD  R4, R0, R6  // b
	MOVD R1, R7      // c
	ADD  R4, R1, R8  // s
	MOVD R2, R9
quad:
	VLD1   (R5), [V0.S4]
	VLD1   (R6), [V1.S4]
	VLD1.P 16(R7), [V2.S4]
	VLD1.P 16(R8), [V3.S4]
	VFMUL  V2.S4, V0.S4, V4.S4 // x0·c
	VFMUL  V3.S4, V1.S4, V5.S4 // x1·s
	VFSUB  V5.S4, V4.S4, V4.S4
	VFMUL  V2.S4, V1.S4, V6.S4 // x1·c
	VFMUL  V3.S4, V0.S4, V7.S4 // x0·s
	VFADD  V7.S4, V6.S4, V6.S4
	VST1.P [V4.S4], 16(R5)
	VST1.P [V6.S4], 16(R6)
	SUBS   $4, R9, R9
	BNE    quad
	ADD    R4<<1, R0, R0
	SUBS   $1, R3, R3
	BNE    head
done:
	RET

// func siluMulNEON(out, gate, up *float32, n int)
// out = g / (1 + Exp32(−g)) · up.
TEXT ·siluMulNEON(SB), NOSPLIT, $0-32
	MOVD out+0(FP), R0
	MOVD gate+8(FP), R1
	MOVD up+16(FP), R2
	MOVD n+24(FP), R3
	EXP_CONSTS
loop:
	VLD1.P 16(R1), [V0.S4]
	VLD1.P 16(R2), [V1.S4]
	VFNEG  V0.S4, V2.S4
	EXP(V2, V3, V4, V5, V6)
	VFADD  V27.S4, V2.S4, V2.S4
	VFDIV  V2.S4, V0.S4, V0.S4
	VFMUL  V1.S4, V0.S4, V0.S4
	VST1.P [V0.S4], 16(R0)
	SUBS   $4, R3, R3
	BNE    loop
	RET

// func expSumNEON(acc *[16]float32, dst, src *float32, n int, m float32)
// dst = Exp32(src − m), acc[i%16] += dst[i].
TEXT ·expSumNEON(SB), NOSPLIT, $0-36
	MOVD  acc+0(FP), R0
	MOVD  dst+8(FP), R1
	MOVD  src+16(FP), R2
	MOVD  n+24(FP), R3
	FMOVS m+32(FP), F31
	VDUP  V31.S[0], V31.S4
	EXP_CONSTS
	ZERO4(V0, V1, V2, V3)
loop:
	VLD1.P 64(R2), [V4.S4, V5.S4, V6.S4, V7.S4]
	VFSUB  V31.S4, V4.S4, V4.S4
	VFSUB  V31.S4, V5.S4, V5.S4
	VFSUB  V31.S4, V6.S4, V6.S4
	VFSUB  V31.S4, V7.S4, V7.S4
	EXP(V4, V8, V9, V10, V11)
	EXP(V5, V12, V13, V14, V15)
	EXP(V6, V8, V9, V10, V11)
	EXP(V7, V12, V13, V14, V15)
	VST1.P [V4.S4, V5.S4, V6.S4, V7.S4], 64(R1)
	VFADD  V4.S4, V0.S4, V0.S4
	VFADD  V5.S4, V1.S4, V1.S4
	VFADD  V6.S4, V2.S4, V2.S4
	VFADD  V7.S4, V3.S4, V3.S4
	SUBS   $16, R3, R3
	BNE    loop
	VST1   [V0.S4, V1.S4, V2.S4, V3.S4], (R0)
	RET

// func toF32NEON(dst *float32, src *uint16, n int)
// Each bf16 in the high half of its f32, the low half zero (interleaved
// with a zero register).
TEXT ·toF32NEON(SB), NOSPLIT, $0-24
	MOVD dst+0(FP), R0
	MOVD src+8(FP), R1
	MOVD n+16(FP), R2
	VEOR V31.B16, V31.B16, V31.B16
loop:
	VLD1.P 32(R1), [V0.H8, V1.H8]
	VZIP1  V0.H8, V31.H8, V2.H8
	VZIP2  V0.H8, V31.H8, V3.H8
	VZIP1  V1.H8, V31.H8, V4.H8
	VZIP2  V1.H8, V31.H8, V5.H8
	VST1.P [V2.S4, V3.S4, V4.S4, V5.S4], 64(R0)
	SUBS   $16, R2, R2
	BNE    loop
	RET

// func toBF16NEON(dst *uint16, src *float32, n int)
// F32ToBF16: (b + 0x7fff + (b>>16)&1) >> 16, a NaN (b&0x7fffffff >
// 0x7f800000) as (b>>16) | 0x40.
TEXT ·toBF16NEON(SB), NOSPLIT, $0-24
	MOVD dst+0(FP), R0
	MOVD src+8(FP), R1
	MOVD n+16(FP), R2
	MOVD $1, R3
	VDUP R3, V31.S4
	MOVD $0x7fff, R3
	VDUP R3, V30.S4
	MOVD $0x7fffffff, R3
	VDUP R3, V29.S4
	MOVD $0x7f800000, R3
	VDUP R3, V28.S4
	MOVD $0x40, R3
	VDUP R3, V27.S4
loop:
	VLD1.P 64(R1), [V0.S4, V1.S4, V2.S4, V3.S4]
	ROUND(V0, V4, V5, V8)
	ROUND(V1, V4, V5, V8)
	ROUND(V2, V4, V5, V8)
	ROUND(V3, V4, V5, V8)
	VXTN   V0.S4, V6.H4
	VXTN2  V1.S4, V6.H8
	VXTN   V2.S4, V7.H4
	VXTN2  V3.S4, V7.H8
	VST1.P [V6.H8, V7.H8], 32(R0)
	SUBS   $16, R2, R2
	BNE    loop
	RET

// func maxNEON(x *float32, n int) float32
// Per lane m = v if v > m (NaNs never are), from −Inf; then the lanes' max.
TEXT ·maxNEON(SB), NOSPLIT, $0-20
	MOVD x+0(FP), R0
	MOVD n+8(FP), R1
	MOVD $0xff800000, R2
	VDUP R2, V0.S4
	VMOV V0.B16, V1.B16
	VMOV V0.B16, V2.B16
	VMOV V0.B16, V3.B16
loop:
	VLD1.P 64(R0), [V4.S4, V5.S4, V6.S4, V7.S4]
	VFCMGT V0.S4, V4.S4, V8.S4
	VFCMGT V1.S4, V5.S4, V9.S4
	VFCMGT V2.S4, V6.S4, V10.S4
	VFCMGT V3.S4, V7.S4, V11.S4
	VBIT   V8.B16, V4.B16, V0.B16
	VBIT   V9.B16, V5.B16, V1.B16
	VBIT   V10.B16, V6.B16, V2.B16
	VBIT   V11.B16, V7.B16, V3.B16
	SUBS   $16, R1, R1
	BNE    loop
	VFMAX  V1.S4, V0.S4, V0.S4
	VFMAX  V3.S4, V2.S4, V2.S4
	VFMAX  V2.S4, V0.S4, V0.S4
	VEXT   $8, V0.B16, V0.B16, V1.B16
	VFMAX  V1.S4, V0.S4, V0.S4
	VEXT   $4, V0.B16, V0.B16, V1.B16
	VFMAX  V1.S4, V0.S4, V0.S4
	FMOVS  F0, ret+16(FP)
	RET

// func findEqNEON(x *float32, n int, v float32) int
// The first i with x[i] == v, or −1.
TEXT ·findEqNEON(SB), NOSPLIT, $0-32
	MOVD  x+0(FP), R0
	MOVD  n+8(FP), R1
	FMOVS v+16(FP), F31
	VDUP  V31.S[0], V31.S4
	MOVD  $0, R2 // index of the block
loop:
	VLD1.P 16(R0), [V0.S4]
	VFCMEQ V31.S4, V0.S4, V1.S4
	VMOV   V1.D[0], R3
	VMOV   V1.D[1], R4
	ORR    R3, R4, R5
	CBNZ   R5, found
	ADD    $4, R2, R2
	CMP    R1, R2
	BLT    loop
	MOVD   $-1, R2
	MOVD   R2, ret+24(FP)
	RET
found:
	CBNZ R3, low
	ADD  $2, R2, R2
	MOVD R4, R3
low:
	RBIT R3, R3
	CLZ  R3, R3
	ADD  R3>>5, R2, R2
	MOVD R2, ret+24(FP)
	RET
