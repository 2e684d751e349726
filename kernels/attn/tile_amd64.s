//go:build amd64 && !purego

#include "textflag.h"
#include "../ops/exp_amd64.h"

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

// One row of the 4×4 FMA block: query q against keys in Z20..Z23.
#define FMA4(q, a0, a1, a2, a3) \
	VFMADD231PS Z20, q, a0 \
	VFMADD231PS Z21, q, a1 \
	VFMADD231PS Z22, q, a2 \
	VFMADD231PS Z23, q, a3

// acc[0:64] of one query, scaled by its correction, into four registers.
#define LOADACC64(off, corr, a0, a1, a2, a3) \
	MOVQ off(AX), DI \
	VMULPS 0(DI)(BX*1), corr, a0 \
	VMULPS 64(DI)(BX*1), corr, a1 \
	VMULPS 128(DI)(BX*1), corr, a2 \
	VMULPS 192(DI)(BX*1), corr, a3

#define STOREACC64(off, a0, a1, a2, a3) \
	MOVQ off(AX), DI \
	VMOVUPS a0, 0(DI)(BX*1) \
	VMOVUPS a1, 64(DI)(BX*1) \
	VMOVUPS a2, 128(DI)(BX*1) \
	VMOVUPS a3, 192(DI)(BX*1)

// func tile4AVX512(qs *[4]qref, k, v *float32, n, hd int, scale float32)
//
// tileAVX512 for four queries over the same n positions at once: each K and
// V vector loaded feeds four FMAs. Per query the operations are exactly
// tileAVX512's — the score of (query, key) is the same FMA chain and fold
// tree, only the assignment of chains to registers differs — so results are
// bit-identical to four single calls (TestGroupKernelsMatchTile).
// qref is {ml, acc, q, s *float32; corr float32}: 40 bytes.
TEXT ·tile4AVX512(SB), NOSPLIT, $0-44
	MOVQ qs+0(FP), AX
	MOVQ k+8(FP), DX
	MOVQ v+16(FP), SI
	MOVQ n+24(FP), R13
	MOVQ hd+32(FP), R14
	VBROADCASTSS scale+40(FP), Z29
	VMOVDQU32 keyperm<>(SB), Z28
	VBROADCASTSS c_ninf<>(SB), Z30 // running max, lane 4q+j: query q, key ≡ j mod 4

	// Scores in blocks of 4 keys: Z(4q+j) accumulates query q · key BX+j.
	XORQ BX, BX
t4block:
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
	MOVQ 16(AX), R8
	MOVQ 56(AX), R9
	MOVQ 96(AX), R10
	MOVQ 136(AX), R11
	MOVQ BX, R12
	SHLQ $6, R12
	ADDQ DX, R12
	MOVQ R14, CX
	SHRQ $4, CX
t4chunk:
	VMOVUPS (R8), Z16
	VMOVUPS (R9), Z17
	VMOVUPS (R10), Z18
	VMOVUPS (R11), Z19
	VMOVUPS 0(R12), Z20
	VMOVUPS 64(R12), Z21
	VMOVUPS 128(R12), Z22
	VMOVUPS 192(R12), Z23
	FMA4(Z16, Z0, Z1, Z2, Z3)
	FMA4(Z17, Z4, Z5, Z6, Z7)
	FMA4(Z18, Z8, Z9, Z10, Z11)
	FMA4(Z19, Z12, Z13, Z14, Z15)
	ADDQ $64, R8
	ADDQ $64, R9
	ADDQ $64, R10
	ADDQ $64, R11
	ADDQ $4096, R12
	DECQ CX
	JNZ  t4chunk

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
	VPERMPS Z0, Z28, Z0     // lane 4q+j: query q, key BX+j
	VMULPS Z29, Z0, Z0
	MOVQ 24(AX), DI
	VEXTRACTF32X4 $0, Z0, (DI)(BX*4)
	MOVQ 64(AX), DI
	VEXTRACTF32X4 $1, Z0, (DI)(BX*4)
	MOVQ 104(AX), DI
	VEXTRACTF32X4 $2, Z0, (DI)(BX*4)
	MOVQ 144(AX), DI
	VEXTRACTF32X4 $3, Z0, (DI)(BX*4)

	MOVQ R13, DI
	SUBQ BX, DI
	MOVL $15, R15
	BZHIL DI, R15, R15
	IMUL3L $0x1111, R15, R15
	KMOVW R15, K1
	VMAXPS Z0, Z30, K1, Z30

	ADDQ $4, BX
	CMPQ BX, R13
	JLT  t4block

	// Each query's tile max in every lane of its 128-bit lane.
	VPERMILPS $0xB1, Z30, Z31
	VMAXPS Z31, Z30, Z30
	VPERMILPS $0x4E, Z30, Z31
	VMAXPS Z31, Z30, Z30

	// Per query, as tileAVX512: m', corr (kept in the qref), p, l.
	MOVQ AX, R9
	MOVQ $4, R10
t4q:
	MOVQ 0(R9), R15         // ml
	VMOVAPS X30, X1
	VMOVSS (R15), X3
	VMAXSS X3, X1, X1
	VMOVSS X1, (R15)
	VSUBSS X1, X3, X3
	VBROADCASTSS X1, Z18
	VBROADCASTSS X3, Z19
	EXP512(Z19, Z0, Z1, Z2)
	VMOVSS X19, 32(R9)
	MOVQ 24(R9), DI         // s
	VPXORD Z17, Z17, Z17
	XORQ R11, R11
t4exp:
	VMOVUPS (DI)(R11*4), Z3
	VSUBPS Z18, Z3, Z3
	EXP512(Z3, Z0, Z1, Z2)
	VMOVUPS Z3, (DI)(R11*4)
	MOVQ R13, R12
	SUBQ R11, R12
	MOVL $0xffff, R8
	BZHIL R12, R8, R8
	KMOVW R8, K1
	VADDPS Z3, Z17, K1, Z17
	ADDQ $16, R11
	CMPQ R11, R13
	JLT  t4exp
	VEXTRACTF32X8 $1, Z17, Y1
	VADDPS Y1, Y17, Y1
	VEXTRACTF128 $1, Y1, X2
	VADDPS X2, X1, X1
	VMOVHLPS X1, X1, X2
	VADDPS X2, X1, X1
	VMOVSHDUP X1, X2
	VADDSS X2, X1, X1
	VMOVSS 4(R15), X2
	VMULSS X19, X2, X2
	VADDSS X1, X2, X2
	VMOVSS X2, 4(R15)
	VSHUFF32X4 $0x39, Z30, Z30, Z30 // next query's max into lane 0
	ADDQ $40, R9
	DECQ R10
	JNZ  t4q

	// acc = acc·corr + Σ_t p_t·v_t, 64 dims of four queries at a time.
	MOVQ 24(AX), R8
	MOVQ 64(AX), R9
	MOVQ 104(AX), R10
	MOVQ 144(AX), R11
	VBROADCASTSS 32(AX), Z24
	VBROADCASTSS 72(AX), Z25
	VBROADCASTSS 112(AX), Z26
	VBROADCASTSS 152(AX), Z27
	SHLQ $2, R14            // row stride in bytes
	XORQ BX, BX
t4v:
	MOVQ R14, R12
	SUBQ BX, R12
	CMPQ R12, $256
	JLT  t4v16
	LOADACC64(8, Z24, Z0, Z1, Z2, Z3)
	LOADACC64(48, Z25, Z4, Z5, Z6, Z7)
	LOADACC64(88, Z26, Z8, Z9, Z10, Z11)
	LOADACC64(128, Z27, Z12, Z13, Z14, Z15)
	LEAQ (SI)(BX*1), R12
	XORQ CX, CX
