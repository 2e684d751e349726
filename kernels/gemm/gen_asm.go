//go:build ignore

// gen_asm writes kernels_amd64.s and kernels_amd64.go: one tile kernel per
// (family, rows R, panels P). Run it with `go generate` in this directory.
//
// Every kernel keeps R×P accumulators (one vector of 16 channels per row and
// panel; two ymm halves on AVX2) and walks the K steps once, in order, so
// each output's arithmetic is the same sequence whatever tile computes it.
package main

import (
	"bytes"
	"cmp"
	"fmt"
	"go/format"
	"log"
	"os"
	"strings"

	"github.com/ellm-dev/ellm/kernels/internal/asmgen/emit"
)

type family struct {
	name  string
	wide  bool // zmm (else ymm halves)
	xstep int  // activation bytes per K step
	body  func(g *gen)
	tiles [][2]int // R, P
	// codedRows, if not 0, asks for coded kernels (codedLoop) of four
	// panels and 1 to codedRows rows: the decode products of a weight with
	// a coded copy (coded.go) on the family's path; taller ones read the
	// pairs.
	codedRows int
	// inRegs, if set, makes the coded kernels restore a step into
	// registers a pair of K rows at a time (codedRegLoop) and multiply
	// them with this, the body's instruction a row and panel vector.
	inRegs func(g *gen, w, x, acc int)
}

func tiles(maxR4P4 bool, rows int, extra ...[2]int) [][2]int {
	var t [][2]int
	for r := 1; r <= rows; r++ {
		t = append(t, [2]int{r, 1})
		if rows == 8 {
			t = append(t, [2]int{r, 2})
			if r <= 4 && maxR4P4 {
				t = append(t, [2]int{r, 4})
			}
		}
	}
	return append(t, extra...)
}

var families = []family{
	{"pairs512", true, 8, pairsF32, tiles(true, 8), 4, nil},
	{"f32x512", true, 4, singleF32, tiles(true, 8), 0, nil},
	// Restored into registers, a coded weight in L2 took two thirds of the
	// time it took restored through the buffer, on an AMD EPYC (Zen 5) VM
	// (docs/performance.md, "twenty-first pass"). Through the buffer, coded
	// kernels of four rows on VDPBF16PS were slower than the plain ones, and
	// of three no faster, on an Intel Xeon where it runs at half the FMA
	// rate ("The coded weights on AVX-512"); in registers and prefetching
	// into L1, on the Zen 5 three rows streamed 12-13 % and four 8-9 % ahead
	// of the pairs ("fortieth pass"), so a decode step of up to four
	// sequences reads the copy where the load keeps it.
	{"bf16x512", true, 4, dotBF16, tiles(true, 8), 4, vdpbf16ps},
	{"vnni512", true, 4, dotVNNI, tiles(true, 8), 0, nil},
	// Decode's one- and two-row products take the tiles of eight
	// accumulators (R1P4, R2P2): four chains of two dependent FMAs a step
	// left a step of one sequence at 72-78 % of the DRAM read rate and one
	// of two latency-bound (docs/performance.md, "Decode's products on AVX2,
	// eight chains").
	{"pairs256", false, 8, pairsF32, tiles(false, 4, [2]int{1, 2}, [2]int{1, 4}, [2]int{2, 2}), 0, nil},
	// Six rows: twelve accumulators keep more FMAs in flight than two ports
	// of 4-cycle latency need; the four-row pairs tiles (eight, with the
	// widening beside the FMAs) left prefill at two thirds of the FMA rate.
	// The avx2 path runs them over weights widened block by block.
	{"f32x256", false, 4, singleF32, tiles(false, 6, [2]int{1, 2}, [2]int{2, 2}), 0, nil},
	// Two rows of two panels: the logits screen of one sequence (two rows)
	// and int8 decode of two read two weight streams a core instead of one,
	// which took the screen's product from a median of 87 % of the DRAM
	// read rate to 95 % (docs/performance.md, "thirty-first pass").
	{"i8x256", false, 4, dotI8AVX2, tiles(false, 4, [2]int{1, 2}, [2]int{1, 4}, [2]int{2, 2}), 0, nil},
	// AVX-VNNI (ymm VPDPBUSD, VEX-encoded) for the avx2 path on CPUs that
	// have it: one instruction a row and 32 weight bytes where i8x256 takes
	// four, and no sign juggling, so twelve accumulators fit.
	{"vnni256", false, 4, dotVNNI256, tiles(false, 6, [2]int{1, 2}, [2]int{2, 2}, [2]int{1, 4}), 0, nil},
}

