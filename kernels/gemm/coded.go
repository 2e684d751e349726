package gemm

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/threads"
)

// A decode step streams every weight from memory once, and on AMX the tile
// unit multiplies far faster than memory delivers, so a step goes faster if
// it reads fewer bytes and spends instructions to restore them. codedPairs is
// a copy of a bf16 weight's pairs in 12 bits a weight, lossless: each bf16's
// low byte (mantissa and the exponent's last bit) as it is, and its high
// byte (sign and the exponent's top seven bits, which trained and random
// weights alike spread over a few values) as a 4-bit code: codes 0-14 stand
// for the weight's 15 most frequent high bytes, code 15 for one more of each
// block's own (its escape, which catches the rare small or large weights).
// A tile-step block of a panel (16 pairs × 16 channels, 1 KiB of pairs)
// becomes 768 bytes: the 512 low bytes, a pair of rows' 64 after the pair
// before's, then the 256 bytes of codes, a pair of rows' 64 in 32 bytes.
// Within a pair of rows, low bytes and codes are in the order pairSlot
// gives, in which VPUNPCKLBW and VPUNPCKHBW interleave them with their high
// bytes into the first and the second row's pairs, a zmm each.
// amxCodedPairs restores a step's blocks into the worker's buffer and
// multiplies them on the tiles; the AVX-512 kernels of a few rows
// (gen_asm.go) restore the same way, into the buffer (codedLoop) or into
// the registers they multiply (codedRegLoop), and multiply with the
// instructions of their uncoded twins, in the same order: the same bits as
// the pairs themselves give. A block with two high bytes outside the table
// is flagged and read from the pairs instead (raw); the pairs stay, for
// products of many rows, which re-read their weights from cache and gain
// nothing from the coding.
type codedPairs struct {
	panels, tsteps int
	blocks         []uint32 // panel × tile step × codedBlock bytes
	// flags holds two bytes a block, tile step by tile step (byte
	// s·panels + p is block (p, s), so that one load reads four panels'):
	// whether the block is raw, and from byte panels·tsteps on, its escape.
	flags []byte
	// lut holds the high byte of code c at bytes c and c+16, for VPSHUFB
	// to look up in each 128-bit lane; the kernel puts each block's escape
	// at 15 and 31.
	lut [32]byte
	// prefetch is the level the register kernels fetch the blocks into
	// ahead of their restore (Weight.SetCodedPrefetch).
	prefetch CodedPrefetch
}

// CodedPrefetch is the cache level the register kernels of a coded copy
// prefetch its blocks into, two tile steps ahead of restoring them. Which
// streams the copy faster depends on the core (gen_asm.go, prefetchCoded),
// so a load measures both (TimeCoded).
type CodedPrefetch uint8

const (
	// PrefetchL2 fetches into L2 (PREFETCHT1): the faster on an AMD EPYC
	// Zen 4, and the one every path with coded kernels has.
	PrefetchL2 CodedPrefetch = iota
	// PrefetchL1 fetches into L1 (PREFETCHT0): the faster on an AMD EPYC
	// Zen 5; only the avx512bf16 register kernels have it.
	PrefetchL1
	numPrefetches
)

func (p CodedPrefetch) String() string {
	if p == PrefetchL1 {
		return "L1"
	}
	return "L2"
}

// Other is the level that is not p.
func (p CodedPrefetch) Other() CodedPrefetch { return PrefetchL1 - p }

// CodedPrefetch is the level the products with w's coded copy prefetch it
// into (SetCodedPrefetch; PrefetchL2 without a copy).
func (w *Weight) CodedPrefetch() CodedPrefetch {
	if w.coded == nil {
		return PrefetchL2
	}
	return w.coded.prefetch
}

// SetCodedPrefetch makes the products with w's coded copy (if any) take the
// kernels that prefetch into p, where the path has them (else PrefetchL2's:
// the same bits either way). Like Code, call it before products with w.
func (w *Weight) SetCodedPrefetch(p CodedPrefetch) {
	if w.coded != nil {
		w.coded.prefetch = p
	}
}