t4v64t:
	VBROADCASTSS (R8)(CX*4), Z16
	VBROADCASTSS (R9)(CX*4), Z17
	VBROADCASTSS (R10)(CX*4), Z18
	VBROADCASTSS (R11)(CX*4), Z19
	VMOVUPS 0(R12), Z20
	VMOVUPS 64(R12), Z21
	VMOVUPS 128(R12), Z22
	VMOVUPS 192(R12), Z23
	FMA4(Z16, Z0, Z1, Z2, Z3)
	FMA4(Z17, Z4, Z5, Z6, Z7)
	FMA4(Z18, Z8, Z9, Z10, Z11)
	FMA4(Z19, Z12, Z13, Z14, Z15)
	ADDQ R14, R12
	INCQ CX
	CMPQ CX, R13
	JLT  t4v64t
	STOREACC64(8, Z0, Z1, Z2, Z3)
	STOREACC64(48, Z4, Z5, Z6, Z7)
	STOREACC64(88, Z8, Z9, Z10, Z11)
	STOREACC64(128, Z12, Z13, Z14, Z15)
	ADDQ $256, BX
	JMP  t4vnext

t4v16:
	MOVQ 8(AX), DI
	VMULPS (DI)(BX*1), Z24, Z0
	MOVQ 48(AX), DI
	VMULPS (DI)(BX*1), Z25, Z1
	MOVQ 88(AX), DI
	VMULPS (DI)(BX*1), Z26, Z2
	MOVQ 128(AX), DI
	VMULPS (DI)(BX*1), Z27, Z3
	LEAQ (SI)(BX*1), R12
	XORQ CX, CX
t4v16t:
	VBROADCASTSS (R8)(CX*4), Z16
	VBROADCASTSS (R9)(CX*4), Z17
	VBROADCASTSS (R10)(CX*4), Z18
	VBROADCASTSS (R11)(CX*4), Z19
	VMOVUPS 0(R12), Z20
	VFMADD231PS Z20, Z16, Z0
	VFMADD231PS Z20, Z17, Z1
	VFMADD231PS Z20, Z18, Z2
	VFMADD231PS Z20, Z19, Z3
	ADDQ R14, R12
	INCQ CX
	CMPQ CX, R13
	JLT  t4v16t
	MOVQ 8(AX), DI
	VMOVUPS Z0, (DI)(BX*1)
	MOVQ 48(AX), DI
	VMOVUPS Z1, (DI)(BX*1)
	MOVQ 88(AX), DI
	VMOVUPS Z2, (DI)(BX*1)
	MOVQ 128(AX), DI
	VMOVUPS Z3, (DI)(BX*1)
	ADDQ $64, BX

t4vnext:
	CMPQ BX, R14
	JLT  t4v
	VZEROUPPER
	RET

// One row of the 2×8 FMA block: query q against keys in Z20..Z27.
#define FMA8(q, a0, a1, a2, a3, a4, a5, a6, a7) \
	VFMADD231PS Z20, q, a0 \
	VFMADD231PS Z21, q, a1 \
	VFMADD231PS Z22, q, a2 \
	VFMADD231PS Z23, q, a3 \
	VFMADD231PS Z24, q, a4 \
	VFMADD231PS Z25, q, a5 \
	VFMADD231PS Z26, q, a6 \
	VFMADD231PS Z27, q, a7

// func tile2AVX512(qs *[4]qref, k, v *float32, n, hd int, scale float32)
//
// tile4AVX512 for two queries (decode with two query heads per kv head):
// blocks of 8 keys in the score phase, 128 dims per pass in the V phase.
// Per query the operations are tileAVX512's (TestGroupKernelsMatchTile).
TEXT ·tile2AVX512(SB), NOSPLIT, $0-44
	MOVQ qs+0(FP), AX
	MOVQ k+8(FP), DX
	MOVQ v+16(FP), SI
	MOVQ n+24(FP), R13
	MOVQ hd+32(FP), R14
	VBROADCASTSS scale+40(FP), Z29
	VMOVDQU32 keyperm<>(SB), Z28
	VBROADCASTSS c_ninf<>(SB), Z30 // running max, lane 8q+j: query q, key ≡ j mod 8

	XORQ BX, BX
t2block:
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
	MOVQ 16(AX), R8
	MOVQ 56(AX), R9
	MOVQ BX, R12
	SHLQ $6, R12
	ADDQ DX, R12
	MOVQ R14, CX
	SHRQ $4, CX
t2chunk:
	VMOVUPS (R8), Z16
	VMOVUPS (R9), Z17
	VMOVUPS 0(R12), Z20
	VMOVUPS 64(R12), Z21
	VMOVUPS 128(R12), Z22
	VMOVUPS 192(R12), Z23
	VMOVUPS 256(R12), Z24
	VMOVUPS 320(R12), Z25
	VMOVUPS 384(R12), Z26
	VMOVUPS 448(R12), Z27
	FMA8(Z16, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7)
	FMA8(Z17, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15)
	ADDQ $64, R8
	ADDQ $64, R9
	ADDQ $4096, R12
	DECQ CX
	JNZ  t2chunk

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
	VPERMPS Z0, Z28, Z0     // lane 8q+j: query q, key BX+j
	VMULPS Z29, Z0, Z0
	MOVQ 24(AX), DI
	VEXTRACTF32X8 $0, Z0, (DI)(BX*4)
	MOVQ 64(AX), DI
	VEXTRACTF32X8 $1, Z0, (DI)(BX*4)

	MOVQ R13, DI
	SUBQ BX, DI
	MOVL $0xff, R15
	BZHIL DI, R15, R15
	IMUL3L $0x101, R15, R15
	KMOVW R15, K1
	VMAXPS Z0, Z30, K1, Z30

	ADDQ $8, BX
	CMPQ BX, R13
	JLT  t2block

	// Each query's tile max in every lane of its 256-bit half.
	VPERMILPS $0xB1, Z30, Z31
	VMAXPS Z31, Z30, Z30
	VPERMILPS $0x4E, Z30, Z31
	VMAXPS Z31, Z30, Z30
	VSHUFF32X4 $0xB1, Z30, Z30, Z31
	VMAXPS Z31, Z30, Z30

	MOVQ AX, R9
	MOVQ $2, R10
t2q:
	MOVQ 0(R9), R15         // ml
	VMOVAPS X30, X1
	VMOVSS (R15), X3
	VMAXSS X3, X1, X1
	VMOVSS X1, (R15)
	VSUBSS X1, X3, X3
	VBROADCASTSS X1, Z18
	VBROADCASTSS X3, Z19
	EXP512(Z19, Z0, Z1, Z2)
	VMOVSS X19, 32(R9)
	MOVQ 24(R9), DI         // s
	VPXORD Z17, Z17, Z17
	XORQ R11, R11
t2exp:
	VMOVUPS (DI)(R11*4), Z3
	VSUBPS Z18, Z3, Z3
	EXP512(Z3, Z0, Z1, Z2)
	VMOVUPS Z3, (DI)(R11*4)
	MOVQ R13, R12
	SUBQ R11, R12
	MOVL $0xffff, R8
	BZHIL R12, R8, R8
	KMOVW R8, K1
	VADDPS Z3, Z17, K1, Z17
	ADDQ $16, R11
	CMPQ R11, R13
	JLT  t2exp
	VEXTRACTF32X8 $1, Z17, Y1
	VADDPS Y1, Y17, Y1
	VEXTRACTF128 $1, Y1, X2
	VADDPS X2, X1, X1
	VMOVHLPS X1, X1, X2
	VADDPS X2, X1, X1
	VMOVSHDUP X1, X2
	VADDSS X2, X1, X1
	VMOVSS 4(R15), X2
	VMULSS X19, X2, X2
	VADDSS X1, X2, X2
	VMOVSS X2, 4(R15)
	VSHUFF32X4 $0x4E, Z30, Z30, Z30 // the other query's max into lane 0
	ADDQ $40, R9
	DECQ R10
	JNZ  t2q

	// acc = acc·corr + Σ_t p_t·v_t, 128 (else 16) dims of both queries at a time.
	MOVQ 24(AX), R8
	MOVQ 64(AX), R9
	VBROADCASTSS 32(AX), Z28
	VBROADCASTSS 72(AX), Z29
	SHLQ $2, R14
	XORQ BX, BX