type gen struct {
	f    family
	r, p int
	// coded kernels multiply from the restore buffer of a coded weight
	// (coded_amd64.h) instead of the panels.
	coded bool
	// intoL1: a coded kernel that restores into registers prefetches the
	// coded blocks into L1, not L2 (prefetchCoded).
	intoL1 bool
	buf    emit.File
}

func (g *gen) in(format string, args ...any) { g.buf.I(format, args...) }

// halves is the number of vector registers per panel of 16 channels.
func (g *gen) halves() int {
	if g.f.wide {
		return 1
	}
	return 2
}

func (g *gen) v(n int) string {
	if g.f.wide {
		return fmt.Sprintf("Z%d", n)
	}
	return fmt.Sprintf("Y%d", n)
}

// acc is the accumulator of row r, panel j, half h.
func (g *gen) acc(r, j, h int) int { return (r*g.p+j)*g.halves() + h }

// top is the highest vector register; scratch registers count down from it.
func (g *gen) top() int {
	if g.f.wide {
		return 31
	}
	return 15
}

// reg hands out scratch register i (0 = top) and checks it does not collide
// with an accumulator, or in a coded kernel with the restore's table and
// mask (Z16, Z17), which live across the steps and leave 16 registers to
// the accumulators. (The restore's own scratch, Z18-Z22, is dead between
// restores, and the kernels' only constant, pairsF32's mask, is Z31.)
func (g *gen) reg(i int) int {
	n := g.top() - i
	if n < g.r*g.p*g.halves() || g.coded && (n < codedLive || g.r*g.p > 16) {
		log.Fatalf("%s R%dP%d: out of vector registers", g.f.name, g.r, g.p)
	}
	return n
}

// x is the address of row r's activations at byte off of the current step:
// a tile's activations are interleaved, step by step, so that the kernel
// reads one sequential stream (see Context.prepare).
func (g *gen) x(r, off int) string { return fmt.Sprintf("%d(SI)", r*g.f.xstep+off) }

var rowBase = []string{"SI", "DI", "R8"}

// y is the address of row r's output at byte off (rows 3 and 6 have their
// own base registers; others are base + 1 or 2 strides).
func y(r, off int) string {
	b := rowBase[r/3]
	if r%3 == 0 {
		return fmt.Sprintf("%d(%s)", off, b)
	}
	return fmt.Sprintf("%d(%s)(DX*%d)", off, b, r%3)
}

// panel is the address of panel j's current step at byte off: in a coded
// kernel, R8 walks the restore buffer, whose panels are a step's 1 KiB
// apart.
func (g *gen) panel(j, off int) string {
	if g.coded {
		return fmt.Sprintf("%d(R8)", j*codedPanelBytes+off)
	}
	b := []string{"BX", "R9"}[j/3]
	if j%3 == 0 {
		return fmt.Sprintf("%d(%s)", off, b)
	}
	return fmt.Sprintf("%d(%s)(R10*%d)", off, b, j%3)
}

// pairsF32: bf16 pairs widened exactly (lo = bits<<16, hi = bits&0xffff0000),
// then per output fma(x[2q], lo) before fma(x[2q+1], hi). Scratch: 0 = mask,
// 1, 2 = broadcast x[2q], x[2q+1], 3… = widened weights.
func pairsF32(g *gen) {
	mask, x0, x1 := g.reg(0), g.reg(1), g.reg(2)
	lo := func(slot int) int { return g.reg(3 + 2*slot) }
	hi := func(slot int) int { return g.reg(4 + 2*slot) }
	widen := func(v vector) {
		g.in("%s %s, %s", g.load(), g.panel(v.j, 32*v.h), g.v(hi(v.slot)))
		g.in("VPSLLD $16, %s, %s", g.v(hi(v.slot)), g.v(lo(v.slot)))
		g.in("%s %s, %s, %s", g.and(), g.v(mask), g.v(hi(v.slot)), g.v(hi(v.slot)))
	}
	bcast := func(r int) {
		g.in("VBROADCASTSS %s, %s", g.x(r, 0), g.v(x0))
		g.in("VBROADCASTSS %s, %s", g.x(r, 4), g.v(x1))
	}
	fma := func(w, x, acc int) { g.in("VFMADD231PS %s, %s, %s", g.v(w), g.v(x), g.v(acc)) }
	g.step(3, 2, widen, bcast, func(r int, vs []vector) {
		for _, v := range vs {
			fma(lo(v.slot), x0, g.acc(r, v.j, v.h))
		}
		for _, v := range vs {
			fma(hi(v.slot), x1, g.acc(r, v.j, v.h))
		}
	})
}

