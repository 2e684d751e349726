//go:build !purego

#include "textflag.h"

// The NEON tile's scores and values (dispatch_arm64.go): the arithmetic of
// tileAVX2 and tileAVX512 (gen_tile.go) on 128-bit registers, a 16-lane
// accumulator in four.

// FOLD(a, b, c, d, t, fa, ft) reduces the 16-lane accumulator in a..d
// (lanes 0-3, 4-7, 8-11, 12-15) by the tree (i, i+8), (i, i+4), (i, i+2),
// (i, i+1), leaving the sum in fa (lane 0 of a); t is scratch, ft its lane 0.
#define FOLD(a, b, c, d, t, fa, ft) \
	VFADD c.S4, a.S4, a.S4; \
	VFADD d.S4, b.S4, b.S4; \
	VFADD b.S4, a.S4, a.S4; \
	VEXT  $8, a.B16, a.B16, t.B16; \
	VFADD t.S4, a.S4, a.S4; \
	VEXT  $4, a.B16, a.B16, t.B16; \
	FADDS ft, fa, fa

#define ZERO4(a, b, c, d) \
	VEOR a.B16, a.B16, a.B16; \
	VEOR b.B16, b.B16, b.B16; \
	VEOR c.B16, c.B16, c.B16; \
	VEOR d.B16, d.B16, d.B16

// func scoresNEON(q, k, s *float32, n, hd int, scale float32)
TEXT ·scoresNEON(SB), NOSPLIT, $0-44
	MOVD  q+0(FP), R0
	MOVD  k+8(FP), R1
	MOVD  s+16(FP), R2
	MOVD  n+24(FP), R3
	MOVD  hd+32(FP), R4
	FMOVS scale+40(FP), F31
	LSL   $2, R4, R5 // bytes of a row

four:
	// Keys t..t+3: V0-V3, V4-V7, V8-V11, V12-V15 accumulate their lanes
	// over the dims in order; V16-V19 hold the query's chunk.
	CMP  $4, R3
	BLT  one
	ZERO4(V0, V1, V2, V3)
	ZERO4(V4, V5, V6, V7)
	ZERO4(V8, V9, V10, V11)
	ZERO4(V12, V13, V14, V15)
	MOVD R0, R6
	MOVD R1, R7
	ADD  R5, R7, R8
	ADD  R5, R8, R9
	ADD  R5, R9, R10
	MOVD R4, R11

chunk4:
	VLD1.P 64(R6), [V16.S4, V17.S4, V18.S4, V19.S4]
	VLD1.P 64(R7), [V20.S4, V21.S4, V22.S4, V23.S4]
	VLD1.P 64(R8), [V24.S4, V25.S4, V26.S4, V27.S4]
	VFMLA  V16.S4, V20.S4, V0.S4
	VFMLA  V17.S4, V21.S4, V1.S4
	VFMLA  V18.S4, V22.S4, V2.S4
	VFMLA  V19.S4, V23.S4, V3.S4
	VFMLA  V16.S4, V24.S4, V4.S4
	VFMLA  V17.S4, V25.S4, V5.S4
	VFMLA  V18.S4, V26.S4, V6.S4
	VFMLA  V19.S4, V27.S4, V7.S4
	VLD1.P 64(R9), [V20.S4, V21.S4, V22.S4, V23.S4]
	VLD1.P 64(R10), [V24.S4, V25.S4, V26.S4, V27.S4]
	VFMLA  V16.S4, V20.S4, V8.S4
	VFMLA  V17.S4, V21.S4, V9.S4
	VFMLA  V18.S4, V22.S4, V10.S4
	VFMLA  V19.S4, V23.S4, V11.S4
	VFMLA  V16.S4, V24.S4, V12.S4
	VFMLA  V17.S4, V25.S4, V13.S4
	VFMLA  V18.S4, V26.S4, V14.S4
	VFMLA  V19.S4, V27.S4, V15.S4
	SUBS   $16, R11, R11
	BNE    chunk4

	FOLD(V0, V1, V2, V3, V16, F0, F16)
	FOLD(V4, V5, V6, V7, V17, F4, F17)
	FOLD(V8, V9, V10, V11, V18, F8, F18)
	FOLD(V12, V13, V14, V15, V19, F12, F19)
	FMULS F31, F0, F0
	FMULS F31, F4, F4
	FMULS F31, F8, F8
	FMULS F31, F12, F12
	FMOVS F0, 0(R2)
	FMOVS F4, 4(R2)
	FMOVS F8, 8(R2)
	FMOVS F12, 12(R2)
	ADD   $16, R2, R2
	ADD   R5<<2, R1, R1
	SUB   $4, R3, R3
	B     four

one:
	CBZ  R3, done
	ZERO4(V0, V1, V2, V3)
	MOVD R0, R6
	MOVD R1, R7
	MOVD R4, R11

chunk1:
	VLD1.P 64(R6), [V16.S4, V17.S4, V18.S4, V19.S4]
	VLD1.P 64(R7), [V20.S4, V21.S4, V22.S4, V23.S4]
	VFMLA  V16.S4, V20.S4, V0.S4
	VFMLA  V17.S4, V21.S4, V1.S4
	VFMLA  V18.S4, V22.S4, V2.S4
	VFMLA  V19.S4, V23.S4, V3.S4
	SUBS   $16, R11, R11
	BNE    chunk1

	FOLD(V0, V1, V2, V3, V16, F0, F16)
	FMULS F31, F0, F0
	FMOVS F0, 0(R2)
	ADD   $4, R2, R2
	ADD   R5, R1, R1
	SUB   $1, R3, R3
	B     one

