// Command asmgen writes the assembly headers (and the Go constants behind
// them) that more than one kernel package needs, into the package that runs
// it: the Go assembler cannot include a header from another package's
// directory cleanly, so each package gets its own generated copy of the one
// definition kept here. A package asks for the files it needs:
//
//	//go:generate go run ../internal/asmgen exp_amd64.h exp_const.go
//
// exp_amd64.h   the EXP512 / EXP256 macros (ops.Exp32 on a register) and their constants
// exp_const.go  the same constants for ops.Exp32 itself (package $GOPACKAGE)
// bf16_amd64.h  the VDPBF16PS_Z macro (the Go assembler does not know the instruction)
// amx_amd64.h   the AMX tile instructions as macros (nor these)
// vnni256_amd64.h  the VPDPBUSD_Y macro (AVX-VNNI's VEX encoding, which the assembler lacks)
//
// `make check-generate` fails when a generated file differs from what this
// program writes.
package main

import (
	"bytes"
	"fmt"
	"go/format"
	"log"
	"math"
	"os"
	"strings"

	"github.com/ellm-dev/ellm/kernels/internal/asmgen/emit"
)

// expConst is one f32 constant of Exp32: its Go name, the assembly's name
// (c_<asm>, 16 copies in 64 bytes) and its value.
type expConst struct {
	goName, asm string
	bits        uint32
	doc         string
}

// The constants of Exp32 (Cephes expf): the clamp range, Cody-Waite range
// reduction by ln 2 in two parts, and the degree-5 polynomial of
// e^r ≈ 1 + r + r²·p(r) on |r| ≤ ln2/2, highest coefficient first.
var expConsts = []expConst{
	{"expLo", "lo", 0xc2ae0000, "-87: below it Exp32 returns 0 (e^-87 ≈ 1.6e-38 is almost the smallest normal f32)"},
	{"expHi", "hi", 0x42b00000, "88: above it Exp32 returns e^88 (e^88.7 overflows f32)"},
	{"log2e", "log2e", 0x3fb8aa3b, "log2(e) rounded to f32"},
	{"ln2Hi", "ln2hi", 0x3f318000, "ln 2 = ln2Hi + ln2Lo; few mantissa bits, so n·ln2Hi is exact for |n| ≤ 2^8"},
	{"ln2Lo", "ln2lo", 0xb95e8083, ""},
	{"expP0", "p0", 0x39506967, "e^r ≈ 1 + r + r²·(((((P0·r + P1)·r + P2)·r + P3)·r + P4)·r + P5)"},
	{"expP1", "p1", 0x3ab743ce, ""},
	{"expP2", "p2", 0x3c088908, ""},
	{"expP3", "p3", 0x3d2aa9c1, ""},
	{"expP4", "p4", 0x3e2aaaaa, ""},
	{"expP5", "p5", 0x3f000000, ""},
}

const expMacros = `// Exp32 (kernels/ops) on a register: x ← e^x; n, t, u (and K2 / k) are
// scratch. The same operations in the same order as ops.Exp32, each rounded
// on its own (no fused multiply-add), so the results are its bits. Lanes that
// are not ≥ -87 (NaN included) are zeroed; they are clamped to -87 before
// computing, so that no lane forms a subnormal or NaN intermediate (each
// costs a microcode assist).
#define EXP512(x, n, t, u) \
	{{MASK512}} \
	{{BODY}} \
	{{ZERO512}}

#define EXP256(x, n, t, u, k) \
	{{MASK}} \
	{{BODY}} \
	VANDPS k, x, x
`