// vector is panel j's half h, loaded into scratch slot.
type vector struct{ j, h, slot int }

// step writes the body of a K step: load(v) loads a panel vector, bcast(r)
// broadcasts row r's activations, mul(r, vs) multiplies them with panel
// vectors vs into row r's accumulators. All panels are loaded first and
// each row broadcast once, unless fixed scratch registers, perSlot
// registers for each panel vector and the accumulators overflow the vector
// registers: decode's ymm tiles of eight accumulators (one row of four
// panels, two rows of two), which keep eight chains of dependent products
// in flight where four waited on their latency (docs/performance.md,
// "Decode's products on AVX2, eight chains"). Those load and multiply a
// panel at a time, each row broadcast again for it: the same operations per
// output.
func (g *gen) step(fixed, perSlot int, load func(v vector), bcast func(r int), mul func(r int, vs []vector)) {
	var all []vector
	g.each(func(j, h int) { all = append(all, vector{j, h, len(all)}) })
	if fixed+perSlot*len(all)+g.r*len(all) <= g.top()+1 {
		for _, v := range all {
			load(v)
		}
		for r := range g.r {
			bcast(r)
			mul(r, all)
		}
		return
	}
	if g.r == 1 {
		bcast(0)
	}
	for j := range g.p {
		var panel []vector
		for h := range g.halves() {
			panel = append(panel, vector{j, h, h})
			load(panel[h])
		}
		for r := range g.r {
			if g.r > 1 {
				bcast(r)
			}
			mul(r, panel)
		}
	}
}

// broadcastOp is the body of the kernels that load a K step's panel vectors
// (load; into registers wr…), then per row broadcast its activation (bcast,
// into register xr) and apply op(w, x, acc) with each panel vector: one
// instruction per row and vector.
func broadcastOp(g *gen, load, bcast string, xr, wr int, op func(w, x, acc int)) {
	x := g.reg(xr)
	w := func(slot int) int { return g.reg(wr + slot) }
	g.step(wr, 1, func(v vector) { g.in("%s %s, %s", load, g.panel(v.j, 32*v.h), g.v(w(v.slot))) },
		func(r int) { g.in("%s %s, %s", bcast, g.x(r, 0), g.v(x)) },
		func(r int, vs []vector) {
			for _, v := range vs {
				op(w(v.slot), x, g.acc(r, v.j, v.h))
			}
		})
}

// singleF32: f32 weights, one fma per K step.
func singleF32(g *gen) {
	broadcastOp(g, "VMOVUPS", "VBROADCASTSS", 0, 1, func(w, x, acc int) {
		g.in("VFMADD231PS %s, %s, %s", g.v(w), g.v(x), g.v(acc))
	})
}

// dotBF16: one VDPBF16PS per K pair on bf16 activation pairs.
func dotBF16(g *gen) {
	broadcastOp(g, "VMOVDQU32", "VPBROADCASTD", 1, 3, func(w, x, acc int) { vdpbf16ps(g, w, x, acc) })
}

func vdpbf16ps(g *gen, w, x, acc int) { g.in("VDPBF16PS_Z(%d, %d, %d)", w, x, acc) }

// dotVNNI: one VPDPBUSD per K quad, u8 activations × s8 weights.
func dotVNNI(g *gen) {
	broadcastOp(g, "VMOVDQU32", "VPBROADCASTD", 1, 3, func(w, x, acc int) {
		g.in("VPDPBUSD %s, %s, %s", g.v(w), g.v(x), g.v(acc))
	})
}

