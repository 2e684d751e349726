//go:build amd64 && !purego

#include "textflag.h"
#include "exp_amd64.h"

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
expl:
	TESTQ CX, CX
	JLE   expdone
	VMOVUPS (SI), Z0
	EXP512(Z0, Z1, Z2, Z3)
	VMOVUPS Z0, (DI)
	ADDQ  $64, SI
	ADDQ  $64, DI
	SUBQ  $16, CX
	JMP   expl
expdone:
	VZEROUPPER
	RET

// The widening loops also prefetch the next tile (n elements further on) into
// L2, so that the next tile's DRAM reads overlap this tile's arithmetic:
// decode streams the cache once and would otherwise wait for every tile.

// func widenAVX512(dst *float32, src *uint16, n int)  (n % 16 == 0)
TEXT ·widenAVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	LEAQ (CX)(CX*1), R8     // tile size in bytes
wl:
	TESTQ CX, CX
	JLE   wdone
	PREFETCHT1 (SI)(R8*1)
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
	MOVQ R8, R10
	SHLQ $7, R10           // tile size in bytes: 64 rows of hd bf16
	SHRQ $4, R8            // chunks per row
wkrow:
	TESTQ DX, DX
	JLE   wkdone
	MOVQ  DI, R9           // this row's slot in chunk 0
	MOVQ  R8, CX
wkchunk:
	PREFETCHT1 (SI)(R10*1)
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
	VBROADCASTSS c_ninf<>(SB), Z20 // running max of valid scores

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

	EXP512(Z19, Z0, Z1, Z2)    // corr = e^(m−m') in every lane

	// p = e^(s − m'), summed per lane over the blocks of valid keys
	VPXORD Z17, Z17, Z17
	XORQ R11, R11
expblock:
	VMOVUPS (DI)(R11*4), Z3
	VSUBPS Z18, Z3, Z3
	EXP512(Z3, Z0, Z1, Z2)
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

// The group kernels (tile2*, tile4*: two or four queries per call, from a
// widened tile or a bf16/int8 cache read in place) are generated by
// gen_tile.go into tile_group_amd64.s.

// 16 all-ones lanes then 16 zero lanes: loading at byte offset 4·(16−r)
// gives a mask of the first r lanes.
DATA lanemask<>+0(SB)/8, $-1
DATA lanemask<>+8(SB)/8, $-1
DATA lanemask<>+16(SB)/8, $-1
DATA lanemask<>+24(SB)/8, $-1
DATA lanemask<>+32(SB)/8, $-1
DATA lanemask<>+40(SB)/8, $-1
DATA lanemask<>+48(SB)/8, $-1
DATA lanemask<>+56(SB)/8, $-1
DATA lanemask<>+64(SB)/8, $0
DATA lanemask<>+72(SB)/8, $0
DATA lanemask<>+80(SB)/8, $0
DATA lanemask<>+88(SB)/8, $0
DATA lanemask<>+96(SB)/8, $0
DATA lanemask<>+104(SB)/8, $0
DATA lanemask<>+112(SB)/8, $0
DATA lanemask<>+120(SB)/8, $0
GLOBL lanemask<>(SB), RODATA|NOPTR, $128

// After the AVX2 score tree lanes 0, 4, 2, 6 hold keys 0, 1, 2, 3.
DATA keyperm4<>+0(SB)/4, $0
DATA keyperm4<>+4(SB)/4, $4
DATA keyperm4<>+8(SB)/4, $2
DATA keyperm4<>+12(SB)/4, $6
DATA keyperm4<>+16(SB)/4, $1
DATA keyperm4<>+20(SB)/4, $5
DATA keyperm4<>+24(SB)/4, $3
DATA keyperm4<>+28(SB)/4, $7
GLOBL keyperm4<>(SB), RODATA|NOPTR, $32