const amxMacros = `// The Go assembler (1.27) does not know the AMX instructions either: the
// ones the kernels use are spelled out here as bytes, with registers given
// as numbers (tmm 0-7; general registers in hardware order: 0 AX, 1 CX,
// 2 DX, 3 BX, 6 SI, 7 DI, 8-15 R8-R15), in Intel operand order, like
// the instruction names they stand for.
//
// Encoding: VEX C4 R̄X̄B̄mmmmm Wv̄v̄v̄v̄Lpp opcode ModRM [SIB], map 0F38
// (mmmmm = 00010), W = L = 0. A tile load or store addresses
// [base + index·1] through a SIB byte (ModRM 00 tmm 100); base may not be
// BP or R13 (they need a displacement), index not SP.
// kernels/gemm's TestAMXEncoding disassembles the kernels and checks that
// each use decodes as the instruction and registers written here.

// LDTILECFG [base]: the tile configuration, 64 bytes (base 0-3, 6, 7).
#define LDTILECFG(base) \
	BYTE $0xc4; BYTE $0xe2; BYTE $0x78; BYTE $0x49; BYTE $(base)

// TILERELEASE: every tile back to its initial (unconfigured) state.
#define TILERELEASE \
	BYTE $0xc4; BYTE $0xe2; BYTE $0x78; BYTE $0x49; BYTE $0xc0

// TILEZERO tmm(t).
#define TILEZERO(t) \
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $(0xc0 | (t)<<3)

// TILELOADD tmm(t), [base + index·1]: rows of the tile index bytes apart.
#define TILELOADD(t, base, index) \
	BYTE $0xc4; BYTE $(0x82 | ((((index)>>3)&1)^1)<<6 | ((((base)>>3)&1)^1)<<5); BYTE $0x7b; BYTE $0x4b; \
	BYTE $(0x04 | (t)<<3); BYTE $(((index)&7)<<3 | ((base)&7))

// TILESTORED [base + index·1], tmm(t).
#define TILESTORED(base, index, t) \
	BYTE $0xc4; BYTE $(0x82 | ((((index)>>3)&1)^1)<<6 | ((((base)>>3)&1)^1)<<5); BYTE $0x7a; BYTE $0x4b; \
	BYTE $(0x04 | (t)<<3); BYTE $(((index)&7)<<3 | ((base)&7))

// TDPBF16PS tmm(c), tmm(a), tmm(b): c[m][n] += Σ_k a[m][2k..2k+1]·b[k][n] (bf16 pairs, f32 sums).
#define TDPBF16PS(c, a, b) \
	BYTE $0xc4; BYTE $0xe2; BYTE $((((b)&15)^15)<<3 | 2); BYTE $0x5c; BYTE $(0xc0 | (c)<<3 | (a))

// TDPBUSD tmm(c), tmm(a), tmm(b): c[m][n] += Σ_k a[m][4k..4k+3]·b[k][n] (u8 × s8, int32 sums).
#define TDPBUSD(c, a, b) \
	BYTE $0xc4; BYTE $0xe2; BYTE $((((b)&15)^15)<<3 | 1); BYTE $0x5e; BYTE $(0xc0 | (c)<<3 | (a))
`

const bf16Macro = `// The Go assembler (1.27) does not know the AVX512_BF16 instructions, so the
// one the kernels use is spelled out here as bytes.
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
// kernels/gemm's TestMacroEncoding disassembles every kernel and checks
// each use decodes as the instruction and registers written here;
// TestMatMulAgainstReference and TestSpecialValues check the instruction's
// arithmetic bit for bit against the emulation in gemm/generic.go.
#define VDPBF16PS_Z(src2, src1, dst) \
	BYTE $0x62; \
	BYTE $((((dst>>3)&1)^1)<<7 | (((src2>>4)&1)^1)<<6 | (((src2>>3)&1)^1)<<5 | (((dst>>4)&1)^1)<<4 | 2); \
	BYTE $(((src1&15)^15)<<3 | 6); \
	BYTE $(0x40 | (((src1>>4)&1)^1)<<3); \
	BYTE $0x52; \
	BYTE $(0xc0 | (dst&7)<<3 | (src2&7))
`

const vnni256Macro = `// VPDPBUSD_Y(src2, src1, dst) is {vex} VPDPBUSD ymm(dst), ymm(src1), ymm(src2)
// in Intel order: per dword lane, dst += Σ of the four u8 of src1 × s8 of
// src2. The Go assembler encodes VPDPBUSD on ymm registers as EVEX, which
// needs AVX512_VNNI and AVX512VL; this is the AVX-VNNI form.
// Encoding: VEX.256.66.0F38.W0 50 /r, i.e. C4 P0 P1 50 ModRM with
//   P0 = R̄ X̄ B̄ 0 0 0 1 0  R = bit 3 of dst, B = bit 3 of src2 (inverted), X̄ = 1
//   P1 = 0 v̄ v̄ v̄ v̄ 1 0 1  vvvv = src1 (inverted), L = 1 (256 bits), pp = 01 (66)
//   ModRM = 11 dst[2:0] src2[2:0]
// kernels/gemm's TestMacroEncoding checks that the bytes decode as the
// instruction and registers meant.
#define VPDPBUSD_Y(src2, src1, dst) \
	BYTE $0xc4; \
	BYTE $((((dst>>3)&1)^1)<<7 | 1<<6 | (((src2>>3)&1)^1)<<5 | 2); \
	BYTE $(((src1&15)^15)<<3 | 5); \
	BYTE $0x50; \
	BYTE $(0xc0 | (dst&7)<<3 | (src2&7))
`

