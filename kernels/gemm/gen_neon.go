//go:build ignore

// gen_neon writes kernels_arm64.s and kernels_arm64.go: the NEON tile
// kernels of arm64, one per (family, rows R, panels P), and the widening of
// bf16 pairs. Run it with `go generate` in this directory.
//
// They compute what the AVX2 kernels do (gen_asm.go), operation for
// operation on each output: R×P accumulators of 16 channels (four 128-bit
// registers each), one fused multiply-add per K step (per bf16 pair, the
// even k's before the odd k's), in order, or for int8 one exact SDOT per K
// quad. An output therefore gets the same bits on an arm64 server as on an
// x86 one (TestAsmKernelsMatchDefinitions).
//
// A step multiplies panel by panel: the panel's 64 bytes are loaded and
// widened, then each row's activations are broadcast (VLD1R, VLD2R) and
// multiplied in, so that R·P·4 accumulators, one panel's weights and a
// row's activations fit the 32 vector registers. The loads walk their
// streams with post-increments (NEON loads take no offsets): the
// activations pointer steps over the tile's rows once per panel and steps
// back between panels.
package main

import (
	"bytes"
	"fmt"
	"go/format"
	"log"
	"os"
	"strings"

	"github.com/ellm-dev/ellm/kernels/internal/asmgen/emit"
)

type family struct {
	name  string
	kind  kind
	tiles [][2]int
}

// kind is what a family's weights and activations are.
type kind int

const (
	pairs kind = iota // bf16 pairs, f32 activation pairs
	f32               // f32 weights and activations, one K a step
	quads             // s8 weights, u8 activation quads (int8), four K a step
)

// The tile shapes of the AVX2 path (gen_asm.go), as many as the registers
// hold: pairs R·P ≤ 5 (eight registers of widened weights, two of
// activations, the mask), f32 and int8 R·P ≤ 6.
var families = []family{
	{"pairsNEON", pairs, [][2]int{{1, 1}, {2, 1}, {3, 1}, {4, 1}, {1, 2}, {1, 4}, {2, 2}}},
	{"f32NEON", f32, [][2]int{{1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}, {6, 1}, {1, 2}, {1, 4}, {2, 2}}},
	// int8 on SDOT (the dotprod extension, ARMv8.2): the AVX2 path's
	// arithmetic, Σ q·w exactly with q = u − 128, which is the VNNI
	// kernels' Σ u·w − 128·Σw: the same bits without the correction.
	{"quadsNEON", quads, [][2]int{{1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}, {6, 1}, {1, 2}, {1, 4}, {2, 2}}},
}

// Registers: R0 the kargs, R1 the activations, R2 panel 0 and R5-R7 panels
// 1-3, R3 the bytes between panels, R4 the steps left; V0… the
// accumulators, V20-V27 a panel's weights (V24-V27 as loaded, V20-V23 the
// even halves), V28-V29 a row's activations, V31 the pairs' mask or the
// quads' 0x80 bytes.
const (
	regLo   = 20
	regW    = 24
	regX    = 28
	regMask = 31
)

var panelReg = []string{"R2", "R5", "R6", "R7"}

type gen struct {
	f    family
	r, p int
	buf  emit.File
}

func (g *gen) in(format string, args ...any) { g.buf.I(format, args...) }

func (g *gen) name() string { return fmt.Sprintf("%sR%dP%d", g.f.name, g.r, g.p) }

// acc is the first of the four accumulators of row r, panel j.
func (g *gen) acc(r, j int) int { return (r*g.p + j) * 4 }

// list names four consecutive registers from n as a load or store list.
func list(n int) string {
	return fmt.Sprintf("[V%d.S4, V%d.S4, V%d.S4, V%d.S4]", n, n+1, n+2, n+3)
}

// xstep is the bytes of a row's activations in a step.
func (g *gen) xstep() int {
	if g.f.kind == pairs {
		return 8
	}
	return 4
}

