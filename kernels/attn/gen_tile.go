//go:build ignore

// gen_tile writes tile_gen_amd64.s: the tile kernels, the single-query
// ones (AVX-512, AVX2), and the group kernels, which run two or four
// queries of a GQA group over one tile of K/V: AVX2's over a widened tile
// or a bf16 cache in place, AVX-512's for each way the tile is read
// (widened f32 tile, bf16 cache in place, int8 cache in place). Run it with `go generate` in this
// directory.
//
// Per query every kernel computes exactly tileAVX512's operations (the score
// as one 16-lane FMA chain over head_dim folded by the fixed tree (i, i+8),
// (i, i+4), (i, i+2), (i, i+1); the exponential of kernels/ops; the V
// accumulation one FMA per position in order), so all of them give the same
// bits; only which register holds which chain differs between them.
package main

import (
	"fmt"
	"log"

	"github.com/ellm-dev/ellm/kernels/internal/asmgen/emit"
)

// source is how a kernel reads K and V.
type source int

const (
	srcF32  source = iota // widened tile: K chunk-major [hd/16][Tile][16], V rows of f32
	srcBF16               // bf16 cache rows read in place, widened per load
	srcI8                 // int8 cache rows and per-row scales read in place
)

type kernel struct {
	name, prefix string
	queries      int // 2 or 4
	src          source
	// prefill: the score loop unrolled for head_dim 128 and the queries'
	// corrections computed in one exponential (the widened-tile kernels,
	// which prefill runs; decode's in-place ones wait on memory instead).
	prefill bool
	// dot: ModeBF16 (tileBF16Go): scores by VDPBF16PS on the queries' high
	// then low bf16 rows (scale folded in; the low row head_dim·2 bytes after
	// the high one), the probabilities rounded to bf16 pairs in s, and the V
	// sum by VDPBF16PS over position pairs, V rows interleaved in
	// registers. K and V are bf16 cache rows read in place.
	dot bool
	// vpairs: V is a pair-interleaved tile (pairV: row j of hd dwords is
	// positions 2j, 2j+1, zero-padded), which prefill writes once per tile.
	vpairs bool
}

var kernels = []kernel{
	{"tile4AVX512", "t4", 4, srcF32, true, false, false},
	{"tile2AVX512", "t2", 2, srcF32, true, false, false},
	{"tile2BF16AVX512", "d2", 2, srcBF16, false, false, false},
	{"tile4BF16AVX512", "q4", 4, srcBF16, false, false, false},
	{"tile2I8AVX512", "id2", 2, srcI8, false, false, false},
	{"tile4I8AVX512", "iq4", 4, srcI8, false, false, false},
	{"tile2DotAVX512", "e2", 2, srcBF16, false, true, false},
	{"tile4DotAVX512", "e4", 4, srcBF16, false, true, false},
	{"tile2DotPairsAVX512", "p2", 2, srcBF16, false, true, true},
	{"tile4DotPairsAVX512", "p4", 4, srcBF16, false, true, true},
}

type gen struct {
	emit.File
	kernel
}

func (g *gen) label(l string) { g.Label(g.prefix + l) }

// vLoop opens the loop over the accumulators' columns: BX their byte
// offset from 0 to the row's bytes in R14, on to v16 when fewer than wide
// columns remain.
func (g *gen) vLoop(wide int) {
	g.I("XORQ BX, BX")
	g.label("v")
	g.I("MOVQ R14, R12")
	g.I("SUBQ BX, R12")
	g.I("CMPQ R12, $%d", 4*wide)
	g.I("JLT  %sv16", g.prefix)
}

// vLoopEnd closes vLoop's loop at vnext, after which the kernel returns.
func (g *gen) vLoopEnd() {
	g.label("vnext")
	g.I("CMPQ BX, R14")
	g.I("JLT  %sv", g.prefix)
	g.I("VZEROUPPER")
	g.I("RET")
}

// kb is the number of keys per score block: queries × kb = 16 accumulators.
func (g *gen) kb() int { return 16 / g.queries }

// arg is the frame offset of an argument: int8 kernels have the two scale
// pointers after v.
func (g *gen) arg(name string) string {
	off := map[string]int{"qs": 0, "k": 8, "v": 16, "ks": 24, "vs": 32, "n": 24, "hd": 32, "scale": 40}[name]
	if g.src == srcI8 && (name == "n" || name == "hd" || name == "scale") {
		off += 16
	}
	return fmt.Sprintf("%s+%d(FP)", name, off)
}

// qref field offsets (dispatch_amd64.go): {ml, acc, q, s *float32; corr float32}, 40 bytes.
func qref(i int, field string) int {
	return 40*i + map[string]int{"ml": 0, "acc": 8, "q": 16, "s": 24, "corr": 32}[field]
}

// widen turns the loaded K or V vectors in regs into f32: bf16 by a shift,
// int8 by conversion and a multiplication by the row's scale (scale(j) is
// its operand for regs[j]).
func (g *gen) widen(regs []int, scale func(j int) string) {
	switch g.src {
	case srcBF16:
		for _, r := range regs {
			g.I("VPSLLD $16, Z%d, Z%d", r, r)
		}
	case srcI8:
		for _, r := range regs {
			g.I("VCVTDQ2PS Z%d, Z%d", r, r)
		}
		for j, r := range regs {
			g.I("VMULPS%s, Z%d, Z%d", scale(j), r, r)
		}
	}
}

// load is the instruction that loads 16 K or V values of the source.
func (g *gen) load() string {
	return [...]string{srcF32: "VMOVUPS", srcBF16: "VPMOVZXWD", srcI8: "VPMOVSXBD"}[g.src]
}

// elem is the bytes of one cached value.
func (g *gen) elem() int { return [...]int{srcF32: 4, srcBF16: 2, srcI8: 1}[g.src] }

func (g *gen) generate() {
	frame := map[bool]int{false: 44, true: 60}[g.src == srcI8]
	if g.dot {
		frame = 40 // no scale: it is in the rounded queries
	}
	fmt.Fprintf(g, "\nTEXT ·%s(SB), NOSPLIT, $0-%d\n", g.name, frame)
	g.I("MOVQ %s, AX", g.arg("qs"))
	g.I("MOVQ %s, DX", g.arg("k"))
	g.I("MOVQ %s, SI", g.arg("v"))
	g.I("MOVQ %s, R13", g.arg("n"))
	g.I("MOVQ %s, R14", g.arg("hd"))
	if !g.dot {
		g.I("VBROADCASTSS %s, Z29", g.arg("scale"))
	}
	if g.src == srcI8 {
		g.Comment("the next tile's scales (64 of each) into L2")
		for _, s := range []string{"ks", "vs"} {
			g.I("MOVQ %s, R15", g.arg(s))
			for off := 256; off < 512; off += 64 {
				g.I("PREFETCHT1 %d(R15)", off)
			}
		}
	}
	g.I("VMOVDQU32 keyperm<>(SB), Z28")
	g.I("VBROADCASTSS c_ninf<>(SB), Z30 // running max, lane %dq+j: query q, key ≡ j mod %d", g.kb(), g.kb())
	g.scores()
	g.softmax()
	if g.dot {
		g.valuesDot()
	} else {
		g.values()
	}
}

// oneExp says whether the kernel computes all queries' m' and e^(m−m')
// in one vector exponential (the kernels prefill runs: the widened-tile and
// the V-pairs ones) rather than one per query.
func (g *gen) oneExp() bool { return g.prefill || g.vpairs }

// chunkBytes is the bytes of one key's chunk per score step: 16 values,
// or 32 bf16 (one VDPBF16PS) for the dot kernels.
func (g *gen) chunkBytes() int {
	if g.dot {
		return 64
	}
	return 16 * g.elem()
}

// madd accumulates the product of vectors a (K or V) and b (query or
// probabilities) into acc: an FMA, or a VDPBF16PS of bf16 pairs.
func (g *gen) madd(a, b, acc int) {
	if g.dot {
		g.I("VDPBF16PS_Z(%d, %d, %d)", a, b, acc)
		return
	}
	g.I("VFMADD231PS Z%d, Z%d, Z%d", a, b, acc)
}