t2v:
	MOVQ R14, R12
	SUBQ BX, R12
	CMPQ R12, $512
	JLT  t2v16
	LOADACC64(8, Z28, Z0, Z1, Z2, Z3)
	LOADACC64(48, Z29, Z8, Z9, Z10, Z11)
	ADDQ $256, BX
	LOADACC64(8, Z28, Z4, Z5, Z6, Z7)
	LOADACC64(48, Z29, Z12, Z13, Z14, Z15)
	SUBQ $256, BX
	LEAQ (SI)(BX*1), R12
	XORQ CX, CX
t2v128t:
	VBROADCASTSS (R8)(CX*4), Z16
	VBROADCASTSS (R9)(CX*4), Z17
	VMOVUPS 0(R12), Z20
	VMOVUPS 64(R12), Z21
	VMOVUPS 128(R12), Z22
	VMOVUPS 192(R12), Z23
	VMOVUPS 256(R12), Z24
	VMOVUPS 320(R12), Z25
	VMOVUPS 384(R12), Z26
	VMOVUPS 448(R12), Z27
	FMA8(Z16, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7)
	FMA8(Z17, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15)
	ADDQ R14, R12
	INCQ CX
	CMPQ CX, R13
	JLT  t2v128t
	STOREACC64(8, Z0, Z1, Z2, Z3)
	STOREACC64(48, Z8, Z9, Z10, Z11)
	ADDQ $256, BX
	STOREACC64(8, Z4, Z5, Z6, Z7)
	STOREACC64(48, Z12, Z13, Z14, Z15)
	ADDQ $256, BX
	JMP  t2vnext

t2v16:
	MOVQ 8(AX), DI
	VMULPS (DI)(BX*1), Z28, Z0
	MOVQ 48(AX), DI
	VMULPS (DI)(BX*1), Z29, Z1
	LEAQ (SI)(BX*1), R12
	XORQ CX, CX
t2v16t:
	VBROADCASTSS (R8)(CX*4), Z16
	VBROADCASTSS (R9)(CX*4), Z17
	VMOVUPS 0(R12), Z20
	VFMADD231PS Z20, Z16, Z0
	VFMADD231PS Z20, Z17, Z1
	ADDQ R14, R12
	INCQ CX
	CMPQ CX, R13
	JLT  t2v16t
	MOVQ 8(AX), DI
	VMOVUPS Z0, (DI)(BX*1)
	MOVQ 48(AX), DI
	VMOVUPS Z1, (DI)(BX*1)
	ADDQ $64, BX

t2vnext:
	CMPQ BX, R14
	JLT  t2v
	VZEROUPPER
	RET

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

// func tile2BF16AVX512(qs *[4]qref, k, v *uint16, n, hd int, scale float32)
//
// tile2AVX512 reading K and V straight from a bf16 cache (rows of hd at
// k and v, at least n rounded up to 8 of them readable), widening each vector
// as it is loaded: a decode step streams the cache once, and skipping the
// widened copy saves its writes and re-reads. Widening is exact, so the
// result is bit-identical to tile2AVX512 on the widened tile.
TEXT ·tile2BF16AVX512(SB), NOSPLIT, $0-44
	MOVQ qs+0(FP), AX
	MOVQ k+8(FP), DX
	MOVQ v+16(FP), SI
	MOVQ n+24(FP), R13
	MOVQ hd+32(FP), R14
	VBROADCASTSS scale+40(FP), Z29
	VMOVDQU32 keyperm<>(SB), Z28
	VBROADCASTSS c_ninf<>(SB), Z30 // running max, lane 8q+j: query q, key ≡ j mod 8

	XORQ BX, BX
d2block:
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
	MOVQ 16(AX), R8
	MOVQ 56(AX), R9
	LEAQ (R14)(R14*1), R10  // row stride S in bytes
	LEAQ (R10)(R10*2), R11  // 3S
	MOVQ BX, R12
	IMULQ R10, R12
	ADDQ DX, R12            // key BX
	LEAQ (R12)(R10*4), DI   // key BX+4
	MOVQ R14, CX
	SHRQ $4, CX
d2chunk:
	VMOVUPS (R8), Z16
	VMOVUPS (R9), Z17
	VPMOVZXWD (R12), Z20
	VPMOVZXWD (R12)(R10*1), Z21
	VPMOVZXWD (R12)(R10*2), Z22
	VPMOVZXWD (R12)(R11*1), Z23
	VPMOVZXWD (DI), Z24
	VPMOVZXWD (DI)(R10*1), Z25
	VPMOVZXWD (DI)(R10*2), Z26
	VPMOVZXWD (DI)(R11*1), Z27
	VPSLLD $16, Z20, Z20
	VPSLLD $16, Z21, Z21
	VPSLLD $16, Z22, Z22
	VPSLLD $16, Z23, Z23
	VPSLLD $16, Z24, Z24
	VPSLLD $16, Z25, Z25
	VPSLLD $16, Z26, Z26
	VPSLLD $16, Z27, Z27
	FMA8(Z16, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7)
	FMA8(Z17, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15)
	ADDQ $64, R8
	ADDQ $64, R9
	ADDQ $32, R12
	ADDQ $32, DI
	DECQ CX
	JNZ  d2chunk

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
	VPERMPS Z0, Z28, Z0     // lane 8q+j: query q, key BX+j
	VMULPS Z29, Z0, Z0
	MOVQ 24(AX), DI
	VEXTRACTF32X8 $0, Z0, (DI)(BX*4)
	MOVQ 64(AX), DI
	VEXTRACTF32X8 $1, Z0, (DI)(BX*4)

	MOVQ R13, DI
	SUBQ BX, DI
	MOVL $0xff, R15
	BZHIL DI, R15, R15
	IMUL3L $0x101, R15, R15
	KMOVW R15, K1
	VMAXPS Z0, Z30, K1, Z30

	ADDQ $8, BX
	CMPQ BX, R13
	JLT  d2block

	// Each query's tile max in every lane of its 256-bit half.
	VPERMILPS $0xB1, Z30, Z31
	VMAXPS Z31, Z30, Z30
	VPERMILPS $0x4E, Z30, Z31
	VMAXPS Z31, Z30, Z30
	VSHUFF32X4 $0xB1, Z30, Z30, Z31
	VMAXPS Z31, Z30, Z30

	MOVQ AX, R9
	MOVQ $2, R10
d2q:
	MOVQ 0(R9), R15         // ml
	VMOVAPS X30, X1
	VMOVSS (R15), X3
	VMAXSS X3, X1, X1
	VMOVSS X1, (R15)
	VSUBSS X1, X3, X3
	VBROADCASTSS X1, Z18
	VBROADCASTSS X3, Z19
	EXP512(Z19, Z0, Z1, Z2)
	VMOVSS X19, 32(R9)
	MOVQ 24(R9), DI         // s
	VPXORD Z17, Z17, Z17
	XORQ R11, R11
