// The restore of a coded weight (codedPairs, coded.go), shared by the AMX
// kernel amxCodedPairs and the AVX-512 coded kernels (gen_asm.go): each
// step of 16 K pairs restores four panels' blocks into the worker's buffer
// (the amxTile's acc), from which the kernel multiplies, or a pair of rows
// at a time into the registers the kernel multiplies (UNPACK_ROWS, with
// the tables of panels 1-3 in Z13-Z15). Include go_asm.h first.
// Registers: DI the amxTile, BX R11 R12 R9 the four panels' coded
// blocks, CX the steps left, DX the step's raw flags, R13 the step's offset
// in the pairs, R14 the buffer, R15 and AX scratch; Z16 the high-byte table
// (in each 128-bit lane), Z17 0x0f bytes, K1 the escape's bytes of the
// table, K2 the upper half's words, Z18 and Z20-Z22 scratch. The registers
// below Z16 are left to the kernels' accumulators, and Z18 up to their
// scratch.

// CODED_SETUP loads the coded operands of the amxTile at DI.
#define CODED_SETUP \
	MOVQ         amxTile_coded(DI), BX; \
	MOVQ         amxTile_cps(DI), R9; \
	MOVQ         amxTile_steps(DI), CX; \
	MOVQ         amxTile_raw(DI), DX; \
	MOVQ         amxTile_acc(DI), R14; \
	MOVQ         amxTile_lut(DI), AX; \
	VBROADCASTI64X4 (AX), Z16; \
	MOVL         $0x0f0f0f0f, AX; \
	VPBROADCASTD AX, Z17; \
	MOVQ         $0x8000800080008000, AX; \
	KMOVQ        AX, K1; \
	MOVL         $0xffff0000, AX; \
	KMOVD        AX, K2; \
	XORQ         R13, R13; \
	LEAQ         (BX)(R9*1), R11; \
	LEAQ         (R11)(R9*1), R12; \
	LEAQ         (R12)(R9*1), R9

// PREFETCH_256(ins, r, off): the 256 bytes at off(r) by prefetch
// instruction ins (PREFETCHT0 into L1, PREFETCHT1 into L2).
#define PREFETCH_256(ins, r, off) \
	ins off(r); \
	ins off+64(r); \
	ins off+128(r); \
	ins off+192(r)

// UNPACK_ROWS(src, low, code, lut, h, l, r0, r1): two rows' 64 bf16 from
// their 64 low bytes at low(src) and their 64 codes at code(src), in
// registers r0 and r1 (r1 may be l): the codes broadcast, the upper half's
// shifted to the low nibbles; VPSHUFB looks the high bytes up in lut, into
// h; VPUNPCKLBW and VPUNPCKHBW interleave them with the low bytes (in l)
// into the first row and the second (pairSlot). Three shuffles a pair of
// rows.
#define UNPACK_ROWS(src, low, code, lut, h, l, r0, r1) \
	VBROADCASTI64X4 code(src), h; \
	VPSRLW        $4, h, K2, h; \
	VPANDD        Z17, h, h; \
	VPSHUFB       h, lut, h; \
	VMOVDQU64     low(src), l; \
	VPUNPCKLBW    h, l, r0; \
	VPUNPCKHBW    h, l, r1

// RESTORE_ROWS(src, low, code, dst): UNPACK_ROWS into dst(R14) and
// dst+64(R14).
#define RESTORE_ROWS(src, low, code, dst) \
	UNPACK_ROWS(src, low, code, Z16, Z18, Z20, Z21, Z22); \
	VMOVDQU64     Z21, dst(R14); \
	VMOVDQU64     Z22, dst+64(R14)

// RESTORE_BLOCK(src, dst): the block at src, to dst(R14).
#define RESTORE_BLOCK(src, dst) \
	RESTORE_ROWS(src, 0, 512, dst+0); \
	RESTORE_ROWS(src, 64, 544, dst+128); \
	RESTORE_ROWS(src, 128, 576, dst+256); \
	RESTORE_ROWS(src, 192, 608, dst+384); \
	RESTORE_ROWS(src, 256, 640, dst+512); \
	RESTORE_ROWS(src, 320, 672, dst+640); \
	RESTORE_ROWS(src, 384, 704, dst+768); \
	RESTORE_ROWS(src, 448, 736, dst+896)