// dotI8AVX2: int8 without VNNI, exact: Σ q·w per lane from
// VPMADDUBSW(|w|, sign(q, w)) (|products| ≤ 127·127, so the int16 pair sums
// cannot saturate) and VPMADDWD by ones. The activations are stored as
// u = q+128; XOR 0x80 gives q back. Σ q·w is the VNNI kernel's Σ u·w − 128·Σw,
// so the epilogue skips the correction and the results are the same bits.
// Scratch: 0 = ones (int16), 1 = x, 2 = 0x80 bytes, 3 = product, 4… = w, |w|.
func dotI8AVX2(g *gen) {
	ones, x, m80, t := g.reg(0), g.reg(1), g.reg(2), g.reg(3)
	w := func(slot int) int { return g.reg(4 + 2*slot) }
	aw := func(slot int) int { return g.reg(5 + 2*slot) }
	load := func(v vector) {
		g.in("VMOVDQU %s, %s", g.panel(v.j, 32*v.h), g.v(w(v.slot)))
		g.in("VPABSB %s, %s", g.v(w(v.slot)), g.v(aw(v.slot)))
	}
	bcast := func(r int) {
		g.in("VPBROADCASTD %s, %s", g.x(r, 0), g.v(x))
		g.in("VPXOR %s, %s, %s", g.v(m80), g.v(x), g.v(x))
	}
	g.step(4, 2, load, bcast, func(r int, vs []vector) {
		for _, v := range vs {
			acc := g.v(g.acc(r, v.j, v.h))
			g.in("VPSIGNB %s, %s, %s", g.v(w(v.slot)), g.v(x), g.v(t))
			g.in("VPMADDUBSW %s, %s, %s", g.v(t), g.v(aw(v.slot)), g.v(t))
			g.in("VPMADDWD %s, %s, %s", g.v(ones), g.v(t), g.v(t))
			g.in("VPADDD %s, %s, %s", g.v(t), acc, acc)
		}
	})
}

// dotVNNI256 is dotVNNI on ymm halves, with the VEX encoding of AVX-VNNI
// (VPDPBUSD_Y): the Go assembler encodes VPDPBUSD on ymm registers as EVEX,
// which needs AVX512_VNNI and AVX512VL.
func dotVNNI256(g *gen) {
	broadcastOp(g, "VMOVDQU", "VPBROADCASTD", 0, 1, func(w, x, acc int) { g.in("VPDPBUSD_Y(%d, %d, %d)", w, x, acc) })
}

func (g *gen) each(f func(j, h int)) {
	for j := range g.p {
		for h := range g.halves() {
			f(j, h)
		}
	}
}

func (g *gen) load() string {
	if g.f.wide {
		return "VMOVDQU32"
	}
	return "VMOVDQU"
}

func (g *gen) and() string {
	if g.f.wide {
		return "VPANDD"
	}
	return "VPAND"
}

func (g *gen) name() string {
	if g.coded {
		return fmt.Sprintf("%sCoded%sR%d", g.f.name, g.level(), g.r)
	}
	return fmt.Sprintf("%sR%dP%d", g.f.name, g.r, g.p)
}

// level is "L1" for a coded kernel that prefetches into L1, else "" (the
// kernels that prefetch into L2 keep their names).
func (g *gen) level() string {
	if g.intoL1 {
		return "L1"
	}
	return ""
}

// The restore buffer of a coded kernel holds a step of amxSteps pairs of
// four panels, 64 bytes a pair of a panel (codedPanelBytes a panel, as the
// pairs advance a step); the restore keeps the vector registers from Z16 to
// below codedLive across the steps.
const (
	codedPanelBytes = 1024
	codedLive       = 18
)

// kargs offsets (generic.go).
const (
	offX, offW, offPs, offKs, offY, offLdy, offAdd, offSx, offSw, offWc = 0, 8, 16, 24, 32, 40, 48, 56, 64, 72
)

// prefetch is how far ahead (bytes) each weight panel is prefetched: the
// hardware prefetchers alone left the tiles 10-20 % slower inside a GEMM
// (weights from L2) than on L1-resident data.
const prefetch = 1024

// prefetch256 is prefetch for the ymm kernels: their tiles of a few rows (a
// decode step of two to four sequences) take a panel from DRAM as one
// stream at a time, and 1 KiB ahead left them at two thirds of the DRAM
// read rate; 4 KiB ahead streamed 7-15 % faster (docs/performance.md,
// "AVX2 alone"). The one-row tile of four panels (four streams) keeps as
// many bytes in flight at half the distance, which streamed at 0.93-1.02 of
// the zmm kernels' rate where 4 KiB gave 0.91-0.96 (docs/performance.md,
// "Decode's products on AVX2, eight chains").
const prefetch256 = 4096

