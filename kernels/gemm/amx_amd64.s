//go:build !purego

#include "textflag.h"
#include "amx_amd64.h"

// The tile products of the AMX kernels: C[np][rows][16] = A · B for np = 1,
// 2 or 4 panels, one tile instruction (DOT) per panel and 64 bytes of K.
// Registers: DI the amxTile, SI A (advancing 64 bytes a step), R8 lda,
// BX R11 R12 R9 the panels' B (1 KiB a step), R10 = 64 (B's and C's row
// stride), CX the steps left, AX np, DX where C is stored. Tiles: 0-3 C,
// 4 A, 5-7 B (5 again for the fourth panel). The tiles are configured and
// released within the call, so no tile state outlives it (the goroutine may
// run on another thread next).
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
	TILELOADD(4, 6, 8); \
	TILELOADD(5, 3, 10); \
	DOT(0, 4, 5); \
	ADDQ $64, SI; \
	ADDQ $1024, BX; \
	DECQ CX; \
	JNZ  one; \
	TILESTORED(2, 10, 0); \
	JMP  done; \
two: \
	TILEZERO(1); \
two_loop: \
	TILELOADD(4, 6, 8); \
	TILELOADD(5, 3, 10); \
	DOT(0, 4, 5); \
	TILELOADD(6, 11, 10); \
	DOT(1, 4, 6); \
	ADDQ $64, SI; \
	ADDQ $1024, BX; \
	ADDQ $1024, R11; \
	DECQ CX; \
	JNZ  two_loop; \
	JMP  store; \
four: \
	TILEZERO(1); \
	TILEZERO(2); \
	TILEZERO(3); \
four_loop: \
	TILELOADD(4, 6, 8); \
	TILELOADD(5, 3, 10); \
	DOT(0, 4, 5); \
	TILELOADD(6, 11, 10); \
	DOT(1, 4, 6); \
	TILELOADD(7, 12, 10); \
	DOT(2, 4, 7); \
	TILELOADD(5, 9, 10); \
	DOT(3, 4, 5); \
	ADDQ $64, SI; \
	ADDQ $1024, BX; \
	ADDQ $1024, R11; \
	ADDQ $1024, R12; \
	ADDQ $1024, R9; \
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

// func quadsOut(a *kargs, acc unsafe.Pointer)
//
// The int8 epilogue on the C tiles amxDotQuads stored (rows·64 bytes apart):
// y = (f32(Σ − corr) · sx) · sw, stored or added, as every int8 kernel.
TEXT ·quadsOut(SB), NOSPLIT, $0-16
	MOVQ a+0(FP), AX
	MOVQ acc+8(FP), SI
	MOVQ 32(AX), DI  // y
	MOVQ 48(AX), R8  // add
	MOVQ 56(AX), R11 // sx
	MOVQ 64(AX), R12 // sw
	MOVQ 72(AX), R13 // wc
	MOVQ 80(AX), CX  // rows
	MOVQ 88(AX), DX
	SHLQ $6, DX      // 64·panels
	MOVQ CX, R10
	SHLQ $6, R10     // bytes of one C tile

quads_row:
	VBROADCASTSS (R11), Z30
	XORQ BX, BX      // 64·panel: the offset in y, sw and wc
	MOVQ SI, R9      // this row of C tile 0

quads_panel:
	VMOVDQU32 (R9), Z0
	VPSUBD    (R13)(BX*1), Z0, Z0
	VCVTDQ2PS Z0, Z0
	VMULPS    Z30, Z0, Z0
	VMULPS    (R12)(BX*1), Z0, Z0
	CMPQ      R8, $0
	JEQ       quads_put
	VADDPS    (DI)(BX*1), Z0, Z0

quads_put:
	VMOVUPS Z0, (DI)(BX*1)
	ADDQ    R10, R9
	ADDQ    $64, BX
	CMPQ    BX, DX
	JNE     quads_panel
	ADDQ    $64, SI
	ADDQ    40(AX), DI
	ADDQ    $4, R11
	DECQ    CX
	JNZ     quads_row
	VZEROUPPER
	RET

// func pairsOut(a *kargs, acc unsafe.Pointer)
//
// The bf16 epilogue on the C tiles amxDotPairs stored: y = C or y += C.
TEXT ·pairsOut(SB), NOSPLIT, $0-16
	MOVQ a+0(FP), AX
	MOVQ acc+8(FP), SI
	MOVQ 32(AX), DI  // y
	MOVQ 48(AX), R8  // add
	MOVQ 80(AX), CX  // rows
	MOVQ 88(AX), DX
	SHLQ $6, DX      // 64·panels
	MOVQ CX, R10
	SHLQ $6, R10     // bytes of one C tile

pairs_row:
	XORQ BX, BX
	MOVQ SI, R9

pairs_panel:
	VMOVUPS (R9), Z0
	CMPQ    R8, $0
	JEQ     pairs_put
	VADDPS  (DI)(BX*1), Z0, Z0

pairs_put:
	VMOVUPS Z0, (DI)(BX*1)
	ADDQ    R10, R9
	ADDQ    $64, BX
	CMPQ    BX, DX
	JNE     pairs_panel
	ADDQ    $64, SI
	ADDQ    40(AX), DI
	DECQ    CX
	JNZ     pairs_row
	VZEROUPPER
	RET