// func widenAVX2(dst *float32, src *uint16, n int)  (n % 16 == 0)
TEXT ·widenAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	LEAQ (CX)(CX*1), R8
w2l:
	TESTQ CX, CX
	JLE   w2done
	PREFETCHT1 (SI)(R8*1)
	VPMOVZXWD (SI), Y0
	VPMOVZXWD 16(SI), Y1
	VPSLLD $16, Y0, Y0
	VPSLLD $16, Y1, Y1
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	ADDQ  $32, SI
	ADDQ  $64, DI
	SUBQ  $16, CX
	JMP   w2l
w2done:
	VZEROUPPER
	RET

// func widenKAVX2(dst *float32, src *uint16, rows, hd int): widenKAVX512's layout.
TEXT ·widenKAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ rows+16(FP), DX
	MOVQ hd+24(FP), R8
	MOVQ R8, R10
	SHLQ $7, R10
	SHRQ $4, R8
wk2row:
	TESTQ DX, DX
	JLE   wk2done
	MOVQ  DI, R9
	MOVQ  R8, CX
wk2chunk:
	PREFETCHT1 (SI)(R10*1)
	VPMOVZXWD (SI), Y0
	VPMOVZXWD 16(SI), Y1
	VPSLLD $16, Y0, Y0
	VPSLLD $16, Y1, Y1
	VMOVUPS Y0, (R9)
	VMOVUPS Y1, 32(R9)
	ADDQ  $32, SI
	ADDQ  $4096, R9
	DECQ  CX
	JNZ   wk2chunk
	ADDQ  $64, DI
	DECQ  DX
	JMP   wk2row
wk2done:
	VZEROUPPER
	RET

// func tileAVX2(ml, acc, q, k, v, s *float32, n, hd int, scale float32)
//
// tileAVX512 with 16-lane accumulators held as two 8-lane registers (lanes
// 0-7, 8-15) and the same fold tree, exponential and V order: bit-identical
// to the AVX-512 kernels (TestPathsAgree checks avx2 against avx512 bits).
TEXT ·tileAVX2(SB), NOSPLIT, $0-68
	MOVQ ml+0(FP), AX
	MOVQ acc+8(FP), BX
	MOVQ q+16(FP), CX
	MOVQ k+24(FP), DX
	MOVQ v+32(FP), SI
	MOVQ s+40(FP), DI
	MOVQ n+48(FP), R8
	MOVQ hd+56(FP), R9
	VBROADCASTSS scale+64(FP), Y10
	VMOVDQU keyperm4<>(SB), Y11

	// Scores, 4 keys per block: Y(2j), Y(2j+1) are lanes 0-7, 8-15 of key j.
	XORQ R11, R11
a2block:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	MOVQ R11, R12
	SHLQ $6, R12
	ADDQ DX, R12
	MOVQ CX, R13
	MOVQ R9, R14
	SHRQ $4, R14
a2chunk:
	VMOVUPS (R13), Y8
	VMOVUPS 32(R13), Y9
	VFMADD231PS 0(R12), Y8, Y0
	VFMADD231PS 32(R12), Y9, Y1
	VFMADD231PS 64(R12), Y8, Y2
	VFMADD231PS 96(R12), Y9, Y3
	VFMADD231PS 128(R12), Y8, Y4
	VFMADD231PS 160(R12), Y9, Y5
	VFMADD231PS 192(R12), Y8, Y6
	VFMADD231PS 224(R12), Y9, Y7
	ADDQ $64, R13
	ADDQ $4096, R12
	DECQ R14
	JNZ  a2chunk
	VADDPS Y1, Y0, Y0       // (i, i+8)
	VADDPS Y3, Y2, Y2
	VADDPS Y5, Y4, Y4
	VADDPS Y7, Y6, Y6
	VPERM2F128 $0x20, Y2, Y0, Y8 // (i, i+4)
	VPERM2F128 $0x31, Y2, Y0, Y9
	VADDPS Y9, Y8, Y0
	VPERM2F128 $0x20, Y6, Y4, Y8
	VPERM2F128 $0x31, Y6, Y4, Y9
	VADDPS Y9, Y8, Y4
	VSHUFPS $0x44, Y4, Y0, Y8    // (i, i+2)
	VSHUFPS $0xEE, Y4, Y0, Y9
	VADDPS Y9, Y8, Y8
	VPERMILPS $0xB1, Y8, Y9      // (i, i+1)
	VADDPS Y9, Y8, Y8
	VPERMPS Y8, Y11, Y8
	VMULPS Y10, Y8, Y8
	VMOVUPS X8, (DI)(R11*4)
	ADDQ $4, R11
	CMPQ R11, R8
	JLT  a2block

	// m' = max(m, scores[0:n])
	VBROADCASTSS c_ninf<>(SB), X1
	XORQ R11, R11
