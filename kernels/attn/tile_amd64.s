//go:build amd64 && !purego

#include "textflag.h"

// Exp32 of kernels/ops, 16 lanes: the same operations in the same order
// (separate multiplies and adds), so the result is bit-identical to the Go
// function (TestExpMatchesOps). Constants in Z21..Z31 and the -87 bound in
// Z20 (LOADEXP); x is replaced by e^x; n and t are scratch; K2 is clobbered.
#define LOADEXP \
	VBROADCASTSS explo<>(SB), Z20 \
	VBROADCASTSS exphi<>(SB), Z21 \
	VBROADCASTSS explog2e<>(SB), Z22 \
	VBROADCASTSS expln2hi<>(SB), Z23 \
	VBROADCASTSS expln2lo<>(SB), Z24 \
	VBROADCASTSS expp0<>(SB), Z25 \
	VBROADCASTSS expp1<>(SB), Z26 \
	VBROADCASTSS expp2<>(SB), Z27 \
	VBROADCASTSS expp3<>(SB), Z28 \
	VBROADCASTSS expp4<>(SB), Z29 \
	VBROADCASTSS expp5<>(SB), Z30 \
	VBROADCASTSS expone<>(SB), Z31

#define EXP(x, n, t, u) \
	VCMPPS $13, Z20, x, K2 \
	VMINPS Z21, x, x \
	VMULPS Z22, x, n \
	VRNDSCALEPS $0, n, n \
	VMULPS Z23, n, t \
	VSUBPS t, x, x \
	VMULPS Z24, n, t \
	VSUBPS t, x, x \
	VMULPS Z25, x, t \
	VADDPS Z26, t, t \
	VMULPS x, t, t \
	VADDPS Z27, t, t \
	VMULPS x, t, t \
	VADDPS Z28, t, t \
	VMULPS x, t, t \
	VADDPS Z29, t, t \
	VMULPS x, t, t \
	VADDPS Z30, t, t \
	VCVTPS2DQ n, n \
	VPSLLD $23, n, n \
	VPADDD expbias<>(SB), n, n \
	VMULPS x, x, u \
	VMULPS u, t, t \
	VADDPS x, t, t \
	VADDPS Z31, t, t \
	VMULPS n, t, x \
	VMOVAPS.Z x, K2, x

DATA explo<>+0(SB)/4, $0xc2ae0000
GLOBL explo<>(SB), RODATA|NOPTR, $4
DATA exphi<>+0(SB)/4, $0x42b00000
GLOBL exphi<>(SB), RODATA|NOPTR, $4
DATA explog2e<>+0(SB)/4, $0x3fb8aa3b
GLOBL explog2e<>(SB), RODATA|NOPTR, $4
DATA expln2hi<>+0(SB)/4, $0x3f318000
GLOBL expln2hi<>(SB), RODATA|NOPTR, $4
DATA expln2lo<>+0(SB)/4, $0xb95e8083
GLOBL expln2lo<>(SB), RODATA|NOPTR, $4
DATA expp0<>+0(SB)/4, $0x39506967
GLOBL expp0<>(SB), RODATA|NOPTR, $4
DATA expp1<>+0(SB)/4, $0x3ab743ce
GLOBL expp1<>(SB), RODATA|NOPTR, $4
DATA expp2<>+0(SB)/4, $0x3c088908
GLOBL expp2<>(SB), RODATA|NOPTR, $4
DATA expp3<>+0(SB)/4, $0x3d2aa9c1
GLOBL expp3<>(SB), RODATA|NOPTR, $4
DATA expp4<>+0(SB)/4, $0x3e2aaaaa
GLOBL expp4<>(SB), RODATA|NOPTR, $4
DATA expp5<>+0(SB)/4, $0x3f000000
GLOBL expp5<>(SB), RODATA|NOPTR, $4
DATA expone<>+0(SB)/4, $0x3f800000
GLOBL expone<>(SB), RODATA|NOPTR, $4

// 127 << 23 in every lane: adding it to n << 23 builds 2^n.
DATA expbias<>+0(SB)/8, $0x3f8000003f800000
DATA expbias<>+8(SB)/8, $0x3f8000003f800000
DATA expbias<>+16(SB)/8, $0x3f8000003f800000
DATA expbias<>+24(SB)/8, $0x3f8000003f800000
DATA expbias<>+32(SB)/8, $0x3f8000003f800000
DATA expbias<>+40(SB)/8, $0x3f8000003f800000
DATA expbias<>+48(SB)/8, $0x3f8000003f800000
DATA expbias<>+56(SB)/8, $0x3f8000003f800000
GLOBL expbias<>(SB), RODATA|NOPTR, $64

