//go:build !purego

#include "textflag.h"
#include "amx_amd64.h"
#include "go_asm.h"
#include "coded_amd64.h"

// The tile products of the AMX kernels: C[np][rows][16] = A · B for np = 1,
// 2 or 4 panels, one tile instruction (DOT) per panel and 64 bytes of K.
// Registers: DI the amxTile, SI A (advancing 64 bytes a step), R8 lda,
// BX R11 R12 R9 the panels' B (1 KiB a step), R10 = 64 (B's and C's row
// stride), CX the steps left, AX np, DX where C is stored. Tiles: 0-3 C,
// 4 A, 5-7 B (5 again for the fourth panel). The tiles are configured and
// released within the call, so no tile state outlives it (the goroutine may
// run on another thread next).
// STEP_n(DOT): one step of K for n panels; NEXT_n moves their pointers on.
#define STEP_1(DOT) \
	TILELOADD(4, 6, 8); \
	TILELOADD(5, 3, 10); \
	DOT(0, 4, 5)

#define STEP_2(DOT) \
	STEP_1(DOT); \
	TILELOADD(6, 11, 10); \
	DOT(1, 4, 6)

#define STEP_4(DOT) \
	STEP_2(DOT); \
	TILELOADD(7, 12, 10); \
	DOT(2, 4, 7); \
	TILELOADD(5, 9, 10); \
	DOT(3, 4, 5)

// A product of at most amxFewRows rows (a decode step's) streams its
// weights from memory once, and the tiles' loads alone keep fewer lines in
// flight than the register kernels' loads with their prefetches: so each
// four-panel step asks for the panels' next 1 KiB (PREFETCH_STEP) before
// it multiplies this one (BenchmarkDecode/layers/bf16/amx +1.5 %, a decode
// step's TPOT −1 to −5 %). Taller products re-read their weights from L2,
// and the same prefetches cost them up to 11 % (int8 at 2048 rows).

// PREFETCH_STEP(r): the next step's 1 KiB of the panel at r, into L1.
#define PREFETCH_STEP(r) \
	PREFETCH_256(PREFETCHT0, r, 1024); \
	PREFETCH_256(PREFETCHT0, r, 1280); \
	PREFETCH_256(PREFETCHT0, r, 1536); \
	PREFETCH_256(PREFETCHT0, r, 1792)

#define NEXT_1 \
	ADDQ $64, SI; \
	ADDQ $1024, BX

#define NEXT_2 \
	NEXT_1; \
	ADDQ $1024, R11

#define NEXT_4 \
	NEXT_2; \
	ADDQ $1024, R12; \
	ADDQ $1024, R9

#define TILE_PRODUCT(DOT) \
	MOVQ t+0(FP), DI; \
	LDTILECFG(7); \
	MOVQ 64(DI), SI; \
	MOVQ 72(DI), R8; \
	MOVQ 80(DI), BX; \
	MOVQ 88(DI), R9; \
	MOVQ 96(DI), CX; \
	MOVQ 104(DI), AX; \
	MOVQ $64, R10; \
	LEAQ (BX)(R9*1), R11; \
	LEAQ (R11)(R9*1), R12; \
	LEAQ (R12)(R9*1), R9; \
	MOVQ 112(DI), DX; \
	TILEZERO(0); \
	CMPQ AX, $4; \
	JEQ  four; \
	CMPQ AX, $2; \
	JEQ  two; \
one: \
	STEP_1(DOT); \
	NEXT_1; \
	DECQ CX; \
	JNZ  one; \
	TILESTORED(2, 10, 0); \
	JMP  done; \
two: \
	TILEZERO(1); \
two_loop: \
	STEP_2(DOT); \
	NEXT_2; \
	DECQ CX; \
	JNZ  two_loop; \
	JMP  store; \
four: \
	TILEZERO(1); \
	TILEZERO(2); \
	TILEZERO(3); \
	CMPQ 120(DI), $const_amxFewRows; \
	JGT  four_loop; \
four_fetch: \
	PREFETCH_STEP(BX); \
	PREFETCH_STEP(R11); \
	PREFETCH_STEP(R12); \
	PREFETCH_STEP(R9); \
	STEP_4(DOT); \
	NEXT_4; \
	DECQ CX; \
	JNZ  four_fetch; \
	JMP  store; \
four_loop: \
	STEP_4(DOT); \
	NEXT_4; \
	DECQ CX; \
	JNZ  four_loop; \
store: \
	MOVQ 120(DI), R9; \
	SHLQ $6, R9; \
	TILESTORED(2, 10, 0); \
	ADDQ R9, DX; \
	TILESTORED(2, 10, 1); \
	CMPQ AX, $2; \
	JEQ  done; \
	ADDQ R9, DX; \
	TILESTORED(2, 10, 2); \
	ADDQ R9, DX; \
	TILESTORED(2, 10, 3); \
done: \
	TILERELEASE; \
	RET