// scores computes the scaled scores of the tile into each query's s, in
// blocks of kb keys (accumulator q·kb+j: query q, key BX+j), and their
// running maxima in Z30.
func (g *gen) scores() {
	q, kb := g.queries, g.kb()
	g.I("")
	g.Comment("Scores in blocks of %d keys: Z(%dq+j) accumulates query q · key BX+j.", kb, kb)
	if g.inPlace() {
		g.Comment("R13 walks K ahead of the loads: each chunk step prefetches as many bytes")
		g.Comment("as it loads, so that the cache, which decode streams once, is read all")
		g.Comment("through the call (n is read from the frame).")
		if g.dot {
			g.I("IMUL3Q $%d, R14, R13    // 64 rows of head_dim values: the next tile", 64*g.elem())
			g.I("ADDQ DX, R13")
		} else {
			g.I("LEAQ %d(DX), R13", prefetchAhead)
		}
	}
	g.I("XORQ BX, BX")
	g.label("block")
	g.I("VPXORD Z0, Z0, Z0")
	for i := 1; i < 16; i++ {
		g.I("VMOVAPS Z0, Z%d", i)
	}
	qp := []string{"R8", "R9", "R10", "R11"}[:q]
	for i, r := range qp {
		g.I("MOVQ %d(AX), %s", qref(i, "q"), r)
	}
	// Key addressing: keys BX.. of the block, 16 dims per chunk step.
	var key func(j int) string
	var step string
	switch {
	case g.src == srcF32:
		g.I("MOVQ BX, R12")
		g.I("SHLQ $6, R12")
		g.I("ADDQ DX, R12")
		key = func(j int) string { return fmt.Sprintf("%d(R12)", 64*j) }
		step = "ADDQ $4096, R12"
	case q == 4:
		// DI = row stride S, R15 = 3S
		if g.src == srcI8 {
			g.I("MOVQ %s, R15     // the block's four key scales", g.arg("ks"))
			for j := range 4 {
				g.I("VBROADCASTSS %d(R15)(BX*4), Z%d", 4*j, 24+j)
			}
			g.I("MOVQ R14, DI            // row stride S in bytes")
		} else {
			g.I("LEAQ (R14)(R14*1), DI   // row stride S in bytes")
		}
		g.I("LEAQ (DI)(DI*2), R15    // 3S")
		g.I("MOVQ BX, R12")
		g.I("IMULQ DI, R12")
		g.I("ADDQ DX, R12            // key BX")
		key = func(j int) string { return []string{"(R12)", "(R12)(DI*1)", "(R12)(DI*2)", "(R12)(R15*1)"}[j] }
		step = fmt.Sprintf("ADDQ $%d, R12", g.chunkBytes())
	default:
		// R10 = S, R11 = 3S, DI = key BX+4
		if g.src == srcI8 {
			g.I("MOVQ R14, R10           // row stride S in bytes")
		} else {
			g.I("LEAQ (R14)(R14*1), R10  // row stride S in bytes")
		}
		g.I("LEAQ (R10)(R10*2), R11  // 3S")
		g.I("MOVQ BX, R12")
		g.I("IMULQ R10, R12")
		g.I("ADDQ DX, R12            // key BX")
		g.I("LEAQ (R12)(R10*4), DI   // key BX+4")
		if g.src == srcI8 {
			g.I("MOVQ %s, R15", g.arg("ks"))
			g.I("LEAQ (R15)(BX*4), R15   // scale of key BX")
		}
		key = func(j int) string {
			return []string{"(R12)", "(R12)(R10*1)", "(R12)(R10*2)", "(R12)(R11*1)",
				"(DI)", "(DI)(R10*1)", "(DI)(R10*2)", "(DI)(R11*1)"}[j]
		}
		step = fmt.Sprintf("ADDQ $%d, R12\n\tADDQ $%d, DI", g.chunkBytes(), g.chunkBytes())
	}
	chunk := func(c int) {
		for i, r := range qp {
			g.I("VMOVUPS %d(%s), Z%d", 64*c, r, 16+i)
		}
		for j := range kb {
			g.I("VMOVUPS %d(R12), Z%d", 4096*c+64*j, 20+j) // chunk-major f32 tile
		}
		for i := range q {
			for j := range kb {
				g.I("VFMADD231PS Z%d, Z%d, Z%d", 20+j, 16+i, i*kb+j)
			}
		}
	}
	// dotChunk is one step of the dot kernels' chunk loop below, at chunk
	// c's fixed offsets.
	dotChunk := func(c int) {
		for i, r := range qp {
			g.I("VMOVUPS %d(%s), Z%d", 64*c, r, 16+i)
			g.I("VMOVUPS %d(%s)(R14*2), Z%d // the low part", 64*c, r, g.qlo(i))
		}
		for j := range kb {
			g.I("VMOVDQU32 %d%s, Z%d", 64*c, key(j), 20+j)
		}
		g.scoreDots()
	}
	// The kernels prefill runs take head_dim 128 unrolled: 8 chunks of 16
	// f32, or (the dot kernels reading V pairs) 4 of 32 bf16.
	unrolled, steps := chunk, 8
	if g.vpairs {
		unrolled, steps = dotChunk, 4
	}
	if g.prefill || g.vpairs {
		g.I("CMPQ R14, $128")
		g.I("JNE  %sloop", g.prefix)
		for c := range steps {
			unrolled(c)
		}
		g.I("JMP  %sfold", g.prefix)
		g.label("loop")
	}
	g.I("MOVQ R14, CX")
	if g.dot {
		g.I("SHRQ $5, CX")
		g.I("JZ   %shalf", g.prefix)
	} else {
		g.I("SHRQ $4, CX")
	}
	g.label("chunk")
	for i, r := range qp {
		g.I("VMOVUPS (%s), Z%d", r, 16+i)
		if g.dot {
			g.I("VMOVUPS (%s)(R14*2), Z%d // the low part", r, g.qlo(i))
		}
	}
	if g.inPlace() {
		for off := 0; off < kb*g.chunkBytes(); off += 64 {
			g.I("%s %d(R13)", g.prefetch(), off)
		}
		g.I("ADDQ $%d, R13", kb*g.chunkBytes())
	}
	regs := make([]int, kb)
	for j := range kb {
		regs[j] = 20 + j
		if g.dot {
			g.I("VMOVDQU32 %s, Z%d", key(j), 20+j)
		} else {
			g.I("%s %s, Z%d", g.load(), key(j), 20+j)
		}
	}
	if !g.dot {
		g.widen(regs, func(j int) string {
			if q == 4 {
				return fmt.Sprintf(" Z%d", 24+j) // the block's scales, broadcast above
			}
			return fmt.Sprintf(".BCST %d(R15)", 4*j)
		})
	}
	g.scoreDots()
	for _, r := range qp {
		g.I("ADDQ $64, %s", r)
	}
	g.I("%s", step)
	g.I("DECQ CX")
	g.I("JNZ  %schunk", g.prefix)
	if g.dot {
		// head_dim an odd multiple of 16: the last 16 dims as 8 pairs, the
		// upper lanes zero (the ymm loads clear them)
		g.label("half")
		g.I("TESTQ $16, R14")
		g.I("JZ   %sfold", g.prefix)
		for i, r := range qp {
			g.I("VMOVDQU16 (%s), Y%d", r, 16+i)
			g.I("VMOVDQU16 (%s)(R14*2), Y%d", r, g.qlo(i))
		}
		for j := range kb {
			g.I("VMOVDQU16 %s, Y%d", key(j), 20+j)
		}
		g.scoreDots()
	}
	g.I("")
	if g.prefill || g.dot {
		g.label("fold")
	}
	fold(&g.File)
	g.I("VPERMPS Z0, Z28, Z0     // lane %dq+j: query q, key BX+j", kb)
	if !g.dot {
		g.I("VMULPS Z29, Z0, Z0")
	}
	for i := range q {
		g.I("MOVQ %d(AX), DI", qref(i, "s"))
		if q == 4 {
			g.I("VEXTRACTF32X4 $%d, Z0, (DI)(BX*4)", i)
		} else {
			g.I("VEXTRACTF32X8 $%d, Z0, (DI)(BX*4)", i)
		}
	}
	g.I("")
	// Only the block's keys below n count towards the maxima.
	n := "R13"
	if g.inPlace() {
		n = g.arg("n")
	}
	g.I("MOVQ %s, DI", n)
	g.I("SUBQ BX, DI")
	if q == 4 {
		g.I("MOVL $15, R15")
		g.I("BZHIL DI, R15, R15")
		g.I("IMUL3L $0x1111, R15, R15")
	} else {
		g.I("MOVL $0xff, R15")
		g.I("BZHIL DI, R15, R15")
		g.I("IMUL3L $0x101, R15, R15")
	}
	g.I("KMOVW R15, K1")
	g.I("VMAXPS Z0, Z30, K1, Z30")
	g.I("")
	g.I("ADDQ $%d, BX", kb)
	g.I("CMPQ BX, %s", n)
	g.I("JLT  %sblock", g.prefix)
	if g.inPlace() {
		g.I("MOVQ %s, R13", n)
	}
}

// inPlace says whether the kernel reads the cache in place, as decode does:
// those kernels prefetch K in the score loop and V in the value loop.
func (g *gen) inPlace() bool { return g.src != srcF32 && !g.vpairs }

// prefetchAhead is how far ahead of its loads an in-place f32-mode kernel
// prefetches the cache, into L1: 2 KiB (8 bf16 or 16 int8 rows of head_dim
// 128). The next tile (64 rows) into L2, which the dot kernels (ModeBF16)
// keep, measured the same in an earlier pass; on the Xeon with AMX it left
// the f32 kernels reading the cache at 69–84 % of the DRAM rate where 2 KiB
// ahead gives 81–95 %, while the dot kernels lost with it (65–69 % against
// 72–81 %); 1 KiB and 4 KiB ahead were each worse for one dtype
// (BenchmarkDecode/q16-slots1-ctx32768, docs/performance.md).
const prefetchAhead = 2048

// prefetch is the instruction that prefetches the cache ahead of the loads:
// into L1 (prefetchAhead on) in the f32 kernels, into L2 (a tile on) in the
// dot kernels.
func (g *gen) prefetch() string {
	if g.dot {
		return "PREFETCHT1"
	}
	return "PREFETCHT0"
}

// qlo is the register of query i's low part (dot kernels): free, as the
// int8 scales' registers are.
func (g *gen) qlo(i int) int {
	if g.queries == 4 {
		return 24 + i
	}
	return 18 + i
}

// scoreDots accumulates one chunk of the loaded keys (Z20..) times each
// query (Z16..): an FMA, or for the dot kernels VDPBF16PS with the high
// parts, then, after all of those, with the low parts.
func (g *gen) scoreDots() {
	for i := range g.queries {
		for j := range g.kb() {
			g.madd(20+j, 16+i, i*g.kb()+j)
		}
	}
	if g.dot {
		for i := range g.queries {
			for j := range g.kb() {
				g.madd(20+j, g.qlo(i), i*g.kb()+j)
			}
		}
	}
}