// Tall tiles (prefill) also prefetch their activations actPrefetch bytes
// ahead: a long prompt's activations (M·K·2 bytes: 8 MiB for o_proj at
// 2048 tokens) do not stay in L2 between the chunks of panels that reuse
// them, and the broadcast loads then waited on L3 (or DRAM, where the VM's
// share of L3 does not hold them): 2 KiB ahead (64 steps of an 8-row tile)
// cut down_proj's time at 2048 rows by 12 % against 512 bytes
// (docs/performance.md).
const (
	actPrefetchRows = 5
	actPrefetch     = 2048
)

func (g *gen) kernel() {
	fmt.Fprintf(&g.buf, "\n// func %s(a *kargs)\nTEXT ·%s(SB), NOSPLIT, $0-8\n", g.name(), g.name())
	g.in("MOVQ a+0(FP), AX")
	g.in("MOVQ %d(AX), SI", offX)
	if g.coded {
		g.in("MOVQ kargs_amx(AX), DI")
		g.in("CODED_SETUP")
	} else {
		g.in("MOVQ %d(AX), BX", offW)
		g.in("MOVQ %d(AX), R10", offPs)
		g.in("MOVQ %d(AX), CX", offKs)
		if g.p > 3 {
			g.in("LEAQ (BX)(R10*2), R9")
			g.in("ADDQ R10, R9")
		}
		if g.aheadAtRun() { // DX: ahead, R11: panel 1's offset plus ahead
			g.in("MOVQ kargs_ahead(AX), DX")
			g.in("LEAQ (R10)(DX*1), R11")
		}
	}
	for r := range g.r {
		g.each(func(j, h int) {
			a := g.v(g.acc(r, j, h))
			if g.f.wide {
				g.in("VPXORD %s, %s, %s", a, a, a)
			} else {
				g.in("VXORPS %s, %s, %s", a, a, a)
			}
		})
	}
	if g.f.name == "pairs512" || g.f.name == "pairs256" {
		m := g.v(g.reg(0))
		if g.f.wide {
			g.in("VPTERNLOGD $0xff, %s, %s, %s", m, m, m)
		} else {
			g.in("VPCMPEQD %s, %s, %s", m, m, m)
		}
		g.in("VPSLLD $16, %s, %s", m, m)
	}
	if g.f.name == "i8x256" {
		ones, m80 := g.v(g.reg(0)), g.v(g.reg(2))
		g.in("VPCMPEQW %s, %s, %s", ones, ones, ones)
		g.in("VPSRLW $15, %s, %s", ones, ones) // int16 ones
		g.in("MOVL $0x80808080, R12")
		g.in("VMOVD R12, %s", strings.Replace(m80, "Y", "X", 1))
		g.in("VPBROADCASTD %s, %s", strings.Replace(m80, "Y", "X", 1), m80)
	}
	switch {
	case g.coded && g.f.inRegs != nil:
		g.codedRegLoop()
	case g.coded:
		g.codedLoop()
	default:
		g.loop()
	}

	// Epilogue: SI, DI, R8 address rows 0, 3, 6 of y.
	g.in("MOVQ %d(AX), SI", offY)
	g.in("MOVQ %d(AX), DX", offLdy)
	g.rowBases()
	if g.f.name == "vnni512" || g.f.name == "vnni256" || g.f.name == "i8x256" {
		// (f32(Σ - corr) · sx[row]) · sw[channel], as genQuads.
		g.in("MOVQ %d(AX), R11", offSx)
		g.in("MOVQ %d(AX), R12", offSw)
		g.in("MOVQ %d(AX), R13", offWc)
		sx := g.v(g.reg(1))
		for r := range g.r {
			g.in("VBROADCASTSS %d(R11), %s", 4*r, sx)
			g.each(func(j, h int) {
				a := g.v(g.acc(r, j, h))
				if g.f.name != "i8x256" {
					g.in("VPSUBD %d(R13), %s, %s", 64*j+32*h, a, a)
				}
				g.in("VCVTDQ2PS %s, %s", a, a)
				g.in("VMULPS %s, %s, %s", sx, a, a)
				g.in("VMULPS %d(R12), %s, %s", 64*j+32*h, a, a)
			})
		}
	}
	g.in("CMPQ %d(AX), $0", offAdd)
	g.in("JNE add")
	for r := range g.r {
		g.each(func(j, h int) { g.in("VMOVUPS %s, %s", g.v(g.acc(r, j, h)), y(r, 64*j+32*h)) })
	}
	g.in("VZEROUPPER")
	g.in("RET")
	fmt.Fprintf(&g.buf, "add:\n")
	for r := range g.r {
		g.each(func(j, h int) {
			a := g.v(g.acc(r, j, h))
			g.in("VADDPS %s, %s, %s", y(r, 64*j+32*h), a, a)
			g.in("VMOVUPS %s, %s", a, y(r, 64*j+32*h))
		})
	}
	g.in("VZEROUPPER")
	g.in("RET")
}