d2exp:
	VMOVUPS (DI)(R11*4), Z3
	VSUBPS Z18, Z3, Z3
	EXP512(Z3, Z0, Z1, Z2)
	VMOVUPS Z3, (DI)(R11*4)
	MOVQ R13, R12
	SUBQ R11, R12
	MOVL $0xffff, R8
	BZHIL R12, R8, R8
	KMOVW R8, K1
	VADDPS Z3, Z17, K1, Z17
	ADDQ $16, R11
	CMPQ R11, R13
	JLT  d2exp
	VEXTRACTF32X8 $1, Z17, Y1
	VADDPS Y1, Y17, Y1
	VEXTRACTF128 $1, Y1, X2
	VADDPS X2, X1, X1
	VMOVHLPS X1, X1, X2
	VADDPS X2, X1, X1
	VMOVSHDUP X1, X2
	VADDSS X2, X1, X1
	VMOVSS 4(R15), X2
	VMULSS X19, X2, X2
	VADDSS X1, X2, X2
	VMOVSS X2, 4(R15)
	VSHUFF32X4 $0x4E, Z30, Z30, Z30 // the other query's max into lane 0
	ADDQ $40, R9
	DECQ R10
	JNZ  d2q

	// acc = acc·corr + Σ_t p_t·v_t, 128 (else 16) dims of both queries at a time.
	MOVQ 24(AX), R8
	MOVQ 64(AX), R9
	VBROADCASTSS 32(AX), Z28
	VBROADCASTSS 72(AX), Z29
	LEAQ (R14)(R14*1), R10  // bf16 row stride
	SHLQ $2, R14
	XORQ BX, BX
d2v:
	MOVQ R14, R12
	SUBQ BX, R12
	CMPQ R12, $512
	JLT  d2v16
	LOADACC64(8, Z28, Z0, Z1, Z2, Z3)
	LOADACC64(48, Z29, Z8, Z9, Z10, Z11)
	ADDQ $256, BX
	LOADACC64(8, Z28, Z4, Z5, Z6, Z7)
	LOADACC64(48, Z29, Z12, Z13, Z14, Z15)
	SUBQ $256, BX
	MOVQ BX, R12
	SHRQ $1, R12
	ADDQ SI, R12            // bf16 dims from BX/4
	MOVQ R10, R11
	SHLQ $6, R11            // 64 rows: the next tile
	LEAQ (DX)(R11*1), R15   // its K rows
	XORQ CX, CX
d2v128t:
	// Nothing else touches DRAM in a decode step: fetch the next tile's
	// K and V rows into L2 while this one is computed.
	PREFETCHT1 0(R12)(R11*1)
	PREFETCHT1 64(R12)(R11*1)
	PREFETCHT1 128(R12)(R11*1)
	PREFETCHT1 192(R12)(R11*1)
	PREFETCHT1 0(R15)
	PREFETCHT1 64(R15)
	PREFETCHT1 128(R15)
	PREFETCHT1 192(R15)
	ADDQ R10, R15
	VBROADCASTSS (R8)(CX*4), Z16
	VBROADCASTSS (R9)(CX*4), Z17
	VPMOVZXWD 0(R12), Z20
	VPMOVZXWD 32(R12), Z21
	VPMOVZXWD 64(R12), Z22
	VPMOVZXWD 96(R12), Z23
	VPMOVZXWD 128(R12), Z24
	VPMOVZXWD 160(R12), Z25
	VPMOVZXWD 192(R12), Z26
	VPMOVZXWD 224(R12), Z27
	VPSLLD $16, Z20, Z20
	VPSLLD $16, Z21, Z21
	VPSLLD $16, Z22, Z22
	VPSLLD $16, Z23, Z23
	VPSLLD $16, Z24, Z24
	VPSLLD $16, Z25, Z25
	VPSLLD $16, Z26, Z26
	VPSLLD $16, Z27, Z27
	FMA8(Z16, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7)
	FMA8(Z17, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15)
	ADDQ R10, R12
	INCQ CX
	CMPQ CX, R13
	JLT  d2v128t
	STOREACC64(8, Z0, Z1, Z2, Z3)
	STOREACC64(48, Z8, Z9, Z10, Z11)
	ADDQ $256, BX
	STOREACC64(8, Z4, Z5, Z6, Z7)
	STOREACC64(48, Z12, Z13, Z14, Z15)
	ADDQ $256, BX
	JMP  d2vnext

d2v16:
	MOVQ 8(AX), DI
	VMULPS (DI)(BX*1), Z28, Z0
	MOVQ 48(AX), DI
	VMULPS (DI)(BX*1), Z29, Z1
	MOVQ BX, R12
	SHRQ $1, R12
	ADDQ SI, R12
	XORQ CX, CX
d2v16t:
	VBROADCASTSS (R8)(CX*4), Z16
	VBROADCASTSS (R9)(CX*4), Z17
	VPMOVZXWD 0(R12), Z20
	VPSLLD $16, Z20, Z20
	VFMADD231PS Z20, Z16, Z0
	VFMADD231PS Z20, Z17, Z1
	ADDQ R10, R12
	INCQ CX
	CMPQ CX, R13
	JLT  d2v16t
	MOVQ 8(AX), DI
	VMOVUPS Z0, (DI)(BX*1)
	MOVQ 48(AX), DI
	VMOVUPS Z1, (DI)(BX*1)
	ADDQ $64, BX

d2vnext:
	CMPQ BX, R14
	JLT  d2v
	VZEROUPPER
	RET

// func tile4BF16AVX512(qs *[4]qref, k, v *uint16, n, hd int, scale float32)
//
// tile4AVX512 reading a bf16 cache in place, as tile2BF16AVX512 does (rows
// of hd at k and v, n rounded up to 4 of them readable): bit-identical to
// tile4AVX512 on the widened tile.
//
// tileAVX512 for four queries over the same n positions at once: each K and
// V vector loaded feeds four FMAs. Per query the operations are exactly
// tileAVX512's — the score of (query, key) is the same FMA chain and fold
// tree, only the assignment of chains to registers differs — so results are
// bit-identical to four single calls (TestGroupKernelsMatchTile).
// qref is {ml, acc, q, s *float32; corr float32}: 40 bytes.
TEXT ·tile4BF16AVX512(SB), NOSPLIT, $0-44
	MOVQ qs+0(FP), AX
	MOVQ k+8(FP), DX
	MOVQ v+16(FP), SI
	MOVQ n+24(FP), R13
	MOVQ hd+32(FP), R14
	VBROADCASTSS scale+40(FP), Z29
	VMOVDQU32 keyperm<>(SB), Z28
	VBROADCASTSS c_ninf<>(SB), Z30 // running max, lane 4q+j: query q, key ≡ j mod 4

	// Scores in blocks of 4 keys: Z(4q+j) accumulates query q · key BX+j.
	XORQ BX, BX
q4block:
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
	MOVQ 16(AX), R8
	MOVQ 56(AX), R9
	MOVQ 96(AX), R10
	MOVQ 136(AX), R11
	LEAQ (R14)(R14*1), DI   // row stride S in bytes
	LEAQ (DI)(DI*2), R15    // 3S
	MOVQ BX, R12
	IMULQ DI, R12
	ADDQ DX, R12            // key BX
	MOVQ R14, CX
	SHRQ $4, CX