a2max:
	VMAXSS (DI)(R11*4), X1, X1
	INCQ R11
	CMPQ R11, R8
	JLT  a2max
	VMOVSS (AX), X3
	VMAXSS X3, X1, X1
	VMOVSS X1, (AX)
	VSUBSS X1, X3, X3
	VBROADCASTSS X1, Y14
	VBROADCASTSS X3, Y15
	EXP256(Y15, Y0, Y1, Y2, Y3)

	// p = e^(s − m'), lane sums over the valid keys
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	XORQ R11, R11
a2exp:
	MOVQ R8, R12
	SUBQ R11, R12
	CMPQ R12, $16
	JLE  a2r
	MOVQ $16, R12
a2r:
	NEGQ R12
	LEAQ lanemask<>+64(SB), R13
	LEAQ (R13)(R12*4), R13  // mask of the first r lanes
	VMOVUPS (DI)(R11*4), Y5
	VSUBPS Y14, Y5, Y5
	EXP256(Y5, Y0, Y1, Y2, Y3)
	VMOVUPS Y5, (DI)(R11*4)
	VANDPS (R13), Y5, Y5
	VADDPS Y5, Y12, Y12
	VMOVUPS 32(DI)(R11*4), Y6
	VSUBPS Y14, Y6, Y6
	EXP256(Y6, Y0, Y1, Y2, Y3)
	VMOVUPS Y6, 32(DI)(R11*4)
	VANDPS 32(R13), Y6, Y6
	VADDPS Y6, Y13, Y13
	ADDQ $16, R11
	CMPQ R11, R8
	JLT  a2exp
	VADDPS Y13, Y12, Y1
	VEXTRACTF128 $1, Y1, X2
	VADDPS X2, X1, X1
	VMOVHLPS X1, X1, X2
	VADDPS X2, X1, X1
	VMOVSHDUP X1, X2
	VADDSS X2, X1, X1
	VMOVSS 4(AX), X2
	VMULSS X15, X2, X2
	VADDSS X1, X2, X2
	VMOVSS X2, 4(AX)

	// acc = acc·corr + Σ_t p_t·v_t, 64 (else 16) dims at a time
	MOVQ R9, R10
	SHLQ $2, R10
	XORQ R11, R11
a2v:
	MOVQ R10, R12
	SUBQ R11, R12
	CMPQ R12, $256
	JLT  a2v16
	LEAQ (BX)(R11*1), R13
	VMULPS 0(R13), Y15, Y0
	VMULPS 32(R13), Y15, Y1
	VMULPS 64(R13), Y15, Y2
	VMULPS 96(R13), Y15, Y3
	VMULPS 128(R13), Y15, Y4
	VMULPS 160(R13), Y15, Y5
	VMULPS 192(R13), Y15, Y6
	VMULPS 224(R13), Y15, Y7
	LEAQ (SI)(R11*1), R14
	XORQ R15, R15
a2v64t:
	VBROADCASTSS (DI)(R15*4), Y8
	VFMADD231PS 0(R14), Y8, Y0
	VFMADD231PS 32(R14), Y8, Y1
	VFMADD231PS 64(R14), Y8, Y2
	VFMADD231PS 96(R14), Y8, Y3
	VFMADD231PS 128(R14), Y8, Y4
	VFMADD231PS 160(R14), Y8, Y5
	VFMADD231PS 192(R14), Y8, Y6
	VFMADD231PS 224(R14), Y8, Y7
	ADDQ R10, R14
	INCQ R15
	CMPQ R15, R8
	JLT  a2v64t
	VMOVUPS Y0, 0(R13)
	VMOVUPS Y1, 32(R13)
	VMOVUPS Y2, 64(R13)
	VMOVUPS Y3, 96(R13)
	VMOVUPS Y4, 128(R13)
	VMOVUPS Y5, 160(R13)
	VMOVUPS Y6, 192(R13)
	VMOVUPS Y7, 224(R13)
	ADDQ $256, R11
	JMP  a2vnext