// fold reduces the 16 accumulators Z0..Z15 to their 16 scores in Z0 by the
// score tree; after it lane 4k+j holds accumulator k+4j (keyperm undoes that).
func fold(f *emit.File) {
	level := func(shuf string, lo, hi string, a, b int) {
		f.I("%s $%s, Z%d, Z%d, Z16", shuf, lo, b, a)
		f.I("%s $%s, Z%d, Z%d, Z17", shuf, hi, b, a)
		f.I("VADDPS Z17, Z16, Z%d", a)
	}
	for a := 0; a < 16; a += 2 { // lanes (i, i+8)
		level("VSHUFF32X4", "0x44", "0xEE", a, a+1)
	}
	for a := 0; a < 16; a += 4 { // (i, i+4) of 256-bit halves
		level("VSHUFF32X4", "0x88", "0xDD", a, a+2)
	}
	for a := 0; a < 16; a += 8 { // (i, i+2) inside 128-bit lanes
		level("VSHUFPS", "0x44", "0xEE", a, a+4)
	}
	level("VSHUFPS", "0x88", "0xDD", 0, 8) // (i, i+1)
}

// softmax turns each query's scores into probabilities (in place in s) as
// tileAVX512 does: new max m', correction e^(m−m') kept in the qref, l
// updated.
func (g *gen) softmax() {
	g.I("")
	if g.queries == 4 {
		g.Comment("Each query's tile max in every lane of its 128-bit lane.")
	} else {
		g.Comment("Each query's tile max in every lane of its 256-bit half.")
	}
	g.I("VPERMILPS $0xB1, Z30, Z31")
	g.I("VMAXPS Z31, Z30, Z30")
	g.I("VPERMILPS $0x4E, Z30, Z31")
	g.I("VMAXPS Z31, Z30, Z30")
	if g.queries == 2 {
		g.I("VSHUFF32X4 $0xB1, Z30, Z30, Z31")
		g.I("VMAXPS Z31, Z30, Z30")
	}
	g.I("")
	g.Comment("Per query, as tileAVX512: m', corr (kept in the qref), p, l.")
	// corr holds the current query's e^(m−m') in lane 0 in the loop below.
	corr := "X19"
	if g.oneExp() {
		// All queries' m' and corrections at once: the lanes of query q
		// (its 128-bit lane, or 256-bit half for two) get exactly the
		// scalar steps' values, with one exponential instead of one each.
		// Z22, Z23: m' and e^(m−m'), rotated to the next query's after each.
		corr = "X23"
		for i := range g.queries {
			g.I("MOVQ %d(AX), R15", qref(i, "ml"))
			switch {
			case i == 0:
				g.I("VBROADCASTSS (R15), Z21")
			case g.queries == 4:
				g.I("VBROADCASTSS (R15), X20")
				g.I("VINSERTF32X4 $%d, X20, Z21, Z21", i)
			default:
				g.I("VBROADCASTSS (R15), Y20")
				g.I("VINSERTF32X8 $%d, Y20, Z21, Z21", i)
			}
		}
		g.I("VMAXPS Z21, Z30, Z22     // m' = max(tile max, m)")
		g.I("VSUBPS Z22, Z21, Z23")
		g.Exp512("Z23", "Z0", "Z1", "Z2")
	}
	if g.oneExp() {
		g.Comment("BX: the masks of the keys below n of the tile's four blocks of 16, 16 bits each")
		g.I("XORQ BX, BX")
		g.I("MOVL $0xffff, R8")
		g.I("XORL R11, R11")
		for b := 3; b >= 0; b-- {
			g.I("MOVQ R13, R12")
			g.I("SUBQ $%d, R12", 16*b)
			g.I("CMOVQLT R11, R12")
			g.I("BZHIL R12, R8, R12")
			g.I("SHLQ $%d, R12", 16*b)
			g.I("ORQ R12, BX")
		}
	}
	g.I("MOVQ AX, R9")
	g.I("MOVQ $%d, R10", g.queries)
	g.label("q")
	g.I("MOVQ 0(R9), R15         // ml")
	if g.oneExp() {
		g.I("VMOVSS X22, (R15)")
		g.I("VBROADCASTSS X22, Z18")
	} else {
		g.I("VMOVAPS X30, X1")
		g.I("VMOVSS (R15), X3")
		g.I("VMAXSS X3, X1, X1")
		g.I("VMOVSS X1, (R15)")
		g.I("VSUBSS X1, X3, X3")
		g.I("VBROADCASTSS X1, Z18")
		g.I("VBROADCASTSS X3, Z19")
		g.Exp512("Z19", "Z0", "Z1", "Z2")
	}
	g.I("VMOVSS %s, %d(R9)", corr, qref(0, "corr"))
	g.I("MOVQ %d(R9), DI         // s", qref(0, "s"))
	g.I("VPXORD Z17, Z17, Z17")
	if g.oneExp() {
		g.blockProbs()
	} else {
		g.probLoop()
	}
	g.I("VEXTRACTF32X8 $1, Z17, Y1")
	g.I("VADDPS Y1, Y17, Y1")
	g.I("VEXTRACTF128 $1, Y1, X2")
	g.I("VADDPS X2, X1, X1")
	g.I("VMOVHLPS X1, X1, X2")
	g.I("VADDPS X2, X1, X1")
	g.I("VMOVSHDUP X1, X2")
	g.I("VADDSS X2, X1, X1")
	g.I("VMOVSS 4(R15), X2")
	g.I("VMULSS %s, X2, X2", corr)
	g.I("VADDSS X1, X2, X2")
	g.I("VMOVSS X2, 4(R15)")
	rot := map[int]string{4: "$0x39", 2: "$0x4E"}[g.queries] // the next query's lanes to lane 0
	if g.oneExp() {
		g.I("VSHUFF32X4 %s, Z22, Z22, Z22", rot)
		g.I("VSHUFF32X4 %s, Z23, Z23, Z23", rot)
	} else {
		g.I("VSHUFF32X4 %s, Z30, Z30, Z30", rot)
	}
	g.I("ADDQ $40, R9")
	g.I("DECQ R10")
	g.I("JNZ  %sq", g.prefix)
}

// blockProbs is probLoop for the kernels prefill runs, straight through the
// tile's four blocks of 16 (BX: their masks of the keys below n), the four
// exponentials interleaved: one query's probabilities are four long
// dependency chains, which the out-of-order window did not overlap when
// they came one per loop iteration.
func (g *gen) blockProbs() {
	var sets [][4]string
	for b := range 4 {
		g.I("VMOVUPS %d(DI), Z%d", 64*b, b)
		g.I("VSUBPS Z18, Z%d, Z%d", b, b)
		sets = append(sets, [4]string{emit.Z(b), emit.Z(4 + b), emit.Z(8 + b), emit.Z(12 + b)})
	}
	g.Exp512Sets(sets, []string{"K4", "K5", "K6", "K7"})
	for b := range 4 {
		g.I("MOVQ BX, R8")
		if b > 0 {
			g.I("SHRQ $%d, R8", 16*b)
		}
		g.I("KMOVW R8, K1")
		g.keepProbs(b, 24, fmt.Sprintf("%d(DI)", 32*b), fmt.Sprintf("%d(DI)", 64*b))
	}
}

// keepProbs adds the probabilities in Z(x) of the keys below n (K1) to the
// lane sums in Z17 and stores them: the dot kernels as bf16 words at
// words, zero from n (Z(tmp), Z(tmp+1) and K2 scratch), the others as f32
// at floats.
func (g *gen) keepProbs(x, tmp int, words, floats string) {
	g.I("VADDPS Z%d, Z17, K1, Z17", x)
	if !g.dot {
		g.I("VMOVUPS Z%d, %s", x, floats)
		return
	}
	toBF16(&g.File, x, tmp, tmp+1)
	g.I("VPMOVDW.Z Z%d, K1, Y%d", tmp+1, tmp+1)
	g.I("VMOVDQU32 Y%d, %s", tmp+1, words)
}

// probLoop turns the scores in s (DI) into probabilities, 16 at a time up
// to n: p = e^(s − m') (m' in Z18), their lane sums (keys below n) added to
// Z17, and p stored in place (the dot kernels: as bf16 words, zero from n).
func (g *gen) probLoop() {
	g.I("XORQ R11, R11")
	g.label("exp")
	g.I("VMOVUPS (DI)(R11*4), Z3")
	g.I("VSUBPS Z18, Z3, Z3")
	g.Exp512("Z3", "Z0", "Z1", "Z2")
	g.I("MOVQ R13, R12")
	g.I("SUBQ R11, R12")
	g.I("MOVL $0xffff, R8")
	g.I("BZHIL R12, R8, R8")
	g.I("KMOVW R8, K1")
	// The dot kernels' words go over the scores already read: word t of s
	// is p_t, dword j the pair (p_2j, p_2j+1).
	g.keepProbs(3, 4, "(DI)(R11*2)", "(DI)(R11*4)")
	g.I("ADDQ $16, R11")
	g.I("CMPQ R11, R13")
	g.I("JLT  %sexp", g.prefix)
}