q4chunk:
	VMOVUPS (R8), Z16
	VMOVUPS (R9), Z17
	VMOVUPS (R10), Z18
	VMOVUPS (R11), Z19
	VPMOVZXWD (R12), Z20
	VPMOVZXWD (R12)(DI*1), Z21
	VPMOVZXWD (R12)(DI*2), Z22
	VPMOVZXWD (R12)(R15*1), Z23
	VPSLLD $16, Z20, Z20
	VPSLLD $16, Z21, Z21
	VPSLLD $16, Z22, Z22
	VPSLLD $16, Z23, Z23
	FMA4(Z16, Z0, Z1, Z2, Z3)
	FMA4(Z17, Z4, Z5, Z6, Z7)
	FMA4(Z18, Z8, Z9, Z10, Z11)
	FMA4(Z19, Z12, Z13, Z14, Z15)
	ADDQ $64, R8
	ADDQ $64, R9
	ADDQ $64, R10
	ADDQ $64, R11
	ADDQ $32, R12
	DECQ CX
	JNZ  q4chunk

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
	VPERMPS Z0, Z28, Z0     // lane 4q+j: query q, key BX+j
	VMULPS Z29, Z0, Z0
	MOVQ 24(AX), DI
	VEXTRACTF32X4 $0, Z0, (DI)(BX*4)
	MOVQ 64(AX), DI
	VEXTRACTF32X4 $1, Z0, (DI)(BX*4)
	MOVQ 104(AX), DI
	VEXTRACTF32X4 $2, Z0, (DI)(BX*4)
	MOVQ 144(AX), DI
	VEXTRACTF32X4 $3, Z0, (DI)(BX*4)

	MOVQ R13, DI
	SUBQ BX, DI
	MOVL $15, R15
	BZHIL DI, R15, R15
	IMUL3L $0x1111, R15, R15
	KMOVW R15, K1
	VMAXPS Z0, Z30, K1, Z30

	ADDQ $4, BX
	CMPQ BX, R13
	JLT  q4block

	// Each query's tile max in every lane of its 128-bit lane.
	VPERMILPS $0xB1, Z30, Z31
	VMAXPS Z31, Z30, Z30
	VPERMILPS $0x4E, Z30, Z31
	VMAXPS Z31, Z30, Z30

	// Per query, as tileAVX512: m', corr (kept in the qref), p, l.
	MOVQ AX, R9
	MOVQ $4, R10
q4q:
	MOVQ 0(R9), R15         // ml
	VMOVAPS X30, X1
	VMOVSS (R15), X3
	VMAXSS X3, X1, X1
	VMOVSS X1, (R15)
	VSUBSS X1, X3, X3
	VBROADCASTSS X1, Z18
	VBROADCASTSS X3, Z19
	EXP512(Z19, Z0, Z1, Z2)
	VMOVSS X19, 32(R9)
	MOVQ 24(R9), DI         // s
	VPXORD Z17, Z17, Z17
	XORQ R11, R11
q4exp:
	VMOVUPS (DI)(R11*4), Z3
	VSUBPS Z18, Z3, Z3
	EXP512(Z3, Z0, Z1, Z2)
	VMOVUPS Z3, (DI)(R11*4)
	MOVQ R13, R12
	SUBQ R11, R12
	MOVL $0xffff, R8
	BZHIL R12, R8, R8
	KMOVW R8, K1
	VADDPS Z3, Z17, K1, Z17
	ADDQ $16, R11
	CMPQ R11, R13
	JLT  q4exp
	VEXTRACTF32X8 $1, Z17, Y1
	VADDPS Y1, Y17, Y1
	VEXTRACTF128 $1, Y1, X2
	VADDPS X2, X1, X1
	VMOVHLPS X1, X1, X2
	VADDPS X2, X1, X1
	VMOVSHDUP X1, X2
	VADDSS X2, X1, X1
	VMOVSS 4(R15), X2
	VMULSS X19, X2, X2
	VADDSS X1, X2, X2
	VMOVSS X2, 4(R15)
	VSHUFF32X4 $0x39, Z30, Z30, Z30 // next query's max into lane 0
	ADDQ $40, R9
	DECQ R10
	JNZ  q4q

	// acc = acc·corr + Σ_t p_t·v_t, 64 dims of four queries at a time.
	MOVQ 24(AX), R8
	MOVQ 64(AX), R9
	MOVQ 104(AX), R10
	MOVQ 144(AX), R11
	VBROADCASTSS 32(AX), Z24
	VBROADCASTSS 72(AX), Z25
	VBROADCASTSS 112(AX), Z26
	VBROADCASTSS 152(AX), Z27
	LEAQ (R14)(R14*1), R13  // bf16 row stride (n is kept in CX's bound below)
	MOVQ n+24(FP), DX       // n; K base no longer needed
	SHLQ $2, R14            // f32 row bytes: the acc offset bound
	XORQ BX, BX
q4v:
	MOVQ R14, R12
	SUBQ BX, R12
	CMPQ R12, $256
	JLT  q4v16
	LOADACC64(8, Z24, Z0, Z1, Z2, Z3)
	LOADACC64(48, Z25, Z4, Z5, Z6, Z7)
	LOADACC64(88, Z26, Z8, Z9, Z10, Z11)
	LOADACC64(128, Z27, Z12, Z13, Z14, Z15)
	MOVQ BX, R12
	SHRQ $1, R12
	ADDQ SI, R12            // bf16 dims from BX/4
	MOVQ R13, R15
	SHLQ $6, R15            // 64 rows: the next tile
	MOVQ k+8(FP), DI
	ADDQ R15, DI            // its K rows
	XORQ CX, CX
q4v64t:
	// Fetch the next tile's K and V rows into L2 meanwhile (decode streams
	// the cache once).
	PREFETCHT1 0(R12)(R15*1)
	PREFETCHT1 64(R12)(R15*1)
	PREFETCHT1 0(DI)
	PREFETCHT1 64(DI)
	ADDQ R13, DI
	VBROADCASTSS (R8)(CX*4), Z16
	VBROADCASTSS (R9)(CX*4), Z17
	VBROADCASTSS (R10)(CX*4), Z18
	VBROADCASTSS (R11)(CX*4), Z19
	VPMOVZXWD 0(R12), Z20
	VPMOVZXWD 32(R12), Z21
	VPMOVZXWD 64(R12), Z22
	VPMOVZXWD 96(R12), Z23
	VPSLLD $16, Z20, Z20
	VPSLLD $16, Z21, Z21
	VPSLLD $16, Z22, Z22
	VPSLLD $16, Z23, Z23
	FMA4(Z16, Z0, Z1, Z2, Z3)
	FMA4(Z17, Z4, Z5, Z6, Z7)
	FMA4(Z18, Z8, Z9, Z10, Z11)
	FMA4(Z19, Z12, Z13, Z14, Z15)
	ADDQ R13, R12
	INCQ CX
	CMPQ CX, DX
	JLT  q4v64t
	STOREACC64(8, Z0, Z1, Z2, Z3)
	STOREACC64(48, Z4, Z5, Z6, Z7)
	STOREACC64(88, Z8, Z9, Z10, Z11)
	STOREACC64(128, Z12, Z13, Z14, Z15)
	ADDQ $256, BX
	JMP  q4vnext

q4v16:
	MOVQ 8(AX), DI
	VMULPS (DI)(BX*1), Z24, Z0
	MOVQ 48(AX), DI
	VMULPS (DI)(BX*1), Z25, Z1
	MOVQ 88(AX), DI
	VMULPS (DI)(BX*1), Z26, Z2
	MOVQ 128(AX), DI
	VMULPS (DI)(BX*1), Z27, Z3
	MOVQ BX, R12
	SHRQ $1, R12
	ADDQ SI, R12
	XORQ CX, CX
q4v16t:
	VBROADCASTSS (R8)(CX*4), Z16
	VBROADCASTSS (R9)(CX*4), Z17
	VBROADCASTSS (R10)(CX*4), Z18
	VBROADCASTSS (R11)(CX*4), Z19
	VPMOVZXWD 0(R12), Z20
	VPSLLD $16, Z20, Z20
	VFMADD231PS Z20, Z16, Z0
	VFMADD231PS Z20, Z17, Z1
	VFMADD231PS Z20, Z18, Z2
	VFMADD231PS Z20, Z19, Z3
	ADDQ R13, R12
	INCQ CX
	CMPQ CX, DX
	JLT  q4v16t
	MOVQ 8(AX), DI
	VMOVUPS Z0, (DI)(BX*1)
	MOVQ 48(AX), DI
	VMOVUPS Z1, (DI)(BX*1)
	MOVQ 88(AX), DI
	VMOVUPS Z2, (DI)(BX*1)
	MOVQ 128(AX), DI
	VMOVUPS Z3, (DI)(BX*1)
	ADDQ $64, BX