// aheadAtRun reports whether the kernel prefetches its panels as far ahead
// as the call says (kargs.ahead, DX), not a constant: vnni512's tiles of
// more than four rows, which are both prefill's (weights from L2) and the
// logits screen's of a decode step (from DRAM; gemm.go, farPrefetch). The
// loop adds nothing a step for it: the tall tiles are issue-bound in
// prefill, where an ADDQ a step cost 1-4 %.
func (g *gen) aheadAtRun() bool { return g.f.name == "vnni512" && g.r > 4 && !g.coded && g.p <= 2 }

// prefetch is how far ahead the family's kernels prefetch their panels.
func (g *gen) prefetch() int {
	switch {
	case g.f.wide:
		return prefetch
	case g.p == 4:
		return prefetch256 / 2
	}
	return prefetch256
}

// loop walks the panels' K steps, prefetching them.
func (g *gen) loop() {
	fmt.Fprintf(&g.buf, "loop:\n")
	for j := range g.p {
		if g.aheadAtRun() {
			g.in("PREFETCHT0 (BX)(%s*1)", []string{"DX", "R11"}[j])
			continue
		}
		g.in("PREFETCHT0 %s", g.panel(j, g.prefetch()))
	}
	if g.r >= actPrefetchRows {
		g.in("PREFETCHT0 %d(SI)", actPrefetch)
	}
	g.f.body(g)
	g.in("ADDQ $%d, SI", g.r*g.f.xstep)
	g.in("ADDQ $64, BX")
	if g.p > 3 {
		g.in("ADDQ $64, R9")
	}
	g.in("DECQ CX")
	g.in("JNZ loop")
}

// codedLoop restores each step of amxSteps K pairs (which prefetches the next
// one's coded bytes) into one half of the buffer, and then walks the step
// before it in the other half with the family's body, in order: the same
// bits as loop. The loads of a step then find its stores in L1 rather than
// in the store buffer, where a 64-byte load cannot take two 32-byte stores'
// bytes. AX (the kargs) is reloaded after.
func (g *gen) codedLoop() {
	fmt.Fprintf(&g.buf, "step:\n")
	g.in("RESTORE_STEP")
	g.in("XORQ $const_amxRestoreBytes, R14")
	g.in("CMPQ R13, $%d", codedPanelBytes)
	g.in("JEQ next") // the first step: nothing restored before it
	g.codedSteps("pair")
	fmt.Fprintf(&g.buf, "next:\n")
	g.in("DECQ CX")
	g.in("JNZ step")
	g.in("XORQ $const_amxRestoreBytes, R14")
	g.codedSteps("last")
	g.in("MOVQ a+0(FP), AX")
}

// codedRegs are the registers of codedRegLoop: the tables of panels 0-3
// (panel 0's is the restore's, Z16), which live across the steps; per
// panel, the two rows of pairs an UNPACK_ROWS leaves (first, second) and
// the high bytes it looks up on the way (high); and the broadcast
// activation, Z30.
type codedRegs struct {
	lut                  [4]string
	first, second, high  func(j int) int
	tablesClobberedByRaw bool // the body of a raw step overwrites lut[1:]
}

const regX = 30

// codedRegsFor is the register map of a coded kernel of r rows of four
// panels. Up to 13 accumulators, the tables of panels 1-3 sit below Z16
// (Z13-Z15), where RESTORE_STEP and the body leave them alone, and each
// panel has three registers of its own from Z18 on. Sixteen (four rows)
// take Z0-Z15: the tables move to Z28, Z29 and Z31, which a raw step's body
// overwrites (they are copied again after it), and the panels share one
// register for the high bytes (Z26), which renaming makes as good as four.
func codedRegsFor(accs int) codedRegs {
	if accs <= 13 {
		return codedRegs{
			lut:    [4]string{"Z16", "Z13", "Z14", "Z15"},
			high:   func(j int) int { return 18 + 3*j },
			second: func(j int) int { return 19 + 3*j },
			first:  func(j int) int { return 20 + 3*j },
		}
	}
	return codedRegs{
		lut:                  [4]string{"Z16", "Z28", "Z29", "Z31"},
		high:                 func(int) int { return 26 },
		second:               func(j int) int { return 18 + 2*j },
		first:                func(j int) int { return 19 + 2*j },
		tablesClobberedByRaw: true,
	}
}