// pairSlot is the row (0 or 1) of a pair of rows, and the bf16 of that row
// in the pairs' order, that slot i of the pair's 64 low bytes holds, and
// its code: slot i < 32 in the low nibble of code byte i, slot i ≥ 32 in
// the high nibble of code byte i−32. It follows the restore (coded_amd64.h):
// the 32 code bytes broadcast to both halves of a zmm, the upper half's
// shifted to the low nibbles, and VPUNPCKLBW (VPUNPCKHBW) taking bytes 0-7
// (8-15) of each 128-bit lane L: row 0 (1), bf16 8L to 8L+7.
func pairSlot(i int) (row, e int) { return i >> 3 & 1, i>>4<<3 | i&7 }

// codedBlock is the bytes of one coded block: 16 rows of 32 bf16, a byte
// and a half each.
const codedBlock = amxSteps * panelWidth * 2 * 3 / 2

// CodedBytesPerWeight is the memory a coded copy takes, and a decode step
// reads, per weight: its block's share and the block's two flag bytes.
const CodedBytesPerWeight = float64(codedBlock+2) / (amxSteps * panelWidth * 2)

// Code adds a 12-bit coded copy of w's pairs (codedPairs), which the paths
// that ReadsCoded stream for products of at most amxFewRows rows: 25 % fewer
// bytes a decode step reads from memory, for 75 % more memory held (the
// pairs stay). It does nothing for weights that are not bf16 or whose K is
// not a multiple of a tile step's, and returns the bytes it added.
// Call it before any product with w: products read w.coded unsynchronised.
func (w *Weight) Code() int {
	if !w.Codable() || w.coded != nil {
		return 0
	}
	tsteps := w.steps / amxSteps
	blocks := w.panels * tsteps
	c := &codedPairs{
		panels: w.panels,
		tsteps: tsteps,
		blocks: packed[uint32](w.arena, blocks*codedBlock/4),
		flags:  make([]byte, 2*blocks),
	}
	c.lut = w.commonHighBytes()
	code := codeTable(&c.lut)
	parallelPanels(w.panels, func(p int) {
		for s := range tsteps {
			f := s*w.panels + p
			var esc byte
			var ok bool
			if codeBlockSIMD != nil {
				esc, ok = codeBlockSIMD(&w.block(p, s)[0], &c.block(p, s)[0], &c.lut)
			} else {
				esc, ok = codeBlock(w.block(p, s), c.block(p, s), code)
			}
			c.flags[blocks+f] = esc
			if !ok {
				c.flags[f] = 1
			}
		}
	})
	settle(w.arena, asBytes(c.blocks))
	w.coded = c
	return c.Bytes()
}

// ReadsCoded reports whether products on path p read a weight's coded copy
// (Code): the AMX path's tiles, and the AVX-512 paths' register kernels.
func ReadsCoded(p kernels.Path) bool {
	s := kernelsFor(p)
	return s.coded[PrefetchL2] != nil || s.tileCoded != nil
}

// escapeCode is the code of a block's own high byte.
const escapeCode = 15

// Codable reports whether Code gives w a coded copy: a bf16 weight whose
// K is whole tile steps.
func (w *Weight) Codable() bool { return w.kind == kindBF16 && w.steps%amxSteps == 0 }

// Coded reports whether w has a coded copy (Code).
func (w *Weight) Coded() bool { return w.coded != nil }

// CodedBytes is the memory w's coded copy holds (0 without one).
func (w *Weight) CodedBytes() int {
	if w.coded == nil {
		return 0
	}
	return w.coded.Bytes()
}