// values computes acc = acc·corr + Σ_t p_t·v_t: four queries × 64 dims or
// two × 128 per pass (16 accumulators), then 16 dims at a time.
func (g *gen) values() {
	q := g.queries
	wide := 64 * 4 / q // dims per pass
	g.I("")
	g.Comment("acc = acc·corr + Σ_t p_t·v_t, %d (else 16) dims of each query at a time.", wide)
	sp := []string{"R8", "R9", "R10", "R11"}[:q]
	for i, r := range sp {
		g.I("MOVQ %d(AX), %s", qref(i, "s"), r)
	}
	corr := func(i int) int {
		if q == 4 {
			return 24 + i
		}
		return 28 + i
	}
	for i := range q {
		g.I("VBROADCASTSS %d(AX), Z%d", qref(i, "corr"), corr(i))
	}
	// stride: the V row stride register; bound: what CX (positions) is compared to.
	stride, bound := "R14", "R13"
	switch {
	case g.src == srcF32:
		g.I("SHLQ $2, R14            // row stride in bytes")
	case q == 4:
		stride = "R13"
		if g.src == srcBF16 {
			g.I("LEAQ (R14)(R14*1), R13  // bf16 row stride (n is kept in CX's bound below)")
			g.I("MOVQ %s, DX       // n; K base no longer needed", g.arg("n"))
			bound = "DX"
		} else {
			g.I("MOVQ R14, R13           // int8 row stride")
			g.I("MOVQ %s, DX      // V scales; K base no longer needed, n compared in memory", g.arg("vs"))
			bound = g.arg("n")
		}
		g.I("SHLQ $2, R14            // f32 row bytes: the acc offset bound")
	default:
		stride = "R10"
		if g.src == srcBF16 {
			g.I("LEAQ (R14)(R14*1), R10  // bf16 row stride")
		} else {
			g.I("MOVQ R14, R10           // int8 row stride")
		}
		g.I("SHLQ $2, R14")
	}
	// vscale is where the int8 V scales are (DX with four queries, else
	// DI), sreg the register a row's scale is broadcast to.
	vscale, sreg := "DX", 28
	if q == 2 {
		vscale, sreg = "DI", 18
	}
	vbase := func() {
		if g.src == srcF32 {
			g.I("LEAQ (SI)(BX*1), R12")
			return
		}
		g.I("MOVQ BX, R12")
		g.I("SHRQ $%d, R12", map[source]int{srcBF16: 1, srcI8: 2}[g.src])
		g.I("ADDQ SI, R12")
	}
	g.vLoop(wide)
	acc := func(i, c int) int { return i*4 + c } // four queries: query i, chunk c
	if q == 2 {
		acc = func(i, c int) int { return i*8 + c }
	}
	accs := func(op string) {
		for half := 0; half < wide/64; half++ {
			if half == 1 {
				g.I("ADDQ $256, BX")
			}
			for i := range q {
				g.I("MOVQ %d(AX), DI", qref(i, "acc"))
				for c := range 4 {
					a := acc(i, 4*half+c)
					if op == "load" {
						g.I("VMULPS %d(DI)(BX*1), Z%d, Z%d", 64*c, corr(i), a)
					} else {
						g.I("VMOVUPS Z%d, %d(DI)(BX*1)", a, 64*c)
					}
				}
			}
		}
	}
	// Registers 16.. 16+q-1: broadcast probabilities; 20..: V vectors.
	accs("load")
	if wide == 128 {
		g.I("SUBQ $256, BX")
	}
	vbase()
	if g.src != srcF32 {
		// Fetch V's rows prefetchAhead bytes on meanwhile, as the score
		// loop did K's.
		rowBytes := wide * g.elem() // bytes of the pass's dims in one row
		next := "R15"
		if q == 2 {
			next = "R11"
			if g.src == srcI8 {
				g.I("MOVQ %s, DI", g.arg("vs"))
			}
		}
		g.I("MOVQ $%d, %s", prefetchAhead, next)
		g.I("XORQ CX, CX")
		g.label(fmt.Sprintf("v%dt", wide))
		for off := 0; off < rowBytes; off += 64 {
			g.I("%s %d(R12)(%s*1)", g.prefetch(), off, next)
		}
	} else {
		g.I("XORQ CX, CX")
		g.label(fmt.Sprintf("v%dt", wide))
	}
	for i, r := range sp {
		g.I("VBROADCASTSS (%s)(CX*4), Z%d", r, 16+i)
	}
	nv := wide / 16
	regs := make([]int, nv)
	if g.src == srcI8 {
		g.I("VBROADCASTSS (%s)(CX*4), Z%d", vscale, sreg)
	}
	for c := range nv {
		regs[c] = 20 + c
		g.I("%s %d(R12), Z%d", g.load(), 16*g.elem()*c, 20+c)
	}
	g.widen(regs, func(int) string { return fmt.Sprintf(" Z%d", sreg) })
	for i := range q {
		for c := range nv {
			g.I("VFMADD231PS Z%d, Z%d, Z%d", 20+c, 16+i, acc(i, c))
		}
	}
	g.I("ADDQ %s, R12", stride)
	g.I("INCQ CX")
	g.I("CMPQ CX, %s", bound)
	g.I("JLT  %sv%dt", g.prefix, wide)
	accs("store")
	g.I("ADDQ $256, BX")
	g.I("JMP  %svnext", g.prefix)
	g.I("")

	g.label("v16")
	for i := range q {
		g.I("MOVQ %d(AX), DI", qref(i, "acc"))
		g.I("VMULPS (DI)(BX*1), Z%d, Z%d", corr(i), i)
	}
	vbase()
	if g.src == srcI8 && q == 2 {
		g.I("MOVQ %s, DI", g.arg("vs"))
	}
	g.I("XORQ CX, CX")
	g.label("v16t")
	for i, r := range sp {
		g.I("VBROADCASTSS (%s)(CX*4), Z%d", r, 16+i)
	}
	g.I("%s 0(R12), Z20", g.load())
	g.widen([]int{20}, func(int) string { return fmt.Sprintf(".BCST (%s)(CX*4)", vscale) })
	for i := range q {
		g.I("VFMADD231PS Z20, Z%d, Z%d", 16+i, i)
	}
	g.I("ADDQ %s, R12", stride)
	g.I("INCQ CX")
	g.I("CMPQ CX, %s", bound)
	g.I("JLT  %sv16t", g.prefix)
	for i := range q {
		g.I("MOVQ %d(AX), DI", qref(i, "acc"))
		g.I("VMOVUPS Z%d, (DI)(BX*1)", i)
	}
	g.I("ADDQ $64, BX")
	g.I("")
	g.vLoopEnd()
}

// valuesDot is values for the dot kernels: acc = acc·corr, then per
// position pair (2j, 2j+1) one VDPBF16PS of the probability pair (a dword
// of s) with the V pairs, which interleave rows 2j and 2j+1 (row 2j in the
// low halves: zero-extended; row 2j+1 zero-extended and shifted up); an odd
// n ends with row n−1 alone (its pair's high halves zero, as is the
// probability word after it). Four queries × 64 dims or two × 128 per pass
// (16 accumulators), then 16 dims at a time.
func (g *gen) valuesDot() {
	q := g.queries
	wide := 64 * 4 / q
	g.I("")
	g.Comment("acc = acc·corr + Σ_j (p_2j, p_2j+1)·(v_2j, v_2j+1), %d (else 16) dims of each query at a time.", wide)
	sp := []string{"R8", "R9", "R10", "R11"}[:q]
	for i, r := range sp {
		g.I("MOVQ %d(AX), %s", qref(i, "s"), r)
	}
	// stride: the bf16 row stride, next: 64 rows (the next tile's V rows)
	stride, next := "R13", "R15"
	if q == 2 {
		stride, next = "R10", "R11"
	}
	g.I("MOVQ %s, DX", g.arg("n"))
	if g.vpairs {
		g.I("LEAQ (R14*4), %s      // pair row stride", stride)
		g.I("INCQ DX")
		g.I("SHRQ $1, DX             // pairs, the last one zero-padded")
	} else {
		g.I("LEAQ (R14)(R14*1), %s  // bf16 row stride", stride)
		g.I("SHRQ $1, DX             // whole pairs")
	}
	g.I("SHLQ $2, R14            // f32 row bytes: the acc offset bound")
	g.vLoop(wide)
	pass := func(nv int, suffix string, prefetch bool) {
		acc := func(i, c int) int { return i*nv + c }
		for i := range q {
			g.I("MOVQ %d(AX), DI", qref(i, "acc"))
			for c := range nv {
				g.I("VMOVUPS %d(DI)(BX*1), Z%d", 64*c, acc(i, c))
				g.I("VMULPS.BCST %d(AX), Z%d, Z%d", qref(i, "corr"), acc(i, c), acc(i, c))
			}
		}
		if g.vpairs {
			g.I("LEAQ (SI)(BX*1), R12    // pair row 0 at the pass's dims")
		} else {
			g.I("MOVQ BX, R12")
			g.I("SHRQ $1, R12")
			g.I("ADDQ SI, R12            // row 0 of V at the pass's dims")
		}
		if prefetch && !g.vpairs {
			g.I("MOVQ %s, %s", stride, next)
			g.I("SHLQ $6, %s            // 64 rows: the next tile", next)
		}
		row := func() {
			if !prefetch {
				return
			}
			for off := 0; off < nv*32; off += 64 {
				g.I("%s %d(R12)(%s*1)", g.prefetch(), off, next)
			}
		}
		bcast := func() {
			for i, r := range sp {
				g.I("VPBROADCASTD (%s)(CX*4), Z%d", r, 16+i)
			}
		}
		dots := func() {
			for i := range q {
				for c := range nv {
					g.madd(20+c, 16+i, acc(i, c))
				}
			}
		}
		g.I("XORQ CX, CX")
		g.I("CMPQ CX, DX")
		g.I("JGE  %sv%stail", g.prefix, suffix)
		g.label(fmt.Sprintf("v%st", suffix))
		bcast()
		if g.vpairs {
			for c := range nv {
				g.I("VMOVDQU32 %d(R12), Z%d", 64*c, 20+c)
			}
			g.I("ADDQ %s, R12", stride)
		} else {
			row()
			for c := range nv {
				g.I("VPMOVZXWD %d(R12), Z%d", 32*c, 20+c)
			}
			g.I("ADDQ %s, R12", stride)
			row()
			for c := range nv {
				t := 30 + c%2
				g.I("VPMOVZXWD %d(R12), Z%d", 32*c, t)
				g.I("VPSLLD $16, Z%d, Z%d", t, t)
				g.I("VPORD Z%d, Z%d, Z%d", t, 20+c, 20+c)
			}
			g.I("ADDQ %s, R12", stride)
		}
		dots()
		g.I("INCQ CX")
		g.I("CMPQ CX, DX")
		g.I("JLT  %sv%st", g.prefix, suffix)
		g.label(fmt.Sprintf("v%stail", suffix))
		if !g.vpairs {
			g.I("TESTQ $1, %s", g.arg("n"))
			g.I("JZ   %sv%sstore", g.prefix, suffix)
			bcast()
			for c := range nv {
				g.I("VPMOVZXWD %d(R12), Z%d", 32*c, 20+c)
			}
			dots()
		}
		g.label(fmt.Sprintf("v%sstore", suffix))
		for i := range q {
			g.I("MOVQ %d(AX), DI", qref(i, "acc"))
			for c := range nv {
				g.I("VMOVUPS Z%d, %d(DI)(BX*1)", acc(i, c), 64*c)
			}
		}
		g.I("ADDQ $%d, BX", 64*nv)
	}
	pass(wide/16, fmt.Sprint(wide), true)
	g.I("JMP  %svnext", g.prefix)
	g.I("")
	g.label("v16")
	pass(1, "16", false)
	g.I("")
	g.vLoopEnd()
}