const generated = "Code generated by kernels/internal/asmgen; DO NOT EDIT."

func main() {
	log.SetFlags(0)
	log.SetPrefix("asmgen: ")
	if len(os.Args) < 2 {
		log.Fatal("usage: asmgen file... (exp_amd64.h, exp_const.go, bf16_amd64.h, amx_amd64.h, vnni256_amd64.h)")
	}
	for _, name := range os.Args[1:] {
		b, err := generate(name, os.Getenv("GOPACKAGE"))
		if err == nil {
			err = os.WriteFile(name, b, 0o644)
		}
		if err != nil {
			log.Fatal(err)
		}
	}
}

// generate is the content of the file name for Go package pkg.
func generate(name, pkg string) ([]byte, error) {
	switch name {
	case "exp_amd64.h":
		return expHeader(), nil
	case "exp_const.go":
		return expGo(pkg)
	case "bf16_amd64.h":
		return []byte("// " + generated + "\n\n" + bf16Macro), nil
	case "amx_amd64.h":
		return []byte("// " + generated + "\n\n" + amxMacros), nil
	case "vnni256_amd64.h":
		return []byte("// " + generated + "\n\n" + vnni256Macro), nil
	}
	return nil, fmt.Errorf("no generator for %q", name)
}

// expHeader is exp_amd64.h: the macros, then each constant as 64 read-only
// bytes (each including file gets its own file-local copy).
func expHeader() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// %s\n\n", generated)
	body := func(round string) string {
		return strings.ReplaceAll(strings.Join(emit.ExpBody, " \\\n\t"), "ROUND", round)
	}
	k2 := strings.NewReplacer(", k", ", K2").Replace // EXP512's mask is K2
	m := strings.NewReplacer("{{MASK512}}", k2(emit.ExpMask), "{{ZERO512}}", k2(emit.ExpZero512), "{{MASK}}", emit.ExpMask).Replace(expMacros)
	m = strings.Replace(m, "{{BODY}}", body("VRNDSCALEPS"), 1)
	m = strings.Replace(m, "{{BODY}}", body("VROUNDPS"), 1)
	b.WriteString(m)
	data := func(name string, bits uint32) {
		for off := 0; off < 64; off += 8 {
			fmt.Fprintf(&b, "DATA c_%s<>+%d(SB)/8, $%#016x\n", name, off, uint64(bits)<<32|uint64(bits))
		}
		fmt.Fprintf(&b, "GLOBL c_%s<>(SB), RODATA|NOPTR, $64\n", name)
	}
	b.WriteString("\n")
	for _, c := range expConsts {
		data(c.asm, c.bits)
	}
	data("one", math.Float32bits(1))
	// 2^n is formed as (n << 23) + the bits of 1.0 (the exponent bias).
	data("bias", math.Float32bits(1))
	b.WriteString("\n// -inf in every lane: the starting running maximum of a softmax.\n")
	data("ninf", math.Float32bits(float32(math.Inf(-1))))
	return b.Bytes()
}

// expGo is exp_const.go: the constants as Go declarations for package pkg.
func expGo(pkg string) ([]byte, error) {
	if pkg == "" {
		return nil, fmt.Errorf("exp_const.go: GOPACKAGE is not set (run through go generate)")
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "// %s\n\npackage %s\n\n", generated, pkg)
	b.WriteString("// Exp32's constants, the ones exp_amd64.h holds for the assembly.\nconst (\n")
	for _, c := range expConsts {
		if c.doc != "" {
			fmt.Fprintf(&b, "\t// %s\n", c.doc)
		}
		fmt.Fprintf(&b, "\t%s = %v // %#08x\n", c.goName, math.Float32frombits(c.bits), c.bits)
	}
	b.WriteString(")\n")
	return format.Source(b.Bytes())
}