// commonHighBytes is the table of w's 15 most frequent high bytes (ties to
// the smaller byte), each repeated as codedPairs.lut wants it, with 0 for
// the escape.
func (w *Weight) commonHighBytes() [32]byte {
	// Four tallies, so that runs of one high byte, which trained weights
	// are full of, do not wait on the same counter's last increment.
	var tally [4][256]int
	pairs := w.pairs
	for len(pairs) >= 2 {
		v, u := pairs[0], pairs[1]
		tally[0][v>>8&0xff]++
		tally[1][v>>24]++
		tally[2][u>>8&0xff]++
		tally[3][u>>24]++
		pairs = pairs[2:]
	}
	for _, v := range pairs {
		tally[0][v>>8&0xff]++
		tally[1][v>>24]++
	}
	var count [256]int
	for i := range count {
		count[i] = tally[0][i] + tally[1][i] + tally[2][i] + tally[3][i]
	}
	order := make([]int, 256)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(count[b], count[a]) })
	var lut [32]byte
	for i := range lut {
		if i%16 != escapeCode {
			lut[i] = byte(order[i%16])
		}
	}
	return lut
}

// codeTable is each high byte's code in the table lut (commonHighBytes),
// −1 for the bytes it does not hold: what codeBlock looks codes up in.
func codeTable(lut *[32]byte) *[256]int8 {
	var code [256]int8
	for i := range code {
		code[i] = -1
	}
	for i, b := range lut[:escapeCode] {
		code[b] = int8(i)
	}
	return &code
}

// block is w's pairs of panel p, tile step s: 16 rows of 16 pairs.
func (w *Weight) block(p, s int) []uint32 {
	start := (p*w.steps + s*amxSteps) * panelWidth
	return w.pairs[start : start+amxSteps*panelWidth]
}

// block is the coded bytes of panel p, tile step s.
func (c *codedPairs) block(p, s int) []byte {
	b := asBytes(c.blocks)
	start := (p*c.tsteps + s) * codedBlock
	return b[start : start+codedBlock]
}

// codeBlock codes pairs into dst and returns the block's escape, if it
// needs one; ok is false if two high bytes have no code (dst is then left
// partly written and the block is read raw). A pair of rows at a time: code
// byte j holds slots j and j+32, which pairSlot puts in the same row, at
// bf16 e and e+16; a group of eight slots is eight bf16 in a row.
func codeBlock(pairs []uint32, dst []byte, code *[256]int8) (esc byte, ok bool) {
	var e escape
	for r := 0; r < amxSteps; r += 2 {
		low, codes := dst[32*r:][:64], dst[512+16*r:][:32]
		for g := range 4 {
			row, e0 := pairSlot(8 * g)
			src := pairs[(r+row)*panelWidth+e0/2:][:12] // bf16 e0.. in [0, 4), e0+16.. in [8, 12)
			for t := range 8 {
				shift := 16 * uint(t&1)
				v0, v1 := uint16(src[t/2]>>shift), uint16(src[8+t/2]>>shift)
				low[8*g+t], low[32+8*g+t] = byte(v0), byte(v1)
				c0, c1 := byte(code[v0>>8]), byte(code[v1>>8])
				if (c0|c1)&0x80 != 0 { // a high byte without a table code
					var ok0, ok1 bool
					c0, ok0 = e.code(code, byte(v0>>8))
					c1, ok1 = e.code(code, byte(v1>>8))
					if !ok0 || !ok1 {
						return 0, false
					}
				}
				codes[8*g+t] = c0 | c1<<4
			}
		}
	}
	return e.hi, true
}

// codeBlockSIMD is codeBlock on the table lut (commonHighBytes), where
// the CPU has a kernel for it: the same bytes where ok.
var codeBlockSIMD func(pairs *uint32, dst *byte, lut *[32]byte) (esc byte, ok bool)

// escape is a block's own high byte, once one without a code is met.
type escape struct {
	hi  byte
	set bool
}

// code is hi's code: its table code, else escapeCode if hi is the block's
// escape or becomes it; ok is false for a second high byte without a code.
func (e *escape) code(code *[256]int8, hi byte) (c byte, ok bool) {
	if c := code[hi]; c >= 0 {
		return byte(c), true
	}
	if e.set && hi != e.hi {
		return 0, false
	}
	e.hi, e.set = hi, true
	return escapeCode, true
}

