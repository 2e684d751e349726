// The Go assembler (1.27) does not know the AVX512_BF16 instructions, so the
// one we use is spelled out here as bytes. Everything else is ordinary Go asm.
//
// VDPBF16PS_Z(src2, src1, dst) is VDPBF16PS zmm(dst), zmm(src1), zmm(src2)
// in Intel order (register operands only, no mask, no broadcast), with the
// registers given as numbers 0-31: per lane j,
//     dst[j] += src1.bf16[2j+1]·src2.bf16[2j+1]; dst[j] += src1.bf16[2j]·src2.bf16[2j]
// The argument order follows Go's convention (sources first, destination last).
//
// Encoding: EVEX.512.F3.0F38.W0 52 /r, i.e. 62 P0 P1 P2 52 ModRM with
//   P0 = R̄ X̄ B̄ R̄' 0 m m m  R/R' = bits 3/4 of dst (inverted), B/X = bits 3/4 of
//                            src2 (inverted), mmm = 010 (0F38 map)
//   P1 = W v̄ v̄ v̄ v̄ 1 p p    W = 0, vvvv = bits 0-3 of src1 (inverted), pp = 10 (F3)
//   P2 = z L' L b V̄' a a a   z = 0, L'L = 10 (512 bits), b = 0, V' = bit 4 of src1
//                            (inverted), aaa = 000 (no mask)
//   ModRM = 11 dst[2:0] src2[2:0]
// The Go assembler rejects right shifts of negative values, so bits are
// inverted with ^1 after shifting rather than with ~ before.
// TestVDPBF16PSEncoding disassembles every kernel with GNU objdump and checks
// each use decodes as the instruction and registers written here;
// TestMatMulAgainstReference and TestSpecialValues check the instruction's
// arithmetic bit for bit against the emulation in generic.go.
#define VDPBF16PS_Z(src2, src1, dst) \
	BYTE $0x62; \
	BYTE $((((dst>>3)&1)^1)<<7 | (((src2>>4)&1)^1)<<6 | (((src2>>3)&1)^1)<<5 | (((dst>>4)&1)^1)<<4 | 2); \
	BYTE $(((src1&15)^15)<<3 | 6); \
	BYTE $(0x40 | (((src1>>4)&1)^1)<<3); \
	BYTE $0x52; \
	BYTE $(0xc0 | (dst&7)<<3 | (src2&7))