// toBF16 rounds the 16 f32 of Z(x) to bf16 as ops.F32ToBF16 does (nearest
// even, NaN quieted), each in the low half of its dword of Z(out); Z(tmp)
// and K2 are scratch.
func toBF16(f *emit.File, x, tmp, out int) {
	f.I("VPSRLD $16, Z%d, Z%d", x, tmp)
	f.I("VPANDD.BCST bf16one<>(SB), Z%d, Z%d", tmp, out)
	f.I("VPADDD Z%d, Z%d, Z%d", out, x, out)
	f.I("VPADDD.BCST bf16half<>(SB), Z%d, Z%d", out, out)
	f.I("VPSRLD $16, Z%d, Z%d", out, out)
	f.I("VCMPPS $3, Z%d, Z%d, K2   // NaN", x, x)
	f.I("VPORD.BCST bf16quiet<>(SB), Z%d, K2, Z%d", tmp, out)
}

// roundQ writes roundQueryAVX512(qb *uint16, q *float32, hd int, scale
// float32), roundQuery for hd % 16 == 0: x = q·scale, its bf16 high part,
// then the bf16 of x minus the high part widened back, each row stored
// as words.
func roundQ(f *emit.File) {
	fmt.Fprintf(f, "\n// func roundQueryAVX512(qb *uint16, q *float32, hd int, scale float32)\n")
	fmt.Fprintf(f, "TEXT ·roundQueryAVX512(SB), NOSPLIT, $0-28\n")
	for _, a := range []string{"qb+0(FP), DI", "q+8(FP), SI", "hd+16(FP), CX"} {
		f.I("MOVQ %s", a)
	}
	f.I("VBROADCASTSS scale+24(FP), Z1")
	f.I("LEAQ (DI)(CX*2), R8     // the low part's row")
	f.I("XORQ AX, AX")
	f.Label("rqloop")
	f.I("VMULPS (SI)(AX*4), Z1, Z3")
	toBF16(f, 3, 4, 5)
	f.I("VPMOVDW Z5, Y6")
	f.I("VMOVDQU Y6, (DI)(AX*2)")
	f.I("VPSLLD $16, Z5, Z5")
	f.I("VSUBPS Z5, Z3, Z3")
	toBF16(f, 3, 4, 5)
	f.I("VPMOVDW Z5, Y6")
	f.I("VMOVDQU Y6, (R8)(AX*2)")
	f.I("ADDQ $16, AX")
	f.I("CMPQ AX, CX")
	f.I("JLT  rqloop")
	f.I("VZEROUPPER")
	f.I("RET")
}

// pairV writes pairVAVX512(dst *uint32, src *uint16, n, hd int): the n
// bf16 rows of hd values (hd % 16 == 0) as (n+1)/2 rows of hd dwords, row j
// holding positions 2j (low half) and 2j+1 (high half, zero past n) of
// each dim, the V tile the pairs kernels read.
func pairV(f *emit.File) {
	fmt.Fprintf(f, "\n// func pairVAVX512(dst *uint32, src *uint16, n, hd int)\n")
	fmt.Fprintf(f, "TEXT ·pairVAVX512(SB), NOSPLIT, $0-32\n")
	for _, a := range []string{"dst+0(FP), DI", "src+8(FP), SI", "n+16(FP), CX", "hd+24(FP), DX"} {
		f.I("MOVQ %s", a)
	}
	f.I("LEAQ (DX)(DX*1), R8     // bf16 row stride")
	f.Label("pvpair")
	f.I("CMPQ CX, $2")
	f.I("JLT  pvlast")
	f.I("LEAQ (SI)(R8*1), R11    // row 2j+1")
	f.I("XORQ R10, R10")
	f.Label("pvchunk")
	f.I("VPMOVZXWD (SI)(R10*2), Z0")
	f.I("VPMOVZXWD (R11)(R10*2), Z1")
	f.I("VPSLLD $16, Z1, Z1")
	f.I("VPORD Z1, Z0, Z0")
	f.I("VMOVDQU32 Z0, (DI)(R10*4)")
	f.I("ADDQ $16, R10")
	f.I("CMPQ R10, DX")
	f.I("JLT  pvchunk")
	f.I("LEAQ (SI)(R8*2), SI")
	f.I("LEAQ (DI)(DX*4), DI")
	f.I("SUBQ $2, CX")
	f.I("JMP  pvpair")
	f.Label("pvlast")
	f.I("TESTQ CX, CX")
	f.I("JZ   pvdone")
	f.I("XORQ R10, R10")
	f.Label("pvone")
	f.I("VPMOVZXWD (SI)(R10*2), Z0")
	f.I("VMOVDQU32 Z0, (DI)(R10*4)")
	f.I("ADDQ $16, R10")
	f.I("CMPQ R10, DX")
	f.I("JLT  pvone")
	f.Label("pvdone")
	f.I("VZEROUPPER")
	f.I("RET")
}

// loadTileArgs loads the arguments the single-query kernels share:
// (ml, acc, q, k, v, s *float32, n, hd int) into AX, BX, CX, DX, SI, DI, R8, R9.
func loadTileArgs(f *emit.File) {
	for _, a := range []string{"ml+0(FP), AX", "acc+8(FP), BX", "q+16(FP), CX", "k+24(FP), DX", "v+32(FP), SI", "s+40(FP), DI", "n+48(FP), R8", "hd+56(FP), R9"} {
		f.I("MOVQ %s", a)
	}
}

// rescaleSum folds the lane sums in Y1 to one in the tree order and stores
// l' = l·corr + that sum at 4(ml), corr an X register.
func rescaleSum(f *emit.File, ml, corr string) {
	f.I("VEXTRACTF128 $1, Y1, X2")
	f.I("VADDPS X2, X1, X1")
	f.I("VMOVHLPS X1, X1, X2")
	f.I("VADDPS X2, X1, X1")
	f.I("VMOVSHDUP X1, X2")
	f.I("VADDSS X2, X1, X1")
	f.I("VMOVSS 4(%s), X2", ml)
	f.I("VMULSS %s, X2, X2", corr)
	f.I("VADDSS X1, X2, X2")
	f.I("VMOVSS X2, 4(%s)", ml)
}

// single writes tileAVX512: one query over the tile, the reference the
// group kernels are tested against. Scores in blocks of 16 keys (Z0..Z15
// accumulate key i over the head_dim chunks, K as the FMAs' memory operand),
// the same fold; V in passes of 128, 64 or 16 dims.
func single(f *emit.File) {
	fmt.Fprintf(f, "\n// func tileAVX512(ml, acc, q, k, v, s *float32, n, hd int, scale float32)\n//\n")
	fmt.Fprintf(f, "// Registers: AX ml, BX acc, CX q, DX k (chunk-major tile), SI v (rows),\n// DI s, R8 n, R9 hd.\n")
	fmt.Fprintf(f, "TEXT ·tileAVX512(SB), NOSPLIT, $0-68\n")
	loadTileArgs(f)
	f.I("VBROADCASTSS scale+64(FP), Z19")
	f.I("VMOVDQU32 keyperm<>(SB), Z18")
	f.I("VBROADCASTSS c_ninf<>(SB), Z20 // running max of valid scores")
	f.I("")
	f.Comment("Scores, 16 keys per block g: Z0..Z15 accumulate key i over the head_dim chunks.")
	f.I("XORQ R11, R11           // g·16: first key of the block")
	f.Label("scoreblock")
	f.I("VPXORD Z0, Z0, Z0")
	for i := 1; i < 16; i++ {
		f.I("VMOVAPS Z0, Z%d", i)
	}
	f.I("MOVQ R11, R12")
	f.I("SHLQ $6, R12")
	f.I("ADDQ DX, R12            // &k[chunk 0][key g·16]")
	f.I("MOVQ CX, R13            // &q[0]")
	f.I("MOVQ R9, R14")
	f.I("SHRQ $4, R14            // chunks")
	f.Label("scorechunk")
	f.I("VMOVUPS (R13), Z16")
	for j := range 16 {
		f.I("VFMADD231PS %d(R12), Z16, Z%d", 64*j, j)
	}
	f.I("ADDQ $64, R13")
	f.I("ADDQ $4096, R12")
	f.I("DECQ R14")
	f.I("JNZ  scorechunk")
	f.I("")
	fold(f)
	f.I("VPERMPS Z0, Z18, Z0")
	f.I("VMULPS Z19, Z0, Z0")
	f.I("VMOVUPS Z0, (DI)(R11*4)")
	f.I("")
	f.Comment("K1 = lanes of this block below n")
	f.I("MOVQ R8, R13")
	f.I("SUBQ R11, R13")
	f.I("MOVL $0xffff, R14")
	f.I("BZHIL R13, R14, R14")
	f.I("KMOVW R14, K1")
	f.I("VMAXPS Z0, Z20, K1, Z20")
	f.I("")
	f.I("ADDQ $16, R11")
	f.I("CMPQ R11, R8")
	f.I("JLT  scoreblock")
	f.I("")
	f.Comment("m' = max(m, max of the tile's scores)")
	f.I("VEXTRACTF32X8 $1, Z20, Y1")
	f.I("VMAXPS Y1, Y20, Y1")
	f.I("VEXTRACTF128 $1, Y1, X2")
	f.I("VMAXPS X2, X1, X1")
	f.I("VMOVHLPS X1, X1, X2")
	f.I("VMAXPS X2, X1, X1")
	f.I("VMOVSHDUP X1, X2")
	f.I("VMAXSS X2, X1, X1")
	f.I("VMOVSS (AX), X3         // m")
	f.I("VMAXSS X3, X1, X1       // m'")
	f.I("VMOVSS X1, (AX)")
	f.I("VSUBSS X1, X3, X3       // m − m'")
	f.I("VBROADCASTSS X1, Z18    // m' in every lane")
	f.I("VBROADCASTSS X3, Z19")
	f.I("")
	f.Exp512("Z19", "Z0", "Z1", "Z2") // corr = e^(m−m') in every lane
	f.I("")
	f.Comment("p = e^(s − m'), summed per lane over the blocks of valid keys")
	f.I("VPXORD Z17, Z17, Z17")
	f.I("XORQ R11, R11")
	f.Label("expblock")
	f.I("VMOVUPS (DI)(R11*4), Z3")
	f.I("VSUBPS Z18, Z3, Z3")
	f.Exp512("Z3", "Z0", "Z1", "Z2")
	f.I("VMOVUPS Z3, (DI)(R11*4)")
	f.I("MOVQ R8, R13")
	f.I("SUBQ R11, R13")
	f.I("MOVL $0xffff, R14")
	f.I("BZHIL R13, R14, R14")
	f.I("KMOVW R14, K1")
	f.I("VADDPS Z3, Z17, K1, Z17")
	f.I("ADDQ $16, R11")
	f.I("CMPQ R11, R8")
	f.I("JLT  expblock")
	f.I("")
	f.Comment("l' = l·corr + fold of the lane sums in the tree order")
	f.I("VEXTRACTF32X8 $1, Z17, Y1")
	f.I("VADDPS Y1, Y17, Y1")
	rescaleSum(f, "AX", "X19")
	f.I("")
	f.Comment("acc = acc·corr + Σ_t p_t·v_t, in blocks of 128, 64 or 16 dims.")
	f.I("MOVQ R9, R10")
	f.I("SHLQ $2, R10            // row stride in bytes")
	f.I("XORQ R11, R11           // byte offset of the dim block")
	f.Label("vblock")
	f.I("MOVQ R9, R12")
	f.I("SHLQ $2, R12")
	f.I("SUBQ R11, R12           // bytes left in the row")
	f.I("CMPQ R12, $512")
	f.I("JGE  v128")
	f.I("CMPQ R12, $256")
	f.I("JGE  v64")
	f.I("JMP  v16")
	valueBlocks(f, "v", "Z", 64, "Z19", []int{128, 64, 16}, true)
	f.I("")
	f.Label("vnext")
	f.I("CMPQ R11, R10")
	f.I("JLT  vblock")
	f.I("VZEROUPPER")
	f.I("RET")
}