// TILE_OUT(ROW, CONVERT) is an epilogue on the C tiles a product stored
// (rows·64 bytes apart): for each row (ROW first) and panel, the 16 outputs
// CONVERTed in Z0, then stored into y or added to it. Registers: AX the
// kargs, SI this row of C tile 0, R9 of tile p, DI y's row, BX 64·p, R11
// sx, R12 sw, R13 wc (int8 only).
#define TILE_OUT(ROW, CONVERT) \
	MOVQ a+0(FP), AX; \
	MOVQ acc+8(FP), SI; \
	MOVQ 32(AX), DI; \
	MOVQ 48(AX), R8; \
	MOVQ 56(AX), R11; \
	MOVQ 64(AX), R12; \
	MOVQ 72(AX), R13; \
	MOVQ 80(AX), CX; \
	MOVQ 88(AX), DX; \
	SHLQ $6, DX; \
	MOVQ CX, R10; \
	SHLQ $6, R10; \
row: \
	ROW; \
	XORQ BX, BX; \
	MOVQ SI, R9; \
panel: \
	VMOVUPS (R9), Z0; \
	CONVERT; \
	CMPQ R8, $0; \
	JEQ  put; \
	VADDPS (DI)(BX*1), Z0, Z0; \
put: \
	VMOVUPS Z0, (DI)(BX*1); \
	ADDQ R10, R9; \
	ADDQ $64, BX; \
	CMPQ BX, DX; \
	JNE  panel; \
	ADDQ $64, SI; \
	ADDQ 40(AX), DI; \
	ADDQ $4, R11; \
	DECQ CX; \
	JNZ  row; \
	VZEROUPPER; \
	RET

#define NOTHING
#define ROW_SCALE VBROADCASTSS (R11), Z30
// y = (f32(Σ − corr) · sx) · sw, as every int8 kernel.
#define QUADS_CONVERT \
	VPSUBD (R13)(BX*1), Z0, Z0; \
	VCVTDQ2PS Z0, Z0; \
	VMULPS Z30, Z0, Z0; \
	VMULPS (R12)(BX*1), Z0, Z0

// func amxDotQuads(t *amxTile)
//
// u8 activations × s8 weights (TDPBUSD): the exact int32 sums VPDPBUSD makes.
TEXT ·amxDotQuads(SB), NOSPLIT, $0-8
	TILE_PRODUCT(TDPBUSD)

// func amxDotPairs(t *amxTile)
//
// bf16 activations × bf16 weights (TDPBF16PS), f32 sums. Each instruction
// adds 32 products to an accumulator at once, rounded its own way (not as
// VDPBF16PS's two at a time), but the same way for every row and tile.
TEXT ·amxDotPairs(SB), NOSPLIT, $0-8
	TILE_PRODUCT(TDPBF16PS)

// func quadsOut(a *kargs, acc unsafe.Pointer): the int8 epilogue on the
// accumulators amxDotQuads stored.
TEXT ·quadsOut(SB), NOSPLIT, $0-16
	TILE_OUT(ROW_SCALE, QUADS_CONVERT)

// func pairsOut(a *kargs, acc unsafe.Pointer): the bf16 epilogue on the
// accumulators amxDotPairs stored, y = C or y += C.
TEXT ·pairsOut(SB), NOSPLIT, $0-16
	TILE_OUT(NOTHING, NOTHING)

// The coded decode product (codedPairs): C[4][rows][16] = A · B over four
// panels of a weight coded in 12 bits, for at most amxFewRows rows. A step
// restores the four panels' blocks into one half of the acc buffer
// (RESTORE_STEP, coded_amd64.h) and multiplies as STEP_4 does; the next
// step restores into the other half (XOR amxRestoreBytes), so that its
// stores do not wait on the tile loads of this one. The C tiles are stored
// to the first half after the last step. Registers as in coded_amd64.h,
// and SI A, R8 lda, R10 = 64, R15 a tile's address.

// func amxCodedPairs(t *amxTile)
TEXT ·amxCodedPairs(SB), NOSPLIT, $0-8
	MOVQ      t+0(FP), DI
	LDTILECFG(7)
	MOVQ      amxTile_x(DI), SI
	MOVQ      amxTile_lda(DI), R8
	CODED_SETUP
	MOVQ      $64, R10
	TILEZERO(0)
	TILEZERO(1)
	TILEZERO(2)
	TILEZERO(3)

coded_step:
	RESTORE_STEP
	TILELOADD(4, 6, 8)
	TILELOADD(5, 14, 10)
	TDPBF16PS(0, 4, 5)
	LEAQ      1024(R14), R15
	TILELOADD(6, 15, 10)
	TDPBF16PS(1, 4, 6)
	LEAQ      2048(R14), R15
	TILELOADD(7, 15, 10)
	TDPBF16PS(2, 4, 7)
	LEAQ      3072(R14), R15
	TILELOADD(5, 15, 10)
	TDPBF16PS(3, 4, 5)
	ADDQ      $64, SI
	XORQ      $const_amxRestoreBytes, R14
	DECQ      CX
	JNZ       coded_step

	MOVQ      amxTile_rows(DI), AX
	SHLQ      $6, AX
	MOVQ      amxTile_acc(DI), DX
	TILESTORED(2, 10, 0)
	ADDQ      AX, DX
	TILESTORED(2, 10, 1)
	ADDQ      AX, DX
	TILESTORED(2, 10, 2)
	ADDQ      AX, DX
	TILESTORED(2, 10, 3)
	TILERELEASE
	VZEROUPPER
	RET