done:
	RET

// func valuesNEON(acc, p, v *float32, n, hd int)
TEXT ·valuesNEON(SB), NOSPLIT, $0-40
	MOVD acc+0(FP), R0
	MOVD p+8(FP), R1
	MOVD v+16(FP), R2
	MOVD n+24(FP), R3
	MOVD hd+32(FP), R4
	CBZ  R3, done
	LSL  $2, R4, R5 // bytes of a row

block64:
	// 64 dims of acc in V0-V15, sixteen chains of one FMA a position.
	CMP    $64, R4
	BLT    block16
	ADD    $64, R0, R7
	ADD    $128, R0, R8
	ADD    $192, R0, R9
	VLD1   (R0), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1   (R7), [V4.S4, V5.S4, V6.S4, V7.S4]
	VLD1   (R8), [V8.S4, V9.S4, V10.S4, V11.S4]
	VLD1   (R9), [V12.S4, V13.S4, V14.S4, V15.S4]
	MOVD   R1, R10
	MOVD   R2, R11
	MOVD   R3, R12

pos64:
	VLD1R.P 4(R10), [V16.S4]
	MOVD    R11, R13
	VLD1.P  64(R13), [V20.S4, V21.S4, V22.S4, V23.S4]
	VLD1.P  64(R13), [V24.S4, V25.S4, V26.S4, V27.S4]
	VFMLA   V16.S4, V20.S4, V0.S4
	VFMLA   V16.S4, V21.S4, V1.S4
	VFMLA   V16.S4, V22.S4, V2.S4
	VFMLA   V16.S4, V23.S4, V3.S4
	VFMLA   V16.S4, V24.S4, V4.S4
	VFMLA   V16.S4, V25.S4, V5.S4
	VFMLA   V16.S4, V26.S4, V6.S4
	VFMLA   V16.S4, V27.S4, V7.S4
	VLD1.P  64(R13), [V20.S4, V21.S4, V22.S4, V23.S4]
	VLD1    (R13), [V24.S4, V25.S4, V26.S4, V27.S4]
	VFMLA   V16.S4, V20.S4, V8.S4
	VFMLA   V16.S4, V21.S4, V9.S4
	VFMLA   V16.S4, V22.S4, V10.S4
	VFMLA   V16.S4, V23.S4, V11.S4
	VFMLA   V16.S4, V24.S4, V12.S4
	VFMLA   V16.S4, V25.S4, V13.S4
	VFMLA   V16.S4, V26.S4, V14.S4
	VFMLA   V16.S4, V27.S4, V15.S4
	ADD     R5, R11, R11
	SUBS    $1, R12, R12
	BNE     pos64

	VST1 [V0.S4, V1.S4, V2.S4, V3.S4], (R0)
	VST1 [V4.S4, V5.S4, V6.S4, V7.S4], (R7)
	VST1 [V8.S4, V9.S4, V10.S4, V11.S4], (R8)
	VST1 [V12.S4, V13.S4, V14.S4, V15.S4], (R9)
	ADD  $256, R0, R0
	ADD  $256, R2, R2
	SUB  $64, R4, R4
	B    block64

block16:
	CBZ  R4, done
	VLD1 (R0), [V0.S4, V1.S4, V2.S4, V3.S4]
	MOVD R1, R10
	MOVD R2, R11
	MOVD R3, R12

pos16:
	VLD1R.P 4(R10), [V16.S4]
	VLD1    (R11), [V20.S4, V21.S4, V22.S4, V23.S4]
	VFMLA   V16.S4, V20.S4, V0.S4
	VFMLA   V16.S4, V21.S4, V1.S4
	VFMLA   V16.S4, V22.S4, V2.S4
	VFMLA   V16.S4, V23.S4, V3.S4
	ADD     R5, R11, R11
	SUBS    $1, R12, R12
	BNE     pos16

	VST1 [V0.S4, V1.S4, V2.S4, V3.S4], (R0)
	ADD  $64, R0, R0
	ADD  $64, R2, R2
	SUB  $16, R4, R4
	B    block16

done:
	RET

// func dequantNEON(dst *float32, src *int8, scale *float32, rows, hd int)
TEXT ·dequantNEON(SB), NOSPLIT, $0-40
	MOVD dst+0(FP), R0
	MOVD src+8(FP), R1
	MOVD scale+16(FP), R2
	MOVD rows+24(FP), R3
	MOVD hd+32(FP), R4
	CBZ  R3, done

row:
	VLD1R.P 4(R2), [V31.S4]
	MOVD    R4, R5

chunk:
	VLD1.P 16(R1), [V0.B16]
	VSXTL  V0.B8, V1.H8
	VSXTL2 V0.B16, V2.H8
	VSXTL  V1.H4, V4.S4
	VSXTL2 V1.H8, V5.S4
	VSXTL  V2.H4, V6.S4
	VSXTL2 V2.H8, V7.S4
	VSCVTF V4.S4, V4.S4
	VSCVTF V5.S4, V5.S4
	VSCVTF V6.S4, V6.S4
	VSCVTF V7.S4, V7.S4
	VFMUL  V31.S4, V4.S4, V4.S4
	VFMUL  V31.S4, V5.S4, V5.S4
	VFMUL  V31.S4, V6.S4, V6.S4
	VFMUL  V31.S4, V7.S4, V7.S4
	VST1.P [V4.S4, V5.S4, V6.S4, V7.S4], 64(R0)
	SUBS   $16, R5, R5
	BNE    chunk
	SUBS   $1, R3, R3
	BNE    row

done:
	RET