q4vnext:
	CMPQ BX, R14
	JLT  q4v
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

// func tile2I8AVX512(qs *[4]qref, k, v *int8, ks, vs *float32, n, hd int, scale float32)
//
// tile2BF16AVX512 for an int8 cache read in place (rows of hd int8 at k and
// v, their scales at ks and vs, n rounded up to 8 of them readable): each
// vector of 16 is widened (VPMOVSXBD), converted exactly and multiplied by
// its row's scale as it is loaded, the value dequantAVX512 writes, so the
// result is bit-identical to tile2AVX512 on the dequantized tile.
TEXT ·tile2I8AVX512(SB), NOSPLIT, $0-60
	MOVQ qs+0(FP), AX
	MOVQ k+8(FP), DX
	MOVQ v+16(FP), SI
	MOVQ n+40(FP), R13
	MOVQ hd+48(FP), R14
	VBROADCASTSS scale+56(FP), Z29
	// the next tile's scales (64 of each) into L2
	MOVQ ks+24(FP), R15
	PREFETCHT1 256(R15)
	PREFETCHT1 320(R15)
	PREFETCHT1 384(R15)
	PREFETCHT1 448(R15)
	MOVQ vs+32(FP), R15
	PREFETCHT1 256(R15)
	PREFETCHT1 320(R15)
	PREFETCHT1 384(R15)
	PREFETCHT1 448(R15)
	VMOVDQU32 keyperm<>(SB), Z28
	VBROADCASTSS c_ninf<>(SB), Z30 // running max, lane 8q+j: query q, key ≡ j mod 8

	XORQ BX, BX
id2block:
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
	MOVQ 16(AX), R8
	MOVQ 56(AX), R9
	MOVQ R14, R10           // row stride S in bytes
	LEAQ (R10)(R10*2), R11  // 3S
	MOVQ BX, R12
	IMULQ R10, R12
	ADDQ DX, R12            // key BX
	LEAQ (R12)(R10*4), DI   // key BX+4
	MOVQ ks+24(FP), R15
	LEAQ (R15)(BX*4), R15   // scale of key BX
	MOVQ R14, CX
	SHRQ $4, CX
id2chunk:
	VMOVUPS (R8), Z16
	VMOVUPS (R9), Z17
	VPMOVSXBD (R12), Z20
	VPMOVSXBD (R12)(R10*1), Z21
	VPMOVSXBD (R12)(R10*2), Z22
	VPMOVSXBD (R12)(R11*1), Z23
	VPMOVSXBD (DI), Z24
	VPMOVSXBD (DI)(R10*1), Z25
	VPMOVSXBD (DI)(R10*2), Z26
	VPMOVSXBD (DI)(R11*1), Z27
	VCVTDQ2PS Z20, Z20
	VCVTDQ2PS Z21, Z21
	VCVTDQ2PS Z22, Z22
	VCVTDQ2PS Z23, Z23
	VCVTDQ2PS Z24, Z24
	VCVTDQ2PS Z25, Z25
	VCVTDQ2PS Z26, Z26
	VCVTDQ2PS Z27, Z27
	VMULPS.BCST 0(R15), Z20, Z20
	VMULPS.BCST 4(R15), Z21, Z21
	VMULPS.BCST 8(R15), Z22, Z22
	VMULPS.BCST 12(R15), Z23, Z23
	VMULPS.BCST 16(R15), Z24, Z24
	VMULPS.BCST 20(R15), Z25, Z25
	VMULPS.BCST 24(R15), Z26, Z26
	VMULPS.BCST 28(R15), Z27, Z27
	FMA8(Z16, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7)
	FMA8(Z17, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15)
	ADDQ $64, R8
	ADDQ $64, R9
	ADDQ $16, R12
	ADDQ $16, DI
	DECQ CX
	JNZ  id2chunk

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
	VPERMPS Z0, Z28, Z0     // lane 8q+j: query q, key BX+j
	VMULPS Z29, Z0, Z0
	MOVQ 24(AX), DI
	VEXTRACTF32X8 $0, Z0, (DI)(BX*4)
	MOVQ 64(AX), DI
	VEXTRACTF32X8 $1, Z0, (DI)(BX*4)

	MOVQ R13, DI
	SUBQ BX, DI
	MOVL $0xff, R15
	BZHIL DI, R15, R15
	IMUL3L $0x101, R15, R15
	KMOVW R15, K1
	VMAXPS Z0, Z30, K1, Z30

	ADDQ $8, BX
	CMPQ BX, R13
	JLT  id2block

	// Each query's tile max in every lane of its 256-bit half.
	VPERMILPS $0xB1, Z30, Z31
	VMAXPS Z31, Z30, Z30
	VPERMILPS $0x4E, Z30, Z31
	VMAXPS Z31, Z30, Z30
	VSHUFF32X4 $0xB1, Z30, Z30, Z31
	VMAXPS Z31, Z30, Z30

	MOVQ AX, R9
	MOVQ $2, R10
id2q:
	MOVQ 0(R9), R15         // ml
	VMOVAPS X30, X1
	VMOVSS (R15), X3
	VMAXSS X3, X1, X1
	VMOVSS X1, (R15)
	VSUBSS X1, X3, X3
	VBROADCASTSS X1, Z18
	VBROADCASTSS X3, Z19
	EXP512(Z19, Z0, Z1, Z2)
	VMOVSS X19, 32(R9)
	MOVQ 24(R9), DI         // s
	VPXORD Z17, Z17, Z17
	XORQ R11, R11
id2exp:
	VMOVUPS (DI)(R11*4), Z3
	VSUBPS Z18, Z3, Z3
	EXP512(Z3, Z0, Z1, Z2)
	VMOVUPS Z3, (DI)(R11*4)
	MOVQ R13, R12
	SUBQ R11, R12
	MOVL $0xffff, R8
	BZHIL R12, R8, R8
	KMOVW R8, K1
	VADDPS Z3, Z17, K1, Z17
	ADDQ $16, R11
	CMPQ R11, R13
	JLT  id2exp
	VEXTRACTF32X8 $1, Z17, Y1
	VADDPS Y1, Y17, Y1
	VEXTRACTF128 $1, Y1, X2
	VADDPS X2, X1, X1
	VMOVHLPS X1, X1, X2
	VADDPS X2, X1, X1
	VMOVSHDUP X1, X2
	VADDSS X2, X1, X1
	VMOVSS 4(R15), X2
	VMULSS X19, X2, X2
	VADDSS X1, X2, X2
	VMOVSS X2, 4(R15)
	VSHUFF32X4 $0x4E, Z30, Z30, Z30 // the other query's max into lane 0
	ADDQ $40, R9
	DECQ R10
	JNZ  id2q

	// acc = acc·corr + Σ_t p_t·v_t, 128 (else 16) dims of both queries at a time.
	MOVQ 24(AX), R8
	MOVQ 64(AX), R9
	VBROADCASTSS 32(AX), Z28
	VBROADCASTSS 72(AX), Z29
	MOVQ R14, R10           // int8 row stride
	SHLQ $2, R14
	XORQ BX, BX