// After the score tree, lane 4k+j holds key k+4j: this puts key i in lane i.
DATA keyperm<>+0(SB)/4, $0
DATA keyperm<>+4(SB)/4, $4
DATA keyperm<>+8(SB)/4, $8
DATA keyperm<>+12(SB)/4, $12
DATA keyperm<>+16(SB)/4, $1
DATA keyperm<>+20(SB)/4, $5
DATA keyperm<>+24(SB)/4, $9
DATA keyperm<>+28(SB)/4, $13
DATA keyperm<>+32(SB)/4, $2
DATA keyperm<>+36(SB)/4, $6
DATA keyperm<>+40(SB)/4, $10
DATA keyperm<>+44(SB)/4, $14
DATA keyperm<>+48(SB)/4, $3
DATA keyperm<>+52(SB)/4, $7
DATA keyperm<>+56(SB)/4, $11
DATA keyperm<>+60(SB)/4, $15
GLOBL keyperm<>(SB), RODATA|NOPTR, $64

// func expAVX512(dst, src *float32, n int)  (n % 16 == 0; for tests)
TEXT ·expAVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	LOADEXP
expl:
	TESTQ CX, CX
	JLE   expdone
	VMOVUPS (SI), Z0
	EXP(Z0, Z1, Z2, Z3)
	VMOVUPS Z0, (DI)
	ADDQ  $64, SI
	ADDQ  $64, DI
	SUBQ  $16, CX
	JMP   expl
expdone:
	VZEROUPPER
	RET

// func widenAVX512(dst *float32, src *uint16, n int)  (n % 16 == 0)
TEXT ·widenAVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
wl:
	TESTQ CX, CX
	JLE   wdone
	VPMOVZXWD (SI), Z0
	VPSLLD $16, Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ  $32, SI
	ADDQ  $64, DI
	SUBQ  $16, CX
	JMP   wl
wdone:
	VZEROUPPER
	RET

// func widenKAVX512(dst *float32, src *uint16, rows, hd int)
// dst[c][t][0:16] = src[t][16c : 16c+16] widened, dst's chunk stride a whole tile (64 rows).
TEXT ·widenKAVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ rows+16(FP), DX
	MOVQ hd+24(FP), R8
	SHRQ $4, R8            // chunks per row
wkrow:
	TESTQ DX, DX
	JLE   wkdone
	MOVQ  DI, R9           // this row's slot in chunk 0
	MOVQ  R8, CX
wkchunk:
	VPMOVZXWD (SI), Z0
	VPSLLD $16, Z0, Z0
	VMOVUPS Z0, (R9)
	ADDQ  $32, SI
	ADDQ  $4096, R9        // next chunk: 64 rows × 64 bytes
	DECQ  CX
	JNZ   wkchunk
	ADDQ  $64, DI
	DECQ  DX
	JMP   wkrow
wkdone:
	VZEROUPPER
	RET

// One level-1 fold of the score tree: lanes (i, i+8) of a and b into a.
#define FOLD256(a, b) \
	VSHUFF32X4 $0x44, b, a, Z16 \
	VSHUFF32X4 $0xEE, b, a, Z17 \
	VADDPS Z17, Z16, a

// Level 2: lanes (i, i+4) of 256-bit halves.
#define FOLD128(a, b) \
	VSHUFF32X4 $0x88, b, a, Z16 \
	VSHUFF32X4 $0xDD, b, a, Z17 \
	VADDPS Z17, Z16, a

// Levels 3 and 4 inside 128-bit lanes: (i, i+2) then (i, i+1).
#define FOLD64(a, b) \
	VSHUFPS $0x44, b, a, Z16 \
	VSHUFPS $0xEE, b, a, Z17 \
	VADDPS Z17, Z16, a

#define FOLD32(a, b) \
	VSHUFPS $0x88, b, a, Z16 \
	VSHUFPS $0xDD, b, a, Z17 \
	VADDPS Z17, Z16, a

// func tileAVX512(ml, acc, q, k, v, s *float32, n, hd int, scale float32)
//
// Registers: AX ml, BX acc, CX q, DX k (chunk-major tile), SI v (rows),
// DI s, R8 n, R9 hd.
TEXT ·tileAVX512(SB), NOSPLIT, $0-68
	MOVQ ml+0(FP), AX
	MOVQ acc+8(FP), BX
	MOVQ q+16(FP), CX
	MOVQ k+24(FP), DX
	MOVQ v+32(FP), SI
	MOVQ s+40(FP), DI
	MOVQ n+48(FP), R8
	MOVQ hd+56(FP), R9
	VBROADCASTSS scale+64(FP), Z19
	VMOVDQU32 keyperm<>(SB), Z18
	MOVL  $0xff800000, R10  // -inf
	VPBROADCASTD R10, Z20   // running max of valid scores

	// Scores, 16 keys per block g: Z0..Z15 accumulate key i over the head_dim chunks.
	XORQ R11, R11           // g·16: first key of the block