// codedRegLoop restores each step's four blocks a pair of K rows at a time
// into registers (UNPACK_ROWS, with each panel's escape in its own table)
// and multiplies them there, in the order loop does: the same bits. Each
// step prefetches the coded bytes two on. A step with a raw block goes
// the buffer's way instead: RESTORE_STEP, then the body over the buffer.
// AX (the kargs) is reloaded after.
func (g *gen) codedRegLoop() {
	if g.r*g.p > 16 {
		log.Fatalf("%s: out of vector registers", g.name())
	}
	regs := codedRegsFor(g.r * g.p)
	coded := [4]string{"BX", "R11", "R12", "R9"}
	copyTables := func() {
		for _, l := range regs.lut[1:] {
			g.in("VMOVDQU64 Z16, %s", l)
		}
	}
	copyTables()
	fmt.Fprintf(&g.buf, "step:\n")
	g.in("MOVL (DX), AX")
	g.in("TESTL AX, AX")
	g.in("JNZ raw")
	g.in("MOVQ amxTile_escOff(DI), R15")
	for j := range coded {
		g.in("ESCAPE(%d, %s)", j, regs.lut[j])
	}
	for q := range 8 {
		g.prefetchCoded(q, coded)
		for j, c := range coded {
			g.in("UNPACK_ROWS(%s, %d, %d, %s, Z%d, Z%d, Z%d, Z%d)", c, 64*q, 512+32*q, regs.lut[j], regs.high(j), regs.second(j), regs.first(j), regs.second(j))
		}
		for e, row := range [2]func(int) int{regs.first, regs.second} {
			for r := range g.r {
				g.in("VPBROADCASTD %s, Z%d", g.x(r, (2*q+e)*g.r*g.f.xstep), regX)
				for j := range coded {
					g.f.inRegs(g, row(j), regX, g.acc(r, j, 0))
				}
			}
		}
	}
	for _, c := range coded {
		g.in("ADDQ $const_codedBlock, %s", c)
	}
	g.in("ADDQ amxTile_panels(DI), DX")
	g.in("ADDQ $%d, R13", codedPanelBytes)
	g.in("ADDQ $%d, SI", 16*g.r*g.f.xstep)
	fmt.Fprintf(&g.buf, "next:\n")
	g.in("DECQ CX")
	g.in("JNZ step")
	g.in("MOVQ a+0(FP), AX")
	g.in("JMP done")
	fmt.Fprintf(&g.buf, "raw:\n")
	g.in("RESTORE_STEP")
	g.codedSteps("rawk")
	if regs.tablesClobberedByRaw {
		copyTables()
	}
	g.in("JMP next")
	fmt.Fprintf(&g.buf, "done:\n")
}

// codedBlockBytes is coded.go's codedBlock: a panel's coded bytes a step.
const codedBlockBytes = 768

// prefetchCoded prefetches, with the q-th pair of K rows of a step, two of
// the twelve lines each panel's block two steps on holds: spread over the
// step's first six pairs, not all 48 at its start, a core of an AMD EPYC
// Zen 4 streamed 17.4-20.9 GB/s of coded bytes from DRAM (median 19.5)
// instead of 17.2-18.7 (18.3), and two cores 28.5-31.6 instead of
// 27.8-29.9 (six rounds alternating; docs/performance.md, "thirty-eighth
// pass"). Into L2 (PREFETCHT1, as PREFETCH_CODED, coded_amd64.h) where the
// Zen 4 lost with all 48 into L1 at a step's start; into L1 (PREFETCHT0) the
// same spread read a quarter more bytes a second on an AMD EPYC Zen 5, whose
// L2 prefetches left each core at ~27 GB/s of coded bytes where the pairs
// stream 34 (fortieth pass). Which one a machine gets is measured when a
// model loads (TimeCoded), so each family with register kernels has both.
func (g *gen) prefetchCoded(q int, coded [4]string) {
	ins := "PREFETCHT1"
	if g.intoL1 {
		ins = "PREFETCHT0"
	}
	for l := 2 * q; l < min(2*q+2, codedBlockBytes/64); l++ {
		for _, c := range coded {
			g.in("%s %d(%s)", ins, 2*codedBlockBytes+64*l, c)
		}
	}
}