id2v:
	MOVQ R14, R12
	SUBQ BX, R12
	CMPQ R12, $512
	JLT  id2v16
	LOADACC64(8, Z28, Z0, Z1, Z2, Z3)
	LOADACC64(48, Z29, Z8, Z9, Z10, Z11)
	ADDQ $256, BX
	LOADACC64(8, Z28, Z4, Z5, Z6, Z7)
	LOADACC64(48, Z29, Z12, Z13, Z14, Z15)
	SUBQ $256, BX
	MOVQ BX, R12
	SHRQ $2, R12
	ADDQ SI, R12            // int8 dims from BX/4
	MOVQ R10, R11
	SHLQ $6, R11            // 64 rows: the next tile
	LEAQ (DX)(R11*1), R15   // its K rows
	MOVQ vs+32(FP), DI
	XORQ CX, CX
id2v128t:
	// Nothing else touches DRAM in a decode step: fetch the next tile's
	// K and V rows into L2 while this one is computed.
	PREFETCHT1 0(R12)(R11*1)
	PREFETCHT1 64(R12)(R11*1)
	PREFETCHT1 0(R15)
	PREFETCHT1 64(R15)
	ADDQ R10, R15
	VBROADCASTSS (R8)(CX*4), Z16
	VBROADCASTSS (R9)(CX*4), Z17
	VBROADCASTSS (DI)(CX*4), Z18
	VPMOVSXBD 0(R12), Z20
	VPMOVSXBD 16(R12), Z21
	VPMOVSXBD 32(R12), Z22
	VPMOVSXBD 48(R12), Z23
	VPMOVSXBD 64(R12), Z24
	VPMOVSXBD 80(R12), Z25
	VPMOVSXBD 96(R12), Z26
	VPMOVSXBD 112(R12), Z27
	VCVTDQ2PS Z20, Z20
	VCVTDQ2PS Z21, Z21
	VCVTDQ2PS Z22, Z22
	VCVTDQ2PS Z23, Z23
	VCVTDQ2PS Z24, Z24
	VCVTDQ2PS Z25, Z25
	VCVTDQ2PS Z26, Z26
	VCVTDQ2PS Z27, Z27
	VMULPS Z18, Z20, Z20
	VMULPS Z18, Z21, Z21
	VMULPS Z18, Z22, Z22
	VMULPS Z18, Z23, Z23
	VMULPS Z18, Z24, Z24
	VMULPS Z18, Z25, Z25
	VMULPS Z18, Z26, Z26
	VMULPS Z18, Z27, Z27
	FMA8(Z16, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7)
	FMA8(Z17, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15)
	ADDQ R10, R12
	INCQ CX
	CMPQ CX, R13
	JLT  id2v128t
	STOREACC64(8, Z0, Z1, Z2, Z3)
	STOREACC64(48, Z8, Z9, Z10, Z11)
	ADDQ $256, BX
	STOREACC64(8, Z4, Z5, Z6, Z7)
	STOREACC64(48, Z12, Z13, Z14, Z15)
	ADDQ $256, BX
	JMP  id2vnext

id2v16:
	MOVQ 8(AX), DI
	VMULPS (DI)(BX*1), Z28, Z0
	MOVQ 48(AX), DI
	VMULPS (DI)(BX*1), Z29, Z1
	MOVQ BX, R12
	SHRQ $2, R12
	ADDQ SI, R12
	MOVQ vs+32(FP), DI
	XORQ CX, CX
id2v16t:
	VBROADCASTSS (R8)(CX*4), Z16
	VBROADCASTSS (R9)(CX*4), Z17
	VPMOVSXBD 0(R12), Z20
	VCVTDQ2PS Z20, Z20
	VMULPS.BCST (DI)(CX*4), Z20, Z20
	VFMADD231PS Z20, Z16, Z0
	VFMADD231PS Z20, Z17, Z1
	ADDQ R10, R12
	INCQ CX
	CMPQ CX, R13
	JLT  id2v16t
	MOVQ 8(AX), DI
	VMOVUPS Z0, (DI)(BX*1)
	MOVQ 48(AX), DI
	VMOVUPS Z1, (DI)(BX*1)
	ADDQ $64, BX

id2vnext:
	CMPQ BX, R14
	JLT  id2v
	VZEROUPPER
	RET

// func tile4I8AVX512(qs *[4]qref, k, v *int8, ks, vs *float32, n, hd int, scale float32)
//
// tile4BF16AVX512 for an int8 cache read in place, as tile2I8AVX512 (n
// rounded up to 4 rows and scales readable): bit-identical to tile4AVX512 on
// the dequantized tile.
TEXT ·tile4I8AVX512(SB), NOSPLIT, $0-60
	MOVQ qs+0(FP), AX
	MOVQ k+8(FP), DX
	MOVQ v+16(FP), SI
	MOVQ n+40(FP), R13
	MOVQ hd+48(FP), R14
	VBROADCASTSS scale+56(FP), Z29
	// the next tile's scales (64 of each) into L2
	MOVQ ks+24(FP), R15
	PREFETCHT1 256(R15)
	PREFETCHT1 320(R15)
	PREFETCHT1 384(R15)
	PREFETCHT1 448(R15)
	MOVQ vs+32(FP), R15
	PREFETCHT1 256(R15)
	PREFETCHT1 320(R15)
	PREFETCHT1 384(R15)
	PREFETCHT1 448(R15)
	VMOVDQU32 keyperm<>(SB), Z28
	VBROADCASTSS c_ninf<>(SB), Z30 // running max, lane 4q+j: query q, key ≡ j mod 4

	// Scores in blocks of 4 keys: Z(4q+j) accumulates query q · key BX+j.
	XORQ BX, BX
iq4block:
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
	MOVQ 16(AX), R8
	MOVQ 56(AX), R9
	MOVQ 96(AX), R10
	MOVQ 136(AX), R11
	MOVQ ks+24(FP), R15     // the block's four key scales
	VBROADCASTSS 0(R15)(BX*4), Z24
	VBROADCASTSS 4(R15)(BX*4), Z25
	VBROADCASTSS 8(R15)(BX*4), Z26
	VBROADCASTSS 12(R15)(BX*4), Z27
	MOVQ R14, DI            // row stride S in bytes
	LEAQ (DI)(DI*2), R15    // 3S
	MOVQ BX, R12
	IMULQ DI, R12
	ADDQ DX, R12            // key BX
	MOVQ R14, CX
	SHRQ $4, CX
iq4chunk:
	VMOVUPS (R8), Z16
	VMOVUPS (R9), Z17
	VMOVUPS (R10), Z18
	VMOVUPS (R11), Z19
	VPMOVSXBD (R12), Z20
	VPMOVSXBD (R12)(DI*1), Z21
	VPMOVSXBD (R12)(DI*2), Z22
	VPMOVSXBD (R12)(R15*1), Z23
	VCVTDQ2PS Z20, Z20
	VCVTDQ2PS Z21, Z21
	VCVTDQ2PS Z22, Z22
	VCVTDQ2PS Z23, Z23
	VMULPS Z24, Z20, Z20
	VMULPS Z25, Z21, Z21
	VMULPS Z26, Z22, Z22
	VMULPS Z27, Z23, Z23
	FMA4(Z16, Z0, Z1, Z2, Z3)
	FMA4(Z17, Z4, Z5, Z6, Z7)
	FMA4(Z18, Z8, Z9, Z10, Z11)
	FMA4(Z19, Z12, Z13, Z14, Z15)
	ADDQ $64, R8
	ADDQ $64, R9
	ADDQ $64, R10
	ADDQ $64, R11
	ADDQ $16, R12
	DECQ CX
	JNZ  iq4chunk

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
	VPERMPS Z0, Z28, Z0     // lane 4q+j: query q, key BX+j
	VMULPS Z29, Z0, Z0
	MOVQ 24(AX), DI
	VEXTRACTF32X4 $0, Z0, (DI)(BX*4)
	MOVQ 64(AX), DI
	VEXTRACTF32X4 $1, Z0, (DI)(BX*4)
	MOVQ 104(AX), DI
	VEXTRACTF32X4 $2, Z0, (DI)(BX*4)
	MOVQ 144(AX), DI
	VEXTRACTF32X4 $3, Z0, (DI)(BX*4)

	MOVQ R13, DI
	SUBQ BX, DI
	MOVL $15, R15
	BZHIL DI, R15, R15
	IMUL3L $0x1111, R15, R15
	KMOVW R15, K1
	VMAXPS Z0, Z30, K1, Z30

	ADDQ $4, BX
	CMPQ BX, R13
	JLT  iq4block

	// Each query's tile max in every lane of its 128-bit lane.
	VPERMILPS $0xB1, Z30, Z31
	VMAXPS Z31, Z30, Z30
	VPERMILPS $0x4E, Z30, Z31
	VMAXPS Z31, Z30, Z30

	// Per query, as tileAVX512: m', corr (kept in the qref), p, l.
	MOVQ AX, R9
	MOVQ $4, R10