func (g *gen) kernel() {
	if free := map[kind]int{pairs: regLo, f32: regW, quads: regW}[g.f.kind]; g.acc(g.r, 0) > free {
		log.Fatalf("%s: out of vector registers", g.name())
	}
	fmt.Fprintf(&g.buf, "\n// func %s(a *kargs)\nTEXT ·%s(SB), NOSPLIT, $0-8\n", g.name(), g.name())
	g.in("MOVD a+0(FP), R0")
	g.in("MOVD %d(R0), R1", offX)
	g.in("MOVD %d(R0), R2", offW)
	g.in("MOVD %d(R0), R3", offPs)
	g.in("MOVD %d(R0), R4", offKs)
	for j := 1; j < g.p; j++ {
		g.in("ADD R3, %s, %s", panelReg[j-1], panelReg[j])
	}
	for n := range g.acc(g.r, 0) {
		g.in("VEOR V%d.B16, V%d.B16, V%d.B16", n, n, n)
	}
	switch g.f.kind {
	case pairs:
		maskSetup(&g.buf)
	case quads:
		g.in("VMOVI $0x80, V%d.B16", regMask)
	}
	g.buf.Label("loop")
	for j := range g.p {
		g.in("VLD1.P 64(%s), %s", panelReg[j], list(regW))
		if g.f.kind == pairs {
			widen(&g.buf, regW, regLo)
		}
		for r := range g.r {
			switch g.f.kind {
			case pairs:
				g.in("VLD2R.P 8(R1), [V%d.S4, V%d.S4]", regX, regX+1)
				for h := range 4 {
					g.fma(regLo+h, regX, g.acc(r, j)+h)
				}
				for h := range 4 {
					g.fma(regW+h, regX+1, g.acc(r, j)+h)
				}
			case f32:
				g.in("VLD1R.P 4(R1), [V%d.S4]", regX)
				for h := range 4 {
					g.fma(regW+h, regX, g.acc(r, j)+h)
				}
			case quads:
				g.in("VLD1R.P 4(R1), [V%d.S4]", regX)
				g.in("VEOR V%d.B16, V%d.B16, V%d.B16", regMask, regX, regX)
				for h := range 4 {
					g.sdot(regW+h, regX, g.acc(r, j)+h)
				}
			}
		}
		if j < g.p-1 {
			g.in("SUB $%d, R1, R1", g.r*g.xstep())
		}
	}
	g.in("SUBS $1, R4, R4")
	g.in("BNE loop")

	if g.f.kind == quads {
		g.scale()
	}
	// Epilogue: R9 walks the rows of y, R12 a row's panels.
	g.in("MOVD %d(R0), R9", offY)
	g.in("MOVD %d(R0), R10", offLdy)
	g.in("MOVD %d(R0), R11", offAdd)
	g.in("CBNZ R11, add")
	g.rows(func(acc int, y string) { g.in("VST1 %s, (%s)", list(acc), y) })
	g.in("RET")
	g.buf.Label("add")
	g.rows(func(acc int, y string) {
		g.in("VLD1 (%s), %s", y, list(regW))
		for h := range 4 {
			g.in("VFADD V%d.S4, V%d.S4, V%d.S4", regW+h, acc+h, acc+h)
		}
		g.in("VST1 %s, (%s)", list(acc), y)
	})
	g.in("RET")
}

// fma adds w·x to acc, rounded once (FMLA).
func (g *gen) fma(w, x, acc int) { g.in("VFMLA V%d.S4, V%d.S4, V%d.S4", x, w, acc) }

// sdot adds to each int32 lane of acc the dot product of its four signed
// bytes in w and in x. Go's assembler has no SDOT: it is encoded here.
func (g *gen) sdot(w, x, acc int) {
	g.in("WORD $0x%08x // SDOT V%d.4S, V%d.16B, V%d.16B", 0x4e809400|x<<16|w<<5|acc, acc, w, x)
}

// scale turns the int32 sums into (f32(Σ) · sx[row]) · sw[channel], as
// genQuads (whose Σ − corr they are).
func (g *gen) scale() {
	g.in("MOVD %d(R0), R13", offSx)
	g.in("MOVD %d(R0), R14", offSw)
	for r := range g.r {
		g.in("VLD1R.P 4(R13), [V%d.S4]", regX)
		for j := range g.p {
			g.in("ADD $%d, R14, R15", 64*j)
			g.in("VLD1 (R15), %s", list(regW))
			for h := range 4 {
				a := g.acc(r, j) + h
				g.in("VSCVTF V%d.S4, V%d.S4", a, a)
				g.in("VFMUL V%d.S4, V%d.S4, V%d.S4", regX, a, a)
				g.in("VFMUL V%d.S4, V%d.S4, V%d.S4", regW+h, a, a)
			}
		}
	}
}