// avx2 writes tileAVX2: tileAVX512's steps with each 16-lane accumulator as
// two 8-lane registers (lanes 0-7, 8-15) and the same fold tree, so both
// paths give the same bits. Scores in blocks of 4 keys; V in passes of 64
// or 16 dims.
// valueBlocks writes the single-query kernels' acc = acc·corr + Σ_t p_t·v_t
// over one block of each width in dims (R11 the block's byte offset, R10 the
// row stride, R8 the tile's length), with vectors of vec bytes in registers
// named reg; each block but the last jumps to prefix+"next". labelFirst says
// whether the first block gets a label (the AVX2 kernel falls into it).
func valueBlocks(f *emit.File, prefix, reg string, vec int, corr string, dims []int, labelFirst bool) {
	for i, d := range dims {
		if i > 0 || labelFirst {
			f.I("")
			f.Label(fmt.Sprintf("%s%d", prefix, d))
		}
		nv := 4 * d / vec
		f.I("LEAQ (BX)(R11*1), R13")
		for c := range nv {
			f.I("VMULPS %d(R13), %s, %s%d", vec*c, corr, reg, c)
		}
		f.I("LEAQ (SI)(R11*1), R14")
		f.I("XORQ R15, R15")
		f.Label(fmt.Sprintf("%s%dt", prefix, d))
		f.I("VBROADCASTSS (DI)(R15*4), %s8", reg)
		for c := range nv {
			f.I("VFMADD231PS %d(R14), %s8, %s%d", vec*c, reg, reg, c)
		}
		f.I("ADDQ R10, R14")
		f.I("INCQ R15")
		f.I("CMPQ R15, R8")
		f.I("JLT  %s%dt", prefix, d)
		for c := range nv {
			f.I("VMOVUPS %s%d, %d(R13)", reg, c, vec*c)
		}
		f.I("ADDQ $%d, R11", 4*d)
		if i < len(dims)-1 {
			f.I("JMP  %snext", prefix)
		}
	}
}

func avx2(f *emit.File) {
	f.WriteString(`
// 16 all-ones lanes then 16 zero lanes: loading at byte offset 4·(16−r)
// gives a mask of the first r lanes.
`)
	for off := 0; off < 128; off += 8 {
		v := "$-1"
		if off >= 64 {
			v = "$0"
		}
		fmt.Fprintf(f, "DATA lanemask<>+%d(SB)/8, %s\n", off, v)
	}
	f.WriteString("GLOBL lanemask<>(SB), RODATA|NOPTR, $128\n\n// After the AVX2 score tree lanes 0, 4, 2, 6 hold keys 0, 1, 2, 3.\n")
	for i, k := range []int{0, 4, 2, 6, 1, 5, 3, 7} {
		fmt.Fprintf(f, "DATA keyperm4<>+%d(SB)/4, $%d\n", 4*i, k)
	}
	f.WriteString("GLOBL keyperm4<>(SB), RODATA|NOPTR, $32\n")
	fmt.Fprintf(f, "\n// func tileAVX2(ml, acc, q, k, v, s *float32, n, hd int, scale float32)\n")
	fmt.Fprintf(f, "TEXT ·tileAVX2(SB), NOSPLIT, $0-68\n")
	loadTileArgs(f)
	f.I("VBROADCASTSS scale+64(FP), Y10")
	f.I("VMOVDQU keyperm4<>(SB), Y11")
	f.I("")
	f.Comment("Scores, 4 keys per block: Y(2j), Y(2j+1) are lanes 0-7, 8-15 of key j.")
	f.I("XORQ R11, R11")
	f.Label("a2block")
	for i := range 8 {
		f.I("VXORPS Y%d, Y%d, Y%d", i, i, i)
	}
	f.I("MOVQ R11, R12")
	f.I("SHLQ $6, R12")
	f.I("ADDQ DX, R12")
	f.I("MOVQ CX, R13")
	f.I("MOVQ R9, R14")
	f.I("SHRQ $4, R14")
	f.Label("a2chunk")
	f.I("VMOVUPS (R13), Y8")
	f.I("VMOVUPS 32(R13), Y9")
	for i := range 8 {
		f.I("VFMADD231PS %d(R12), Y%d, Y%d", 32*i, 8+i%2, i)
	}
	f.I("ADDQ $64, R13")
	f.I("ADDQ $4096, R12")
	f.I("DECQ R14")
	f.I("JNZ  a2chunk")
	foldAVX2(f)
	f.I("VMOVUPS X8, (DI)(R11*4)")
	f.I("ADDQ $4, R11")
	f.I("CMPQ R11, R8")
	f.I("JLT  a2block")
	f.I("")
	f.Comment("m' = max(m, scores[0:n])")
	f.I("VBROADCASTSS c_ninf<>(SB), X1")
	f.I("XORQ R11, R11")
	f.Label("a2max")
	f.I("VMAXSS (DI)(R11*4), X1, X1")
	f.I("INCQ R11")
	f.I("CMPQ R11, R8")
	f.I("JLT  a2max")
	f.I("VMOVSS (AX), X3")
	f.I("VMAXSS X3, X1, X1")
	f.I("VMOVSS X1, (AX)")
	f.I("VSUBSS X1, X3, X3")
	f.I("VBROADCASTSS X1, Y14")
	f.I("VBROADCASTSS X3, Y15")
	f.Exp256("Y15", "Y0", "Y1", "Y2", "Y3")
	f.I("")
	probsAVX2(f, "a2")
	rescaleSum(f, "AX", "X15")
	f.I("")
	f.Comment("acc = acc·corr + Σ_t p_t·v_t, 64 (else 16) dims at a time")
	f.I("MOVQ R9, R10")
	f.I("SHLQ $2, R10")
	f.I("XORQ R11, R11")
	f.Label("a2v")
	f.I("MOVQ R10, R12")
	f.I("SUBQ R11, R12")
	f.I("CMPQ R12, $256")
	f.I("JLT  a2v16")
	valueBlocks(f, "a2v", "Y", 32, "Y15", []int{64, 16}, false)
	f.I("")
	f.Label("a2vnext")
	f.I("CMPQ R11, R10")
	f.I("JLT  a2v")
	f.I("VZEROUPPER")
	f.I("RET")
}

// foldAVX2 reduces the AVX2 kernels' four 16-lane accumulators Y(2j),
// Y(2j+1) (lanes 0-7, 8-15) by the score tree of the AVX-512 kernels and
// leaves their four scaled scores in lanes 0-3 of Y8, j in lane j (Y11:
// keyperm4, Y10: the scale; Y9 scratch).
func foldAVX2(f *emit.File) {
	for i := 0; i < 8; i += 2 {
		f.I("VADDPS Y%d, Y%d, Y%d       // (i, i+8)", i+1, i, i)
	}
	for _, a := range []int{0, 4} {
		f.I("VPERM2F128 $0x20, Y%d, Y%d, Y8 // (i, i+4)", a+2, a)
		f.I("VPERM2F128 $0x31, Y%d, Y%d, Y9", a+2, a)
		f.I("VADDPS Y9, Y8, Y%d", a)
	}
	f.I("VSHUFPS $0x44, Y4, Y0, Y8    // (i, i+2)")
	f.I("VSHUFPS $0xEE, Y4, Y0, Y9")
	f.I("VADDPS Y9, Y8, Y8")
	f.I("VPERMILPS $0xB1, Y8, Y9      // (i, i+1)")
	f.I("VADDPS Y9, Y8, Y8")
	f.I("VPERMPS Y8, Y11, Y8")
	f.I("VMULPS Y10, Y8, Y8")
}