// COPY_BLOCK(src, dst): the 1 KiB of pairs at src, to dst(R14).
#define COPY_BLOCK(src, dst) \
	VMOVDQU64 0(src), Z18; \
	VMOVDQU64 Z18, dst+0(R14); \
	VMOVDQU64 64(src), Z18; \
	VMOVDQU64 Z18, dst+64(R14); \
	VMOVDQU64 128(src), Z18; \
	VMOVDQU64 Z18, dst+128(R14); \
	VMOVDQU64 192(src), Z18; \
	VMOVDQU64 Z18, dst+192(R14); \
	VMOVDQU64 256(src), Z18; \
	VMOVDQU64 Z18, dst+256(R14); \
	VMOVDQU64 320(src), Z18; \
	VMOVDQU64 Z18, dst+320(R14); \
	VMOVDQU64 384(src), Z18; \
	VMOVDQU64 Z18, dst+384(R14); \
	VMOVDQU64 448(src), Z18; \
	VMOVDQU64 Z18, dst+448(R14); \
	VMOVDQU64 512(src), Z18; \
	VMOVDQU64 Z18, dst+512(R14); \
	VMOVDQU64 576(src), Z18; \
	VMOVDQU64 Z18, dst+576(R14); \
	VMOVDQU64 640(src), Z18; \
	VMOVDQU64 Z18, dst+640(R14); \
	VMOVDQU64 704(src), Z18; \
	VMOVDQU64 Z18, dst+704(R14); \
	VMOVDQU64 768(src), Z18; \
	VMOVDQU64 Z18, dst+768(R14); \
	VMOVDQU64 832(src), Z18; \
	VMOVDQU64 Z18, dst+832(R14); \
	VMOVDQU64 896(src), Z18; \
	VMOVDQU64 Z18, dst+896(R14); \
	VMOVDQU64 960(src), Z18; \
	VMOVDQU64 Z18, dst+960(R14)

// RAW_BLOCK(j, skip): if byte j of AX flags panel j's block of this step
// raw, its pairs (at w + j·ps + R13) over the restored block; the caller
// puts the label skip after it.
#define RAW_BLOCK(j, skip) \
	TESTL    $(0xff<<(8*(j))), AX; \
	JZ       skip; \
	IMUL3Q   $(j), amxTile_ps(DI), R15; \
	ADDQ     amxTile_w(DI), R15; \
	ADDQ     R13, R15; \
	COPY_BLOCK(R15, 1024*(j))

// ESCAPE(j, lut): panel j's escape at this step (R15 bytes after its raw
// flag) as code 15 of the table in lut (K1: byte 15 of each lane).
#define ESCAPE(j, lut) \
	VPBROADCASTB j(DX)(R15*1), Z20; \
	VMOVDQU8     Z20, K1, lut

// PREFETCH_CODED(r): the 768 bytes of the panel at r two steps on, into
// L2. One step on left the register kernels' restores waiting on memory on
// an AMD EPYC (Zen 5) VM; on the tiles of an Intel Xeon the distance made
// no difference (docs/performance.md). Into L1 (PREFETCHT0), the twelve
// lines a panel's step asks for at once held a core of an AMD EPYC Zen 4 at
// 11 GB/s of coded bytes from DRAM, where the pairs stream at 24; into L2
// it streamed at 15-19, and two cores at 24-31 against 19-22
// (docs/performance.md, "thirty-eighth pass"). Further ahead was no faster,
// and not prefetching at all slower. The register kernels spread the same
// prefetches over the step (gen_asm.go, prefetchCoded).
#define PREFETCH_CODED(r) \
	PREFETCH_256(PREFETCHT1, r, 1536); \
	PREFETCH_256(PREFETCHT1, r, 1792); \
	PREFETCH_256(PREFETCHT1, r, 2048)

// RESTORE_STEP restores this step's four blocks into the buffer at R14,
// copies the raw ones over theirs, and moves the coded pointers on to the
// next step. A kernel uses it once (its labels are the function's).
#define RESTORE_STEP \
	MOVQ      amxTile_escOff(DI), R15; \
	PREFETCH_CODED(BX); \
	ESCAPE(0, Z16); \
	RESTORE_BLOCK(BX, 0); \
	PREFETCH_CODED(R11); \
	ESCAPE(1, Z16); \
	RESTORE_BLOCK(R11, 1024); \
	PREFETCH_CODED(R12); \
	ESCAPE(2, Z16); \
	RESTORE_BLOCK(R12, 2048); \
	PREFETCH_CODED(R9); \
	ESCAPE(3, Z16); \
	RESTORE_BLOCK(R9, 3072); \
	MOVL      (DX), AX; \
	TESTL     AX, AX; \
	JZ        restored; \
	RAW_BLOCK(0, raw1); \
raw1: \
	RAW_BLOCK(1, raw2); \
raw2: \
	RAW_BLOCK(2, raw3); \
raw3: \
	RAW_BLOCK(3, restored); \
restored: \
	ADDQ      $const_codedBlock, BX; \
	ADDQ      $const_codedBlock, R11; \
	ADDQ      $const_codedBlock, R12; \
	ADDQ      $const_codedBlock, R9; \
	ADDQ      amxTile_panels(DI), DX; \
	ADDQ      $1024, R13