a2v16:
	LEAQ (BX)(R11*1), R13
	VMULPS 0(R13), Y15, Y0
	VMULPS 32(R13), Y15, Y1
	LEAQ (SI)(R11*1), R14
	XORQ R15, R15
a2v16t:
	VBROADCASTSS (DI)(R15*4), Y8
	VFMADD231PS 0(R14), Y8, Y0
	VFMADD231PS 32(R14), Y8, Y1
	ADDQ R10, R14
	INCQ R15
	CMPQ R15, R8
	JLT  a2v16t
	VMOVUPS Y0, 0(R13)
	VMOVUPS Y1, 32(R13)
	ADDQ $64, R11

a2vnext:
	CMPQ R11, R10
	JLT  a2v
	VZEROUPPER
	RET

// func dequantAVX512(dst *float32, src *int8, scale *float32, rows, hd, rowStride, chunkStride int)
// dst[t][c] (at t·rowStride + c·chunkStride bytes) = src[t][16c : 16c+16]·scale[t].
TEXT ·dequantAVX512(SB), NOSPLIT, $0-56
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ scale+16(FP), BX
	MOVQ rows+24(FP), DX
	MOVQ hd+32(FP), R8
	MOVQ rowStride+40(FP), R11
	MOVQ chunkStride+48(FP), R12
	MOVQ R8, R10
	SHLQ $6, R10           // tile size in bytes: 64 rows of hd int8
	SHRQ $4, R8            // chunks per row
dqrow:
	TESTQ DX, DX
	JLE   dqdone
	PREFETCHT1 256(BX)     // the next tile's scales
	VBROADCASTSS (BX), Z1
	MOVQ  DI, R9
	MOVQ  R8, CX
dqchunk:
	PREFETCHT1 (SI)(R10*1)
	VPMOVSXBD (SI), Z0
	VCVTDQ2PS Z0, Z0
	VMULPS Z1, Z0, Z0
	VMOVUPS Z0, (R9)
	ADDQ  $16, SI
	ADDQ  R12, R9
	DECQ  CX
	JNZ   dqchunk
	ADDQ  $4, BX
	ADDQ  R11, DI
	DECQ  DX
	JMP   dqrow
dqdone:
	VZEROUPPER
	RET

// func dequantAVX2(dst *float32, src *int8, scale *float32, rows, hd, rowStride, chunkStride int)
TEXT ·dequantAVX2(SB), NOSPLIT, $0-56
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ scale+16(FP), BX
	MOVQ rows+24(FP), DX
	MOVQ hd+32(FP), R8
	MOVQ rowStride+40(FP), R11
	MOVQ chunkStride+48(FP), R12
	MOVQ R8, R10
	SHLQ $6, R10
	SHRQ $4, R8
dq2row:
	TESTQ DX, DX
	JLE   dq2done
	PREFETCHT1 256(BX)
	VBROADCASTSS (BX), Y2
	MOVQ  DI, R9
	MOVQ  R8, CX
dq2chunk:
	PREFETCHT1 (SI)(R10*1)
	VPMOVSXBD (SI), Y0
	VPMOVSXBD 8(SI), Y1
	VCVTDQ2PS Y0, Y0
	VCVTDQ2PS Y1, Y1
	VMULPS Y2, Y0, Y0
	VMULPS Y2, Y1, Y1
	VMOVUPS Y0, (R9)
	VMOVUPS Y1, 32(R9)
	ADDQ  $16, SI
	ADDQ  R12, R9
	DECQ  CX
	JNZ   dq2chunk
	ADDQ  $4, BX
	ADDQ  R11, DI
	DECQ  DX
	JMP   dq2row
dq2done:
	VZEROUPPER
	RET