// Bytes is the memory the coded copy occupies (its blocks and flags).
func (c *codedPairs) Bytes() int { return 4*len(c.blocks) + len(c.flags) }

// Uncode drops w's coded copy (Code), if any, and returns the bytes it held.
func (w *Weight) Uncode() int {
	if w.coded == nil {
		return 0
	}
	n := w.coded.Bytes()
	w.coded = nil
	return n
}

// CodedRates is what TimeCoded measured: the bf16 bytes of the weights
// timed that the products streamed a second (GB/s), from the pairs and from
// the coded copy by the level its kernels prefetch into (0 for a level the
// path has no kernels for).
type CodedRates struct {
	Plain float64
	Coded [numPrefetches]float64
}

// Best is the level the coded copy streamed fastest with, and its rate.
func (r CodedRates) Best() (CodedPrefetch, float64) {
	best := PrefetchL2
	for p, rate := range r.Coded {
		if rate > r.Coded[best] {
			best = CodedPrefetch(p)
		}
	}
	return best, r.Coded[best]
}

// TimeCoded times the products of one row, two and four (decode steps of
// one, two and four sequences) with each of the coded weights among ws on pool, read
// from the pairs and from the coded copy with each prefetch level the path
// has, in rounds that alternate them, and returns each way's rate in the
// fastest round (all 0 without coded weights). They give the same bits;
// which is fastest depends on the machine: the copy is a quarter fewer
// bytes, but on an AMD EPYC (Zen 5) VM a core streamed it at fewer bytes a
// second than the pairs with the L2 prefetches, so that the pairs won
// (docs/performance.md, "twenty-first pass"), and ahead of them with the L1
// ones ("fortieth pass"). Like Code, it must not run beside products with
// ws; it leaves each copy's prefetch as it found it.
func TimeCoded(pool *threads.Pool, ws []*Weight, rounds int) CodedRates {
	rows := []int{1, 2, 4}
	var maxN, maxK, bytes int
	var with []*Weight
	for _, w := range ws {
		if w.coded != nil {
			with = append(with, w)
			maxN, maxK = max(maxN, w.N), max(maxK, w.K)
			bytes += len(rows) * 2 * w.N * w.K
		}
	}
	var r CodedRates
	if len(with) == 0 {
		return r
	}
	most := slices.Max(rows)
	c := NewContext(pool, most, maxK)
	x, y := make([]float32, most*maxK), make([]float32, most*maxN)
	for i := range x {
		x[i] = 1
	}
	// pass times the products from the pairs (plain), else from the copies
	// with prefetch p.
	pass := func(plain bool, p CodedPrefetch) time.Duration {
		start := time.Now()
		for _, m := range rows {
			for _, w := range with {
				saved, was := w.coded, w.coded.prefetch
				if plain {
					w.coded = nil
				} else {
					w.coded.prefetch = p
				}
				c.MatMul(y[:m*w.N], x[:m*w.K], m, w)
				w.coded, saved.prefetch = saved, was
			}
		}
		return time.Since(start)
	}
	levels := []CodedPrefetch{PrefetchL2}
	if c.set.coded[PrefetchL1] != nil {
		levels = append(levels, PrefetchL1)
	}
	fastPlain := time.Duration(math.MaxInt64)
	var fastCoded [numPrefetches]time.Duration
	for _, p := range levels {
		fastCoded[p] = math.MaxInt64
	}
	rate := func(d time.Duration) float64 { return float64(bytes) / d.Seconds() / 1e9 }
	for range rounds {
		fastPlain = min(fastPlain, pass(true, 0))
		for _, p := range levels {
			fastCoded[p] = min(fastCoded[p], pass(false, p))
		}
	}
	r.Plain = rate(fastPlain)
	for _, p := range levels {
		r.Coded[p] = rate(fastCoded[p])
	}
	return r
}