// rows calls out for each row and panel with its accumulators and the
// register holding its output's address.
func (g *gen) rows(out func(acc int, y string)) {
	for r := range g.r {
		if r > 0 {
			g.in("ADD R10, R9, R9")
		}
		for j := range g.p {
			y := "R9"
			if j > 0 {
				y = "R12"
				g.in("ADD $%d, R9, R12", 64*j)
			}
			out(g.acc(r, j), y)
		}
	}
}

// maskSetup puts 0xffff0000 in every lane of V31: a pair's odd (high) half.
func maskSetup(f *emit.File) {
	f.I("MOVD $0xffff0000, R8")
	f.I("VDUP R8, V%d.S4", regMask)
}

// widen splits the four registers of bf16 pairs from w into their even
// halves (into lo…, shifted up: exact f32) and their odd halves (in place,
// masked).
func widen(f *emit.File, w, lo int) {
	for h := range 4 {
		f.I("VSHL $16, V%d.S4, V%d.S4", w+h, lo+h)
	}
	for h := range 4 {
		f.I("VAND V%d.B16, V%d.B16, V%d.B16", regMask, w+h, w+h)
	}
}

// widenFunc writes widenPairsNEON(dst *float32, src *uint32, pairs int):
// each pair step of a panel becomes its even step, then its odd step.
func widenFunc(f *emit.File) {
	fmt.Fprintf(f, "\n// func widenPairsNEON(dst *float32, src *uint32, pairs int)\nTEXT ·widenPairsNEON(SB), NOSPLIT, $0-24\n")
	f.I("MOVD dst+0(FP), R0")
	f.I("MOVD src+8(FP), R1")
	f.I("MOVD pairs+16(FP), R2")
	maskSetup(f)
	f.Label("loop")
	f.I("VLD1.P 64(R1), %s", list(regW))
	widen(f, regW, regLo)
	f.I("VST1.P %s, 64(R0)", list(regLo))
	f.I("VST1.P %s, 64(R0)", list(regW))
	f.I("SUBS $1, R2, R2")
	f.I("BNE loop")
	f.I("RET")
}

// kargs offsets (generic.go).
const offX, offW, offPs, offKs, offY, offLdy, offAdd, offSx, offSw = 0, 8, 16, 24, 32, 40, 48, 56, 64

func main() {
	var s, d bytes.Buffer
	fmt.Fprintf(&s, "// Code generated by gen_neon.go; DO NOT EDIT.\n\n//go:build !purego\n\n#include \"textflag.h\"\n")
	fmt.Fprintf(&d, "// Code generated by gen_neon.go; DO NOT EDIT.\n\n//go:build !purego\n\npackage gemm\n")
	for _, f := range families {
		var table strings.Builder
		fmt.Fprintf(&table, "\n// %sKernels are the %s tile kernels by [rows][panels].\nvar %sKernels = [maxRows + 1][maxPanels + 1]kernel{\n", f.name, f.name, f.name)
		byRow := map[int][]string{}
		maxR := 0
		for _, t := range f.tiles {
			g := &gen{f: f, r: t[0], p: t[1]}
			g.kernel()
			s.Write(g.buf.Bytes())
			fmt.Fprintf(&d, "\n//go:noescape\nfunc %s(a *kargs)\n", g.name())
			byRow[t[0]] = append(byRow[t[0]], fmt.Sprintf("%d: %s", t[1], g.name()))
			maxR = max(maxR, t[0])
		}
		for r := 1; r <= maxR; r++ {
			fmt.Fprintf(&table, "\t%d: {%s},\n", r, strings.Join(byRow[r], ", "))
		}
		table.WriteString("}\n")
		d.WriteString(table.String())
	}
	var w emit.File
	widenFunc(&w)
	s.Write(w.Bytes())
	fmt.Fprintf(&d, "\n//go:noescape\nfunc widenPairsNEON(dst *float32, src *uint32, pairs int)\n")
	src, err := format.Source(d.Bytes())
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile("kernels_arm64.s", s.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile("kernels_arm64.go", src, 0o644); err != nil {
		log.Fatal(err)
	}
}