iq4q:
	MOVQ 0(R9), R15         // ml
	VMOVAPS X30, X1
	VMOVSS (R15), X3
	VMAXSS X3, X1, X1
	VMOVSS X1, (R15)
	VSUBSS X1, X3, X3
	VBROADCASTSS X1, Z18
	VBROADCASTSS X3, Z19
	EXP512(Z19, Z0, Z1, Z2)
	VMOVSS X19, 32(R9)
	MOVQ 24(R9), DI         // s
	VPXORD Z17, Z17, Z17
	XORQ R11, R11
iq4exp:
	VMOVUPS (DI)(R11*4), Z3
	VSUBPS Z18, Z3, Z3
	EXP512(Z3, Z0, Z1, Z2)
	VMOVUPS Z3, (DI)(R11*4)
	MOVQ R13, R12
	SUBQ R11, R12
	MOVL $0xffff, R8
	BZHIL R12, R8, R8
	KMOVW R8, K1
	VADDPS Z3, Z17, K1, Z17
	ADDQ $16, R11
	CMPQ R11, R13
	JLT  iq4exp
	VEXTRACTF32X8 $1, Z17, Y1
	VADDPS Y1, Y17, Y1
	VEXTRACTF128 $1, Y1, X2
	VADDPS X2, X1, X1
	VMOVHLPS X1, X1, X2
	VADDPS X2, X1, X1
	VMOVSHDUP X1, X2
	VADDSS X2, X1, X1
	VMOVSS 4(R15), X2
	VMULSS X19, X2, X2
	VADDSS X1, X2, X2
	VMOVSS X2, 4(R15)
	VSHUFF32X4 $0x39, Z30, Z30, Z30 // next query's max into lane 0
	ADDQ $40, R9
	DECQ R10
	JNZ  iq4q

	// acc = acc·corr + Σ_t p_t·v_t, 64 dims of four queries at a time.
	MOVQ 24(AX), R8
	MOVQ 64(AX), R9
	MOVQ 104(AX), R10
	MOVQ 144(AX), R11
	VBROADCASTSS 32(AX), Z24
	VBROADCASTSS 72(AX), Z25
	VBROADCASTSS 112(AX), Z26
	VBROADCASTSS 152(AX), Z27
	MOVQ R14, R13           // int8 row stride
	MOVQ vs+32(FP), DX      // V scales; K base no longer needed, n compared in memory
	SHLQ $2, R14            // f32 row bytes: the acc offset bound
	XORQ BX, BX
iq4v:
	MOVQ R14, R12
	SUBQ BX, R12
	CMPQ R12, $256
	JLT  iq4v16
	LOADACC64(8, Z24, Z0, Z1, Z2, Z3)
	LOADACC64(48, Z25, Z4, Z5, Z6, Z7)
	LOADACC64(88, Z26, Z8, Z9, Z10, Z11)
	LOADACC64(128, Z27, Z12, Z13, Z14, Z15)
	MOVQ BX, R12
	SHRQ $2, R12
	ADDQ SI, R12            // int8 dims from BX/4
	MOVQ R13, R15
	SHLQ $6, R15            // 64 rows: the next tile
	MOVQ k+8(FP), DI
	ADDQ R15, DI            // its K rows
	XORQ CX, CX
iq4v64t:
	// Fetch the next tile's K and V rows into L2 meanwhile (decode streams
	// the cache once).
	PREFETCHT1 0(R12)(R15*1)
	PREFETCHT1 0(DI)
	ADDQ R13, DI
	VBROADCASTSS (R8)(CX*4), Z16
	VBROADCASTSS (R9)(CX*4), Z17
	VBROADCASTSS (R10)(CX*4), Z18
	VBROADCASTSS (R11)(CX*4), Z19
	VBROADCASTSS (DX)(CX*4), Z28
	VPMOVSXBD 0(R12), Z20
	VPMOVSXBD 16(R12), Z21
	VPMOVSXBD 32(R12), Z22
	VPMOVSXBD 48(R12), Z23
	VCVTDQ2PS Z20, Z20
	VCVTDQ2PS Z21, Z21
	VCVTDQ2PS Z22, Z22
	VCVTDQ2PS Z23, Z23
	VMULPS Z28, Z20, Z20
	VMULPS Z28, Z21, Z21
	VMULPS Z28, Z22, Z22
	VMULPS Z28, Z23, Z23
	FMA4(Z16, Z0, Z1, Z2, Z3)
	FMA4(Z17, Z4, Z5, Z6, Z7)
	FMA4(Z18, Z8, Z9, Z10, Z11)
	FMA4(Z19, Z12, Z13, Z14, Z15)
	ADDQ R13, R12
	INCQ CX
	CMPQ CX, n+40(FP)
	JLT  iq4v64t
	STOREACC64(8, Z0, Z1, Z2, Z3)
	STOREACC64(48, Z4, Z5, Z6, Z7)
	STOREACC64(88, Z8, Z9, Z10, Z11)
	STOREACC64(128, Z12, Z13, Z14, Z15)
	ADDQ $256, BX
	JMP  iq4vnext

iq4v16:
	MOVQ 8(AX), DI
	VMULPS (DI)(BX*1), Z24, Z0
	MOVQ 48(AX), DI
	VMULPS (DI)(BX*1), Z25, Z1
	MOVQ 88(AX), DI
	VMULPS (DI)(BX*1), Z26, Z2
	MOVQ 128(AX), DI
	VMULPS (DI)(BX*1), Z27, Z3
	MOVQ BX, R12
	SHRQ $2, R12
	ADDQ SI, R12
	XORQ CX, CX
iq4v16t:
	VBROADCASTSS (R8)(CX*4), Z16
	VBROADCASTSS (R9)(CX*4), Z17
	VBROADCASTSS (R10)(CX*4), Z18
	VBROADCASTSS (R11)(CX*4), Z19
	VPMOVSXBD 0(R12), Z20
	VCVTDQ2PS Z20, Z20
	VMULPS.BCST (DX)(CX*4), Z20, Z20
	VFMADD231PS Z20, Z16, Z0
	VFMADD231PS Z20, Z17, Z1
	VFMADD231PS Z20, Z18, Z2
	VFMADD231PS Z20, Z19, Z3
	ADDQ R13, R12
	INCQ CX
	CMPQ CX, n+40(FP)
	JLT  iq4v16t
	MOVQ 8(AX), DI
	VMOVUPS Z0, (DI)(BX*1)
	MOVQ 48(AX), DI
	VMOVUPS Z1, (DI)(BX*1)
	MOVQ 88(AX), DI
	VMOVUPS Z2, (DI)(BX*1)
	MOVQ 128(AX), DI
	VMOVUPS Z3, (DI)(BX*1)
	ADDQ $64, BX

iq4vnext:
	CMPQ BX, R14
	JLT  iq4v
	VZEROUPPER
	RET