scoreblock:
	VPXORD Z0, Z0, Z0
	VMOVAPS Z0, Z1
	VMOVAPS Z0, Z2
	VMOVAPS Z0, Z3
	VMOVAPS Z0, Z4
	VMOVAPS Z0, Z5
	VMOVAPS Z0, Z6
	VMOVAPS Z0, Z7
	VMOVAPS Z0, Z8
	VMOVAPS Z0, Z9
	VMOVAPS Z0, Z10
	VMOVAPS Z0, Z11
	VMOVAPS Z0, Z12
	VMOVAPS Z0, Z13
	VMOVAPS Z0, Z14
	VMOVAPS Z0, Z15
	MOVQ R11, R12
	SHLQ $6, R12
	ADDQ DX, R12            // &k[chunk 0][key g·16]
	MOVQ CX, R13            // &q[0]
	MOVQ R9, R14
	SHRQ $4, R14            // chunks
scorechunk:
	VMOVUPS (R13), Z16
	VFMADD231PS 0(R12), Z16, Z0
	VFMADD231PS 64(R12), Z16, Z1
	VFMADD231PS 128(R12), Z16, Z2
	VFMADD231PS 192(R12), Z16, Z3
	VFMADD231PS 256(R12), Z16, Z4
	VFMADD231PS 320(R12), Z16, Z5
	VFMADD231PS 384(R12), Z16, Z6
	VFMADD231PS 448(R12), Z16, Z7
	VFMADD231PS 512(R12), Z16, Z8
	VFMADD231PS 576(R12), Z16, Z9
	VFMADD231PS 640(R12), Z16, Z10
	VFMADD231PS 704(R12), Z16, Z11
	VFMADD231PS 768(R12), Z16, Z12
	VFMADD231PS 832(R12), Z16, Z13
	VFMADD231PS 896(R12), Z16, Z14
	VFMADD231PS 960(R12), Z16, Z15
	ADDQ $64, R13
	ADDQ $4096, R12
	DECQ R14
	JNZ  scorechunk

	FOLD256(Z0, Z1)
	FOLD256(Z2, Z3)
	FOLD256(Z4, Z5)
	FOLD256(Z6, Z7)
	FOLD256(Z8, Z9)
	FOLD256(Z10, Z11)
	FOLD256(Z12, Z13)
	FOLD256(Z14, Z15)
	FOLD128(Z0, Z2)
	FOLD128(Z4, Z6)
	FOLD128(Z8, Z10)
	FOLD128(Z12, Z14)
	FOLD64(Z0, Z4)
	FOLD64(Z8, Z12)
	FOLD32(Z0, Z8)
	VPERMPS Z0, Z18, Z0
	VMULPS Z19, Z0, Z0
	VMOVUPS Z0, (DI)(R11*4)

	// K1 = lanes of this block below n
	MOVQ R8, R13
	SUBQ R11, R13
	MOVL $0xffff, R14
	BZHIL R13, R14, R14
	KMOVW R14, K1
	VMAXPS Z0, Z20, K1, Z20

	ADDQ $16, R11
	CMPQ R11, R8
	JLT  scoreblock

	// m' = max(m, max of the tile's scores)
	VEXTRACTF32X8 $1, Z20, Y1
	VMAXPS Y1, Y20, Y1
	VEXTRACTF128 $1, Y1, X2
	VMAXPS X2, X1, X1
	VMOVHLPS X1, X1, X2
	VMAXPS X2, X1, X1
	VMOVSHDUP X1, X2
	VMAXSS X2, X1, X1
	VMOVSS (AX), X3         // m
	VMAXSS X3, X1, X1       // m'
	VMOVSS X1, (AX)
	VSUBSS X1, X3, X3       // m − m'
	VBROADCASTSS X1, Z18    // m' in every lane
	VBROADCASTSS X3, Z19

	LOADEXP
	EXP(Z19, Z0, Z1, Z2)    // corr = e^(m−m') in every lane

	// p = e^(s − m'), summed per lane over the blocks of valid keys
	VPXORD Z17, Z17, Z17
	XORQ R11, R11