// probsAVX2 turns the n (R8) scores at DI into p = e^(s − m') in place (m'
// in every lane of Y14) and leaves their lane sums over the keys below n,
// in the order of the AVX-512 kernels, in Y1 (scratch: Y0-Y6, Y12, Y13,
// R11-R13).
func probsAVX2(f *emit.File, prefix string) {
	f.Comment("p = e^(s − m'), lane sums over the valid keys")
	f.I("VXORPS Y12, Y12, Y12")
	f.I("VXORPS Y13, Y13, Y13")
	f.I("XORQ R11, R11")
	f.Label(prefix + "exp")
	f.I("MOVQ R8, R12")
	f.I("SUBQ R11, R12")
	f.I("CMPQ R12, $16")
	f.I("JLE  %sr", prefix)
	f.I("MOVQ $16, R12")
	f.Label(prefix + "r")
	f.I("NEGQ R12")
	f.I("LEAQ lanemask<>+64(SB), R13")
	f.I("LEAQ (R13)(R12*4), R13  // mask of the first r lanes")
	for h, r := range []int{5, 6} {
		off := map[int]string{0: "", 1: "32"}[h]
		f.I("VMOVUPS %s(DI)(R11*4), Y%d", off, r)
		f.I("VSUBPS Y14, Y%d, Y%d", r, r)
		f.Exp256(emit.Y(r), "Y0", "Y1", "Y2", "Y3")
		f.I("VMOVUPS Y%d, %s(DI)(R11*4)", r, off)
		f.I("VANDPS %s(R13), Y%d, Y%d", off, r, r)
		f.I("VADDPS Y%d, Y%d, Y%d", r, 12+h, 12+h)
	}
	f.I("ADDQ $16, R11")
	f.I("CMPQ R11, R8")
	f.I("JLT  %sexp", prefix)
	f.I("VADDPS Y13, Y12, Y1")
}

// refRegs loads field of the first n of an AVX2 group kernel's qrefs (AX)
// into R9, R10, R11 and R15, and returns those registers.
func refRegs(f *emit.File, field string, n int) []string {
	regs := []string{"R9", "R10", "R11", "R15"}[:n]
	for i, r := range regs {
		f.I("MOVQ %d(AX), %s", qref(i, field), r)
	}
	return regs
}

// avx2Group is an AVX2 group kernel: two or four queries over one tile
// (tile4AVX512's arguments), each with exactly tileAVX2's operations, so
// that every K and V vector loaded feeds several queries' FMAs rather than
// one. The widened-tile ones serve prefill and an int8 cache; the in-place
// ones read a bf16 cache's rows as decode does, widening each load in
// registers (a zero-extension and a shift: exact), up to row n and no
// further. As they load a row's 64 bytes they prefetch the same bytes of
// the next tile (64 rows on) into L2, so that the memory streams while the
// core computes: over a 32768-position cache on the AMD EPYC that took a
// step's attention from 6.0–6.5 ms (2 KiB ahead into L1, as the AVX-512
// f32-mode kernels do) to 3.1–3.3, and beat reading each tile into L1
// first (warmAVX512's way: 4.6–5.1 ms; with the tile-ahead prefetch too
// 3.3–3.8) (docs/performance.md, twenty-eighth pass).
type avx2Group struct {
	name, prefix string
	queries      int
	inPlace      bool
}

var avx2Groups = []avx2Group{
	{"tile4AVX2", "g4", 4, false},
	{"tile2AVX2", "g2", 2, false},
	{"tile4BF16AVX2", "h4", 4, true},
	{"tile2BF16AVX2", "h2", 2, true},
}

// keys is how many keys a score block takes: four accumulators, each one
// (query, key) score's 16 lanes in two registers, Y(2a), Y(2a+1) for
// a = key·queries + query (the single kernel's four keys' registers, and
// its fold).
func (g avx2Group) keys() int { return 4 / g.queries }

// qInRegs: two queries' 16-value chunks fit in four registers (Y10, Y11,
// Y12, Y15: the scale, the key permutation and the running maxima move to
// memory around the fold), loaded once for the block's two keys where
// memory operands would load them once per key, which left the score loop
// waiting on loads (four K and eight q loads for eight FMAs).
func (g avx2Group) qInRegs() bool { return g.keys() == 2 }

// qRegs hold query i's chunk, lanes 0-7 and 8-15, where qInRegs.
var qRegs = [2][2]int{{10, 11}, {12, 15}}

// load8 loads the 8 values at off(base) into Y(reg) as f32 (a bf16 value
// zero-extended and shifted: exact), and returns the bytes they take.
func (g avx2Group) load8(f *emit.File, off int, base string, reg int) int {
	if !g.inPlace {
		f.I("VMOVUPS %d(%s), Y%d", off, base, reg)
		return 32
	}
	f.I("VPMOVZXWD %d(%s), Y%d", off, base, reg)
	f.I("VPSLLD $16, Y%d, Y%d", reg, reg)
	return 16
}

// chunkStep is the bytes from one 16-value chunk of a key to its next: the
// widened tile is chunk-major, a cache row is not.
func (g avx2Group) chunkStep() int {
	if g.inPlace {
		return 32
	}
	return 4 * 16 * 64 // f32 values of a chunk × the tile's 64 keys
}

// rowsAhead sets R13 to a cache row's bytes and ahead to 64 rows' (the next
// tile, which the in-place kernels prefetch).
func rowsAhead(f *emit.File, ahead string) {
	f.I("MOVQ R14, R13")
	f.I("SHRQ $1, R13            // cache row bytes")
	f.I("MOVQ R13, %s", ahead)
	f.I("SHLQ $6, %s              // 64 rows: the next tile", ahead)
}