// codedSteps multiplies the step restored at R14.
func (g *gen) codedSteps(label string) {
	g.in("MOVQ R14, R8")
	g.in("MOVQ $const_amxSteps, R10")
	fmt.Fprintf(&g.buf, "%s:\n", label)
	g.f.body(g)
	g.in("ADDQ $%d, SI", g.r*g.f.xstep)
	g.in("ADDQ $64, R8")
	g.in("DECQ R10")
	g.in("JNZ %s", label)
}

// rowBases sets DI = SI + 3·DX and R8 = SI + 6·DX when the tile has those rows.
func (g *gen) rowBases() {
	if g.r > 3 {
		g.in("LEAQ (SI)(DX*2), DI")
		g.in("ADDQ DX, DI")
	}
	if g.r > 6 {
		g.in("LEAQ (DI)(DX*2), R8")
		g.in("ADDQ DX, R8")
	}
}

// codedKernels writes family f's coded kernels of 1 to f.codedRows rows
// that prefetch into L1 (intoL1) or L2: their code to s, their declarations
// to d and their table to table.
func codedKernels(f family, intoL1 bool, s, d *bytes.Buffer, table *strings.Builder) {
	level := (&gen{intoL1: intoL1}).level()
	where, name := cmp.Or(level, "L2"), f.name+"Coded"+level+"Kernels"
	fmt.Fprintf(table, "\n// %s are the %s kernels of a coded weight by rows (four panels), prefetching into %s.\nvar %s = [maxRows + 1]kernel{\n",
		name, f.name, where, name)
	for r := 1; r <= f.codedRows; r++ {
		g := &gen{f: f, r: r, p: 4, coded: true, intoL1: intoL1}
		g.kernel()
		s.Write(g.buf.Bytes())
		fmt.Fprintf(d, "\n//go:noescape\nfunc %s(a *kargs)\n", g.name())
		fmt.Fprintf(table, "\t%d: %s,\n", r, g.name())
	}
	table.WriteString("}\n")
}

func main() {
	var s, d bytes.Buffer
	fmt.Fprintf(&s, "// Code generated by gen_asm.go; DO NOT EDIT.\n\n//go:build !purego\n\n#include \"textflag.h\"\n#include \"bf16_amd64.h\"\n#include \"go_asm.h\"\n#include \"coded_amd64.h\"\n#include \"vnni256_amd64.h\"\n")
	fmt.Fprintf(&d, "// Code generated by gen_asm.go; DO NOT EDIT.\n\n//go:build !purego\n\npackage gemm\n")
	for _, f := range families {
		var table strings.Builder
		fmt.Fprintf(&table, "\n// %sKernels are the %s tile kernels by [rows][panels].\nvar %sKernels = [maxRows + 1][maxPanels + 1]kernel{\n", f.name, f.name, f.name)
		for _, t := range f.tiles {
			g := &gen{f: f, r: t[0], p: t[1]}
			g.kernel()
			// Labels are local to a TEXT block in Go asm.
			s.Write(g.buf.Bytes())
			fmt.Fprintf(&d, "\n//go:noescape\nfunc %s(a *kargs)\n", g.name())
		}
		for r := 1; r <= 8; r++ {
			var row []string
			for _, t := range f.tiles {
				if t[0] == r {
					row = append(row, fmt.Sprintf("%d: %sR%dP%d", t[1], f.name, r, t[1]))
				}
			}
			if row != nil {
				fmt.Fprintf(&table, "\t%d: {%s},\n", r, strings.Join(row, ", "))
			}
		}
		table.WriteString("}\n")
		if f.codedRows > 0 {
			codedKernels(f, false, &s, &d, &table)
			if f.inRegs != nil {
				codedKernels(f, true, &s, &d, &table)
			}
		}
		d.WriteString(table.String())
	}
	src, err := format.Source(d.Bytes())
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile("kernels_amd64.s", s.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile("kernels_amd64.go", src, 0o644); err != nil {
		log.Fatal(err)
	}
}