expblock:
	VMOVUPS (DI)(R11*4), Z3
	VSUBPS Z18, Z3, Z3
	EXP(Z3, Z0, Z1, Z2)
	VMOVUPS Z3, (DI)(R11*4)
	MOVQ R8, R13
	SUBQ R11, R13
	MOVL $0xffff, R14
	BZHIL R13, R14, R14
	KMOVW R14, K1
	VADDPS Z3, Z17, K1, Z17
	ADDQ $16, R11
	CMPQ R11, R8
	JLT  expblock

	// l' = l·corr + fold of the lane sums in the tree order
	VEXTRACTF32X8 $1, Z17, Y1
	VADDPS Y1, Y17, Y1
	VEXTRACTF128 $1, Y1, X2
	VADDPS X2, X1, X1
	VMOVHLPS X1, X1, X2
	VADDPS X2, X1, X1
	VMOVSHDUP X1, X2
	VADDSS X2, X1, X1
	VMOVSS 4(AX), X2
	VMULSS X19, X2, X2
	VADDSS X1, X2, X2
	VMOVSS X2, 4(AX)

	// acc = acc·corr + Σ_t p_t·v_t, in blocks of 128, 64 or 16 dims.
	MOVQ R9, R10
	SHLQ $2, R10            // row stride in bytes
	XORQ R11, R11           // byte offset of the dim block
vblock:
	MOVQ R9, R12
	SHLQ $2, R12
	SUBQ R11, R12           // bytes left in the row
	CMPQ R12, $512
	JGE  v128
	CMPQ R12, $256
	JGE  v64
	JMP  v16

v128:
	LEAQ (BX)(R11*1), R13
	VMULPS 0(R13), Z19, Z0
	VMULPS 64(R13), Z19, Z1
	VMULPS 128(R13), Z19, Z2
	VMULPS 192(R13), Z19, Z3
	VMULPS 256(R13), Z19, Z4
	VMULPS 320(R13), Z19, Z5
	VMULPS 384(R13), Z19, Z6
	VMULPS 448(R13), Z19, Z7
	LEAQ (SI)(R11*1), R14
	XORQ R15, R15
v128t:
	VBROADCASTSS (DI)(R15*4), Z8
	VFMADD231PS 0(R14), Z8, Z0
	VFMADD231PS 64(R14), Z8, Z1
	VFMADD231PS 128(R14), Z8, Z2
	VFMADD231PS 192(R14), Z8, Z3
	VFMADD231PS 256(R14), Z8, Z4
	VFMADD231PS 320(R14), Z8, Z5
	VFMADD231PS 384(R14), Z8, Z6
	VFMADD231PS 448(R14), Z8, Z7
	ADDQ R10, R14
	INCQ R15
	CMPQ R15, R8
	JLT  v128t
	VMOVUPS Z0, 0(R13)
	VMOVUPS Z1, 64(R13)
	VMOVUPS Z2, 128(R13)
	VMOVUPS Z3, 192(R13)
	VMOVUPS Z4, 256(R13)
	VMOVUPS Z5, 320(R13)
	VMOVUPS Z6, 384(R13)
	VMOVUPS Z7, 448(R13)
	ADDQ $512, R11
	JMP  vnext

v64:
	LEAQ (BX)(R11*1), R13
	VMULPS 0(R13), Z19, Z0
	VMULPS 64(R13), Z19, Z1
	VMULPS 128(R13), Z19, Z2
	VMULPS 192(R13), Z19, Z3
	LEAQ (SI)(R11*1), R14
	XORQ R15, R15
v64t:
	VBROADCASTSS (DI)(R15*4), Z8
	VFMADD231PS 0(R14), Z8, Z0
	VFMADD231PS 64(R14), Z8, Z1
	VFMADD231PS 128(R14), Z8, Z2
	VFMADD231PS 192(R14), Z8, Z3
	ADDQ R10, R14
	INCQ R15
	CMPQ R15, R8
	JLT  v64t
	VMOVUPS Z0, 0(R13)
	VMOVUPS Z1, 64(R13)
	VMOVUPS Z2, 128(R13)
	VMOVUPS Z3, 192(R13)
	ADDQ $256, R11
	JMP  vnext

v16:
	LEAQ (BX)(R11*1), R13
	VMULPS 0(R13), Z19, Z0
	LEAQ (SI)(R11*1), R14
	XORQ R15, R15
v16t:
	VBROADCASTSS (DI)(R15*4), Z8
	VFMADD231PS 0(R14), Z8, Z0
	ADDQ R10, R14
	INCQ R15
	CMPQ R15, R8
	JLT  v16t
	VMOVUPS Z0, 0(R13)
	ADDQ $64, R11

vnext:
	CMPQ R11, R10
	JLT  vblock
	VZEROUPPER
	RET