// generate writes the kernel. Scores a block of keys at a time (the key
// rows' chunks widened into Y8, Y9 and, for a second key, Y13, Y14), the
// queries' maxima in lanes 0-3 of X12 as the scores come, key by key as
// the single kernel's scalar chain takes them; then all corrections in one
// exponential, the probabilities per query, and V 64/queries dims of every
// query's accumulator at a time (eight registers of them: eight FMA chains).
func (g avx2Group) generate(f *emit.File) {
	elem := "float32"
	if g.inPlace {
		elem = "uint16"
	}
	fmt.Fprintf(f, "\n// func %s(qs *[groupQueries]qref, k, v *%s, n, hd int, scale float32)\n", g.name, elem)
	frame := 0
	if g.qInRegs() {
		frame = 16 // the running maxima, whose register holds a query
	}
	fmt.Fprintf(f, "TEXT ·%s(SB), NOSPLIT, $%d-44\n", g.name, frame)
	f.I("MOVQ qs+0(FP), AX")
	f.I("MOVQ k+8(FP), DX")
	if !g.inPlace { // in place, SI holds the prefetch distance until V
		f.I("MOVQ v+16(FP), SI")
	}
	f.I("MOVQ n+24(FP), R8")
	f.I("MOVQ hd+32(FP), R14")
	f.I("SHLQ $2, R14            // row bytes")
	// The fold's constants: where the queries take their registers, the
	// fold loads them itself.
	foldConsts := func() {
		f.I("VBROADCASTSS scale+40(FP), Y10")
		f.I("VMOVDQU keyperm4<>(SB), Y11")
	}
	if !g.qInRegs() {
		foldConsts()
	}
	f.I("VBROADCASTSS c_ninf<>(SB), X12 // lane i: query i's running max")
	if g.qInRegs() {
		f.I("VMOVUPS X12, m-16(SP)")
	}
	qp := refRegs(f, "q", g.queries)
	if g.inPlace {
		rowsAhead(f, "SI") // v is loaded again for V
	}
	f.I("")
	if g.keys() == 1 {
		f.Comment("Scores, one key (BX) at a time: Y(2i), Y(2i+1) are lanes 0-7, 8-15 of query i.")
	} else {
		f.Comment("Scores, keys BX, BX+1 at a time: Y(2a), Y(2a+1) are lanes 0-7, 8-15 of query a%%2, key BX+a/2.")
	}
	f.Comment("head_dim 128 takes its 8 chunks unrolled: an FMA whose memory operand is")
	f.Comment("indexed takes two issue slots on Intel cores, and with the loop's own")
	f.Comment("instructions the front end, not the FMA ports, set the pace (70 %% against 89 %%).")
	f.I("CMPQ R14, $512")
	f.I("JNE  %sany", g.prefix)
	keyLoop := func(label string, unrolled bool) {
		f.I("XORQ BX, BX")
		f.Label(label)
		for i := range 8 {
			f.I("VXORPS Y%d, Y%d, Y%d", i, i, i)
		}
		// Key rows: R12 the first, DI (in place) or R12+64 the second.
		f.I("MOVQ BX, R12")
		if g.inPlace {
			f.I("IMULQ R13, R12")
			f.I("ADDQ DX, R12            // &k[key BX][0]")
		} else {
			f.I("SHLQ $6, R12")
			f.I("ADDQ DX, R12            // &k[chunk 0][key BX]")
		}
		second := "R12"
		if g.keys() == 2 && g.inPlace {
			second = "DI"
			f.I("LEAQ (R12)(R13*1), DI")
			f.I("LEAQ 1(BX), CX")
			f.I("CMPQ CX, R8")
			f.I("CMOVQGE R12, DI         // no key BX+1: key BX again, its scores dropped")
		}
		keyRegs := [2][2]int{{8, 9}, {13, 14}} // a key's lanes 0-7 and 8-15
		chunk := func(kOff int, qAddr func(r string, half int) string) {
			for j := range g.keys() {
				base, off := "R12", kOff
				if j == 1 {
					base = second
					if !g.inPlace {
						off += 64
					}
				}
				n := g.load8(f, off, base, keyRegs[j][0])
				g.load8(f, off+n, base, keyRegs[j][1])
				if g.inPlace && kOff%64 == 0 {
					f.I("PREFETCHT1 %d(%s)(SI*1)", kOff, base)
				}
			}
			q := func(i, half int) string { return qAddr(qp[i], half) }
			if g.qInRegs() {
				for i := range qp {
					for h := range 2 {
						f.I("VMOVUPS %s, Y%d", q(i, h), qRegs[i][h])
					}
				}
				q = func(i, half int) string { return fmt.Sprintf("Y%d", qRegs[i][half]) }
			}
			for j := range g.keys() {
				for i := range qp {
					a := j*g.queries + i
					f.I("VFMADD231PS %s, Y%d, Y%d", q(i, 0), keyRegs[j][0], 2*a)
					f.I("VFMADD231PS %s, Y%d, Y%d", q(i, 1), keyRegs[j][1], 2*a+1)
				}
			}
		}
		if unrolled {
			for c := range 8 {
				chunk(g.chunkStep()*c, func(r string, half int) string { return fmt.Sprintf("%d(%s)", 64*c+32*half, r) })
			}
		} else {
			f.I("XORQ CX, CX             // byte offset of the chunk in q")
			f.Label(label + "chunk")
			chunk(0, func(r string, half int) string { return fmt.Sprintf("%d(%s)(CX*1)", 32*half, r) })
			f.I("ADDQ $%d, R12", g.chunkStep())
			if second == "DI" {
				f.I("ADDQ $%d, DI", g.chunkStep())
			}
			f.I("ADDQ $64, CX")
			f.I("CMPQ CX, R14")
			f.I("JLT  %schunk", label)
		}
		if g.qInRegs() {
			foldConsts()
		}
		foldAVX2(f)
		if g.qInRegs() {
			f.I("VMOVUPS m-16(SP), X12")
		}
		f.I("VMAXPS X8, X12, X12")
		for a := range 4 {
			i, j := a%g.queries, a/g.queries
			f.I("MOVQ %d(AX), DI", qref(i, "s"))
			at := "(DI)(BX*4)"
			if j > 0 {
				at = fmt.Sprintf("%d%s", 4*j, at)
			}
			if a == 0 {
				f.I("VMOVSS X8, %s", at)
			} else {
				f.I("VEXTRACTPS $%d, X8, %s", a, at)
			}
		}
		if g.keys() == 2 {
			f.Comment("Key BX+1's scores into the maxima after key BX's, if it is below n.")
			f.I("LEAQ 1(BX), CX")
			f.I("CMPQ CX, R8")
			f.I("JGE  %slast", label)
			f.I("VMOVHLPS X8, X8, X9")
			f.I("VMAXPS X9, X12, X12")
			f.Label(label + "last")
		}
		if g.qInRegs() {
			f.I("VMOVUPS X12, m-16(SP)")
		}
		if g.keys() == 1 {
			f.I("INCQ BX")
		} else {
			f.I("ADDQ $%d, BX", g.keys())
		}
		f.I("CMPQ BX, R8")
		f.I("JLT  %s", label)
	}
	keyLoop(g.prefix+"key128", true)
	f.I("JMP  %ssoftmax", g.prefix)
	f.Label(g.prefix + "any")
	keyLoop(g.prefix+"key", false)
	f.I("")
	f.Label(g.prefix + "softmax")
	f.Comment("Lane i: m' = max(tile max, m) and corr = e^(m−m') of query i, as tileAVX2's scalars.")
	for i := range g.queries {
		f.I("MOVQ %d(AX), DI", qref(i, "ml"))
		if i == 0 {
			f.I("VMOVSS (DI), X13")
		} else {
			f.I("VINSERTPS $0x%x, (DI), X13, X13", i<<4)
		}
	}
	f.I("VMAXPS X13, X12, X10")
	f.I("VSUBPS X10, X13, X11")
	f.Exp256("Y11", "Y0", "Y1", "Y2", "Y3")
	f.I("")
	f.Comment("Per query: m' and corr to its qref, p, l.")
	f.I("MOVQ AX, R9")
	f.I("MOVQ $%d, R10", g.queries)
	f.Label(g.prefix + "q")
	f.I("MOVQ %d(R9), R15", qref(0, "ml"))
	f.I("VMOVSS X10, (R15)")
	f.I("VMOVSS X11, %d(R9)", qref(0, "corr"))
	f.I("VBROADCASTSS X10, Y14")
	f.I("MOVQ %d(R9), DI", qref(0, "s"))
	probsAVX2(f, g.prefix)
	rescaleSum(f, "R15", "X11")
	f.I("VPERMILPS $0x39, X10, X10 // the next query's to lane 0")
	f.I("VPERMILPS $0x39, X11, X11")
	f.I("ADDQ $40, R9")
	f.I("DECQ R10")
	f.I("JNZ  %sq", g.prefix)
	f.I("")
	dims := 64 / g.queries
	f.Comment(fmt.Sprintf("acc = acc·corr + Σ_t p_t·v_t, %d dims (BX their byte offset) of each query at a time.", dims))
	sp := refRegs(f, "s", g.queries)
	if g.inPlace {
		f.I("MOVQ v+16(FP), SI")
		rowsAhead(f, "DX")
	}
	// pass is one sweep of the tile's positions for nv vectors of dims of
	// every query: accumulator Y(nv·i+d), V in Y(8+d), p_t in Y(8+nv+i).
	pass := func(label string, nv int) {
		accs := func(load bool) {
			for i := range g.queries {
				f.I("MOVQ %d(AX), DI", qref(i, "acc"))
				if load {
					f.I("VBROADCASTSS %d(AX), Y8", qref(i, "corr"))
				}
				for d := range nv {
					off := ""
					if d > 0 {
						off = fmt.Sprint(32 * d)
					}
					if load {
						f.I("VMULPS %s(DI)(BX*1), Y8, Y%d", off, nv*i+d)
					} else {
						f.I("VMOVUPS Y%d, %s(DI)(BX*1)", nv*i+d, off)
					}
				}
			}
		}
		accs(true)
		if g.inPlace {
			f.I("MOVQ BX, R12")
			f.I("SHRQ $1, R12")
			f.I("ADDQ SI, R12")
		} else {
			f.I("LEAQ (SI)(BX*1), R12")
		}
		f.I("XORQ CX, CX")
		f.Label(label + "t")
		for d, off := 0, 0; d < nv; d++ {
			off += g.load8(f, off, "R12", 8+d)
		}
		if g.inPlace {
			f.I("PREFETCHT1 (R12)(DX*1)")
		}
		for i, r := range sp {
			f.I("VBROADCASTSS (%s)(CX*4), Y%d", r, 8+nv+i)
		}
		for i := range g.queries {
			for d := range nv {
				f.I("VFMADD231PS Y%d, Y%d, Y%d", 8+d, 8+nv+i, nv*i+d)
			}
		}
		if g.inPlace {
			f.I("ADDQ R13, R12")
		} else {
			f.I("ADDQ R14, R12")
		}
		f.I("INCQ CX")
		f.I("CMPQ CX, R8")
		f.I("JLT  %st", label)
		accs(false)
		f.I("ADDQ $%d, BX", 32*nv)
	}
	f.I("XORQ BX, BX")
	f.Label(g.prefix + "v")
	if dims == 16 {
		pass(g.prefix+"v", 2)
	} else {
		f.I("MOVQ R14, R12")
		f.I("SUBQ BX, R12")
		f.I("CMPQ R12, $%d", 4*dims)
		f.I("JLT  %sv16", g.prefix)
		pass(g.prefix+"v", dims/8)
		f.I("JMP  %svnext", g.prefix)
		f.Label(g.prefix + "v16")
		pass(g.prefix+"v16", 2)
		f.Label(g.prefix + "vnext")
	}
	f.I("CMPQ BX, R14")
	f.I("JLT  %sv", g.prefix)
	f.I("VZEROUPPER")
	f.I("RET")
}

func main() {
	f := emit.Header("gen_tile.go", "amd64 && !purego", "exp_amd64.h", "bf16_amd64.h")
	f.WriteString(`
// Rounding f32 to bf16 in integer arithmetic (ops.F32ToBF16): the kept
// bits' lowest, the half below it, the quiet bit of a NaN.
DATA bf16one<>+0(SB)/4, $1
GLOBL bf16one<>(SB), RODATA|NOPTR, $4
DATA bf16half<>+0(SB)/4, $0x7fff
GLOBL bf16half<>(SB), RODATA|NOPTR, $4
DATA bf16quiet<>+0(SB)/4, $0x40
GLOBL bf16quiet<>(SB), RODATA|NOPTR, $4
`)
	f.WriteString(`
// After the score tree, lane 4k+j holds key k+4j: this puts key i in lane i.
`)
	for i := range 16 {
		fmt.Fprintf(f, "DATA keyperm<>+%d(SB)/4, $%d\n", 4*i, i%4*4+i/4)
	}
	f.WriteString("GLOBL keyperm<>(SB), RODATA|NOPTR, $64\n")
	single(f)
	avx2(f)
	for _, g := range avx2Groups {
		g.generate(f)
	}
	pairV(f)
	roundQ(f)
	for _, k := range kernels {
		g := &gen{kernel: k}
		g.generate()
		f.Write(g.Bytes())
	}
	if err := f.WriteFile("tile_gen_amd64.s"); err != nil {
		log.Fatal(err)
	}
}
