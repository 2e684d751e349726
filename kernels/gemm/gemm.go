// Package gemm multiplies f32 activations by packed weights:
// y[M,N] = x[M,K] · Wᵀ with W stored [N,K] as in safetensors, for prefill
// (M in the hundreds) and decode (M = 1 … batch) alike.
//
// Every output is one accumulator running through K in a fixed order (one
// lane of a 16-channel panel; see generic.go), whatever M, tile, thread or
// path-internal blocking computes it. That makes a row's result independent
// of the rows computed with it, which the engine's batching guarantees rest on.
package gemm

import (
	"cmp"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/ops"
	"github.com/ellm-dev/ellm/kernels/threads"
)

// kernel computes one tile described by a.
type kernel func(a *kargs)

// kernelSet is one path's tile kernels, indexed [rows][panels]; nil entries
// are tile shapes the path does not have (too few registers).
type kernelSet struct {
	pairs    [maxRows + 1][maxPanels + 1]kernel // kindBF16, activations as the path wants them
	f32      [maxRows + 1][maxPanels + 1]kernel // kindF32
	quads    [maxRows + 1][maxPanels + 1]kernel // kindInt8
	rows     int                                // tallest tile: every [1..rows][1] kernel exists
	quadRows int                                // tallest int8 tile, if not rows
	f32Rows  int                                // tallest f32 tile, if not rows
	bf16Act  bool                               // pairs kernels take bf16-rounded activation pairs
	// tilePairs and tileQuads, if set, are bf16 and int8 kernels on AMX
	// tiles of up to maxRows rows stored one after the other (formBF16Rows,
	// formQuadRows), for weights of a multiple of amxSteps steps: every bf16
	// product with such a weight takes them, whatever its M (row invariance),
	// unless the weight is marked Weight.SetFewRows, and every int8 product
	// of more rows than one VNNI tile (same bits).
	tilePairs, tileQuads *[maxRows + 1][maxPanels + 1]kernel
	// coded and tileCoded, if set, are the pairs and tilePairs kernels of a
	// weight with a coded copy (Weight.Code), by rows, four panels a call:
	// a product of at most amxFewRows rows reads the copy, a quarter fewer
	// bytes, and gets the bits the pairs give. coded is by the level the
	// kernels prefetch the copy into (the copy's prefetch, Weight.
	// SetCodedPrefetch); a level the path has no kernels for takes
	// PrefetchL2's.
	coded     [numPrefetches]*[maxRows + 1]kernel
	tileCoded *[maxRows + 1]kernel
	// widen, if set, widens bf16 pairs to f32 panel steps (two per pair), so
	// that a GEMM of more than one row tile can widen each block of panels
	// once and run the f32 kernels over it: the same FMAs in the same order
	// as the pairs kernels, without widening in every tile.
	widen func(dst *float32, src *uint32, pairs int)
	// widenRows is the most rows a bf16 product multiplies from the pairs
	// (at least rows): widening reads the block from memory before the
	// first tile multiplies it, which costs more than it saves until enough
	// tiles reuse the block.
	widenRows int
}

const (
	maxRows   = 16 // an AMX tile's rows
	regRows   = 8  // the tallest tile the AVX kernels keep in registers
	maxPanels = 4
	// blockPanels panels of weights (≤ 256 KiB at K = 1024 bf16) stay in L2
	// while every row tile passes over them.
	blockPanels = 8
)

// usesTile reports whether the set's kernels need a worker's amxTile: the
// tile kernels, and the coded kernels, which restore into its buffer.
func (s *kernelSet) usesTile() bool {
	return s.tilePairs != nil || s.tileQuads != nil || s.coded[PrefetchL2] != nil || s.tileCoded != nil
}

// int8Rows is the tallest int8 register tile.
func (s *kernelSet) int8Rows() int { return cmp.Or(s.quadRows, s.rows) }

// widens reports whether a bf16 product of m rows widens its weights block
// by block for the f32 kernels.
func (s *kernelSet) widens(m int) bool { return s.widen != nil && m > max(s.rows, s.widenRows) }

// genericSet names Go kernels, which handle any tile shape, in the table.
func genericSet(pairs, f32, quads kernel, bf16Act bool) kernelSet {
	s := kernelSet{rows: regRows, bf16Act: bf16Act}
	for r := 1; r <= regRows; r++ {
		for p := 1; p <= maxPanels; p++ {
			s.pairs[r][p], s.f32[r][p], s.quads[r][p] = pairs, f32, quads
		}
	}
	return s
}

// arm64's kernels are generated here, in a file every architecture builds:
// go generate skips the files of other architectures (asm_arm64.go).
//go:generate go run gen_neon.go

// kernelsFor is the tile kernel set of path p. Without assembly (purego,
// other architectures) the bf16 path still rounds as VDPBF16PS does, so
// its results are the same bits as on a CPU that has the instruction.
func kernelsFor(p kernels.Path) kernelSet {
	if s, ok := asmKernels(p, kernels.CPU()); ok {
		return s
	}
	if p.RoundsToBF16() {
		return genericSet(genPairsBF16, scalarF32, scalarQuads, true)
	}
	return scalarSet()
}

// Context is the scratch one thread of control needs to run products of up to
// maxM rows and maxK inputs, allocated once. A Context is not safe for
// concurrent use, and neither is its pool: Contexts sharing a pool must not
// run at the same time. Outputs must not overlap the inputs.
type Context struct {
	pool       *threads.Pool
	path       kernels.Path
	set        kernelSet
	prep       *prepFuncs   // nil: activations prepared in Go
	ops        *ops.Kernels // the SwiGLU epilogue (SiLUMul)
	maxM, maxK int

	xf     []float32 // f32 activations in tile form (as pairs: padded to an even K)
	xp     []uint32  // bf16 pairs or u8 quads in tile form, in xf's memory
	sx     []float32 // int8: per-row scales
	worker []workerState
	task   task
}

type workerState struct {
	a    kargs
	tail [maxRows * panelWidth]float32 // a partial last panel goes through here
	up   []float32                     // SwiGLU: up projection of one chunk
	wide []float32                     // a block of panels widened to f32 (kernelSet.widen)
	_    [64]byte                      // keep workers' kargs apart
}

// swigluChunk panels of gate and up are computed before they are combined,
// so that the up projection needs only maxM×64 floats per worker.
const swigluChunk = 4

// NewContext allocates the scratch for products of up to maxM rows and maxK
// inputs on pool, for the kernel paths chosen now: kernels.PathFor
// MatMulBF16 and MatMulInt8 (f32 weights take the bf16 path's f32 kernels).
func NewContext(pool *threads.Pool, maxM, maxK int) *Context {
	return newContext(pool, maxM, maxK, kernels.PathFor(kernels.MatMulBF16), kernels.PathFor(kernels.MatMulInt8))
}

func newContext(pool *threads.Pool, maxM, maxK int, bf16, int8 kernels.Path) *Context {
	if maxM < 1 || maxK < 1 {
		panic(fmt.Sprintf("gemm.NewContext: maxM %d, maxK %d", maxM, maxK))
	}
	set := kernelsFor(bf16)
	if int8 != bf16 {
		q := kernelsFor(int8)
		set.quads, set.quadRows, set.tileQuads = q.quads, q.int8Rows(), q.tileQuads
	}
	// Both paths run on this CPU, so the higher one's preparation and
	// epilogue code do too (they give the same bits on every path).
	path := max(bf16, int8)
	c := &Context{pool: pool, path: bf16, set: set, ops: ops.For(path), maxM: maxM, maxK: maxK}
	switch path {
	case kernels.AVX512, kernels.AVX512BF16, kernels.AMX:
		c.prep = simdPrep
	case kernels.AVX2:
		c.prep = avx2Prep
	}
	kpad := ceilDiv(maxK, 4) * 4
	// A call prepares its activations in one form only, and each call
	// prepares its own: xf and xp can share memory, which a long
	// single-pass prefill pays per row.
	c.xf = alignedF32(maxM * kpad)
	c.xp = unsafe.Slice((*uint32)(unsafe.Pointer(&c.xf[0])), maxM*kpad/2)
	c.sx = make([]float32, maxM)
	c.worker = make([]workerState, pool.Size())
	for i := range c.worker {
		c.worker[i].up = alignedF32(maxM * swigluChunk * panelWidth)
		if c.set.usesTile() {
			c.worker[i].a.amx = newAMXTile()
		}
		if c.set.widens(maxM) {
			c.worker[i].wide = alignedF32(blockPanels * maxK * panelWidth)
		}
	}
	c.task.c = c
	return c
}

// ScratchBytes is the memory of the prepared activations and the workers'
// buffers: it grows with maxM (a long single-pass prefill pays it per row).
func (c *Context) ScratchBytes() int64 {
	n := 4 * int64(len(c.xf)+len(c.sx)) // xp is in xf
	for i := range c.worker {
		n += 4 * int64(len(c.worker[i].up)+len(c.worker[i].wide))
		if c.worker[i].a.amx != nil {
			n += amxAccBytes
		}
	}
	return n
}

// Path is the kernel path this Context runs bf16 weights on.
func (c *Context) Path() kernels.Path { return c.path }

// MatMul sets y[m,N] = x[m,K] · Wᵀ.
func (c *Context) MatMul(y, x []float32, m int, w *Weight) {
	c.check("MatMul", y, x, m, w)
	c.run(opStore, y, x, m, w, nil)
}

// Stage prepares rows [lo, hi) of x [m, w.K] in the form a product of m
// rows with w reads its activations, ahead of MatMulStaged or SwiGLUStaged
// (w their first weight): from inside a pool task of the caller's that
// computes those rows (the RMSNorm before a projection), so that the product
// needs no preparation pass over x and no barrier for it. Concurrent calls
// must be from different workers, for disjoint rows. Until the staged product
// runs, the Context must run no other product. The prepared rows are the
// same bits MatMul prepares.
func (c *Context) Stage(x []float32, m int, w *Weight, lo, hi int) {
	if m < 1 || m > c.maxM || w.K > c.maxK || lo < 0 || lo > hi || hi > m || len(x) < m*w.K {
		panic(fmt.Sprintf("gemm.Stage: rows [%d, %d) of %d×%d (x %d elements), context %d×%d", lo, hi, m, w.K, len(x), c.maxM, c.maxK))
	}
	var t task
	c.form(&t, m, w)
	t.c, t.x, t.m, t.w = c, x, m, w
	t.prepare(lo, hi)
}

// MatMulStaged is MatMul on activations x whose m rows were all staged for
// w (Stage): the same bits, without preparing them.
func (c *Context) MatMulStaged(y, x []float32, m int, w *Weight) {
	c.check("MatMulStaged", y, x, m, w)
	c.run(opStore|staged, y, x, m, w, nil)
}

// SwiGLUStaged is SwiGLU on activations x whose m rows were all staged for
// gate (Stage).
func (c *Context) SwiGLUStaged(h, x []float32, m int, gate, up *Weight) {
	c.checkSwiGLU(h, x, m, gate, up)
	c.run(opSwiGLU|staged, h, x, m, gate, up)
}

// MatMulAdd adds x·Wᵀ to y (the residual connection): each output is
// y + (x·Wᵀ), one rounding after the product is complete.
func (c *Context) MatMulAdd(y, x []float32, m int, w *Weight) {
	c.check("MatMulAdd", y, x, m, w)
	c.run(opAdd, y, x, m, w, nil)
}

// SwiGLU sets h = silu(x·Gᵀ) ⊙ (x·Uᵀ), silu(g) = g/(1+exp(-g)) in f32:
// the epilogue is ops.Kernels.SiLUMul (exp is ops.Exp32).
func (c *Context) SwiGLU(h, x []float32, m int, gate, up *Weight) {
	c.checkSwiGLU(h, x, m, gate, up)
	c.run(opSwiGLU, h, x, m, gate, up)
}

func (c *Context) checkSwiGLU(h, x []float32, m int, gate, up *Weight) {
	c.check("SwiGLU", h, x, m, gate)
	if up.N != gate.N || up.K != gate.K {
		panic(fmt.Sprintf("gemm.SwiGLU: gate %d×%d, up %d×%d", gate.N, gate.K, up.N, up.K))
	}
}

func (c *Context) check(op string, y, x []float32, m int, w *Weight) {
	switch {
	case m < 1 || m > c.maxM:
		panic(fmt.Sprintf("gemm.%s: m = %d outside [1, %d]", op, m, c.maxM))
	case w.K > c.maxK:
		panic(fmt.Sprintf("gemm.%s: K = %d > context maxK %d", op, w.K, c.maxK))
	case len(x) < m*w.K:
		panic(fmt.Sprintf("gemm.%s: x has %d elements, want %d×%d", op, len(x), m, w.K))
	case len(y) < m*w.N:
		panic(fmt.Sprintf("gemm.%s: y has %d elements, want %d×%d", op, len(y), m, w.N))
	}
}

type op uint8

const (
	opStore op = iota
	opAdd
	opSwiGLU

	// staged, or'ed into an op passed to run: the activations are prepared (Stage).
	staged op = 1 << 7
)

// task is the one preallocated pool task of a Context.
type task struct {
	c       *Context
	op      op
	phase   uint8 // 0: prepare activations (row tiles split), 1: multiply (panel chunks claimed)
	form    form
	m       int
	y       []float32
	x       []float32
	w, w2   *Weight
	xs      unsafe.Pointer // prepared activations
	rowSize uintptr        // bytes of one prepared row: tile r0 starts at xs + r0·rowSize
	rows    int            // rows of the tallest tile kernel for this weight kind
	widen   bool           // bf16 weights widened block by block for the f32 kernels
	kernels *[maxRows + 1][maxPanels + 1]kernel
	coded   *[maxRows + 1]kernel // the kernels' coded twins, if any (kernelSet.coded)
	prep    threads.Claims       // phase 0: rows, four row tiles a claim
	next    atomic.Int64         // phase 1: the first (group of rows, panel) pair not yet claimed
}

// form is how the kernels read activations: a tile of R rows is stored
// step by step, the R rows' values of step 0, then of step 1…, so that a
// kernel reads one sequential stream (a row alone is just the row).
type form uint8

const (
	formF32      form = iota // f32, one per step (f32 weights)
	formPairs                // f32 pairs, zero-padded to even K (bf16 weights, f32 paths)
	formBF16                 // bf16 pairs as uint32 (bf16 weights, avx512bf16 path)
	formQuads                // u8 quads as uint32, per-row scale (int8 weights)
	formBF16Rows             // formBF16, each row stored whole after the one before (AMX tiles)
	formQuadRows             // formQuads, the same
)

// PanelWidth is the output channels a weight panel holds: Outputs computes
// whole panels.
const PanelWidth = panelWidth

// Prepare readies y[m,N] = x[m,K]·Wᵀ to be computed piecewise by Outputs
// from inside a pool task of the caller's own, whose workers each need some
// output channels (the q/k/v of one kv head) and carry on with them without
// a barrier in between. Done ends the product. Outputs computes every
// channel with the same kernel arithmetic as MatMul: the same bits.
func (c *Context) Prepare(y, x []float32, m int, w *Weight) {
	c.check("Prepare", y, x, m, w)
	c.setup(opStore, y, x, m, w, nil)
}

// Outputs computes output channels [lo, hi) of the prepared product for all
// rows, on worker's scratch. lo and hi are multiples of PanelWidth (hi may
// be N); concurrent calls must be from different workers, for disjoint
// channels.
func (c *Context) Outputs(worker, lo, hi int) {
	t := &c.task
	n := t.w.N
	if lo < 0 || lo > hi || hi > n || lo%panelWidth != 0 || hi%panelWidth != 0 && hi != n {
		panic(fmt.Sprintf("gemm.Outputs: channels [%d, %d) of %d, not whole panels", lo, hi, n))
	}
	if lo == hi {
		return
	}
	p0, p1 := lo/panelWidth, ceilDiv(hi, panelWidth)
	t.panels(&c.worker[worker], t.w, unsafe.Pointer(&t.y[lo]), uintptr(n*4), 0, t.m, p0, p1, false)
}

// RoundsActivations reports whether a product of m rows with w rounds its
// activations to bf16 (the bf16 kernels of the avx512bf16 and AMX paths).
func (c *Context) RoundsActivations(m int, w *Weight) bool {
	f := c.formOf(m, w)
	return f == formBF16 || f == formBF16Rows
}

// formOf is the form a product of m rows with w reads its activations in.
func (c *Context) formOf(m int, w *Weight) form {
	var t task
	c.form(&t, m, w)
	return t.form
}

// Done ends a product begun by Prepare.
func (c *Context) Done() { c.task.release() }

func (c *Context) run(o op, y, x []float32, m int, w, w2 *Weight) {
	c.setup(o, y, x, m, w, w2)
	t := &c.task
	t.phase = 1
	t.next.Store(0)
	c.pool.Run(t)
	t.release()
}

func (t *task) release() { t.y, t.x, t.w, t.w2 = nil, nil, nil, nil }

// setup points the task at a product and prepares its activations.
func (c *Context) setup(o op, y, x []float32, m int, w, w2 *Weight) {
	t := &c.task
	t.op, t.m, t.y, t.x, t.w, t.w2 = o&^staged, m, y, x, w, w2
	c.form(t, m, w)
	switch {
	case o&staged != 0:
		// Stage has prepared the rows.
	case m == 1 && (t.form == formF32 || t.form == formPairs && w.K%2 == 0):
		t.xs = unsafe.Pointer(&x[0]) // one row is already in form
	case m <= t.rows:
		// One row tile (a decode step's batch): phase 0 would hand it to one
		// worker anyway, so a pool dispatch would only add a barrier.
		t.prepare(0, m)
	default:
		t.phase = 0
		t.prep.Reset()
		c.pool.Run(t)
	}
}

// form sets how t's kernels read the activations of a product of m rows
// with w, and where they are prepared.
func (c *Context) form(t *task, m int, w *Weight) {
	switch {
	case w.kind == kindF32:
		t.form, t.kernels, t.xs, t.rowSize = formF32, &c.set.f32, unsafe.Pointer(&c.xf[0]), uintptr(w.K*4)
	case w.kind == kindBF16 && c.set.tilePairs != nil && w.steps%amxSteps == 0 && !w.fewRows:
		t.form, t.kernels, t.xs, t.rowSize = formBF16Rows, c.set.tilePairs, unsafe.Pointer(&c.xp[0]), uintptr(w.steps*4)
	case w.kind == kindInt8 && c.set.tileQuads != nil && w.steps%amxSteps == 0 && m > c.set.int8Rows():
		// Above one VNNI tile: a product of a few rows (a decode step) streams
		// its weights faster through VNNI (BenchmarkDecode/layers/int8: 94–96 %
		// of the DRAM read rate, tiles 86–88 %), and int8 sums are the same
		// bits on both, so row invariance holds across the switch.
		t.form, t.kernels, t.xs, t.rowSize = formQuadRows, c.set.tileQuads, unsafe.Pointer(&c.xp[0]), uintptr(w.steps*4)
	case w.kind == kindInt8:
		t.form, t.kernels, t.xs, t.rowSize = formQuads, &c.set.quads, unsafe.Pointer(&c.xp[0]), uintptr(w.steps*4)
	case c.set.bf16Act:
		t.form, t.kernels, t.xs, t.rowSize = formBF16, &c.set.pairs, unsafe.Pointer(&c.xp[0]), uintptr(w.steps*4)
	case c.set.widens(m):
		t.form, t.kernels, t.xs, t.rowSize = formF32, &c.set.f32, unsafe.Pointer(&c.xf[0]), uintptr(w.K*4)
	default:
		t.form, t.kernels, t.xs, t.rowSize = formPairs, &c.set.pairs, unsafe.Pointer(&c.xf[0]), uintptr(w.steps*8)
	}
	t.widen = w.kind == kindBF16 && t.form == formF32
	t.coded = nil
	switch {
	case w.coded == nil || m > amxFewRows:
	case t.form == formBF16Rows:
		t.coded = c.set.tileCoded
	case t.form == formBF16 || t.form == formPairs:
		t.coded = cmp.Or(c.set.coded[w.coded.prefetch], c.set.coded[PrefetchL2])
	}
	switch {
	case t.form == formBF16Rows || t.form == formQuadRows:
		t.rows = maxRows
	case w.kind == kindInt8:
		t.rows = c.set.int8Rows()
	case t.form == formF32:
		t.rows = cmp.Or(c.set.f32Rows, c.set.rows)
	default:
		t.rows = c.set.rows
	}
}

func (t *task) Run(worker, _ int) {
	if t.phase == 0 {
		for {
			lo, hi, ok := t.prep.Next(t.m, 4*t.rows)
			if !ok {
				return
			}
			t.prepare(lo, hi)
		}
	}
	t.multiply(worker)
}

// prepare puts rows [lo, hi) of x in form. Each row is written on its own
// (at its place in its tile), so any split of the rows gives the same bits.
func (t *task) prepare(lo, hi int) {
	c, w := t.c, t.w
	k, steps := w.K, w.steps
	for i := lo; i < hi; i++ {
		r0, r := i-i%t.rows, i%t.rows
		rows := min(t.rows, t.m-r0)
		x := t.x[i*k : (i+1)*k]
		switch t.form {
		case formQuads:
			c.sx[i] = quantizeRow(c.xp[r0*steps+r:], rows, x, c.prep)
		case formQuadRows:
			c.sx[i] = quantizeRow(c.xp[i*steps:], 1, x, c.prep)
		case formBF16:
			toBF16Pairs(c.xp[r0*steps+r:], rows, x, c.prep)
		case formBF16Rows:
			toBF16Pairs(c.xp[i*steps:], 1, x, c.prep)
		case formF32:
			toF32Strided(c.xf[r0*k+r:], rows, x, c.prep)
		case formPairs:
			dst := c.xf[2*(r0*steps+r):]
			for q := range k / 2 {
				dst[2*q*rows], dst[2*q*rows+1] = x[2*q], x[2*q+1]
			}
			if k%2 == 1 {
				dst[2*(k/2)*rows], dst[2*(k/2)*rows+1] = x[k-1], 0
			}
		}
	}
}

// multiply has the worker claim chunks of panels in order until none is
// left (up to blockPanels, or maxPanels when all rows fit one tile), group
// of rows after group of rows (groupRows). Each
// chunk is a contiguous stretch of the weights, streamed once; claiming them
// rather than splitting the panels up front keeps both threads busy to the
// end of the call when one of them is slowed down (a shared core, an unfair
// share of memory bandwidth). Which thread computes a panel never changes
// its results.
//
// Chunks shrink as the panels run out (guided scheduling): with several row
// tiles, blocks of blockPanels reuse each weight block from L2 over every
// row tile, but a whole block as the last chunk left the other worker idle
// for up to a block's time (~0.5 ms at 512 rows, a tenth of an o_proj), so
// they go down to minChunk panels (one where two are long: chunkFLOP). A
// chunk is at most half of what remains per worker (it was all of it): with
// two workers starting at different times or running at different speeds
// the first to finish waits for at most ~1.5 panels of the other's instead
// of ~2.5 (TestGuidedChunksBalance), at 512 rows and K = 3072 ~160 µs instead
// of ~300, beyond which the waiting worker parks (the pool's 100 µs spin)
// and costs a wake-up on the next product's critical path. A one-tile product (a decode step) is
// memory-bound and reuses nothing: its chunks go down to one panel, so the
// first thread to run out of work waits for about one panel of another's
// (down_proj: 96 KiB) instead of a chunk (384 KiB), at a few dozen
// products per step.
func (t *task) multiply(worker int) {
	ws := &t.c.worker[worker]
	n, workers := int64(t.w.panels), int64(t.c.pool.Size())
	most, least, shares := int64(blockPanels), int64(max(1, min(minChunk, chunkFLOP/(32*t.m*t.w.K)))), 2*workers
	if t.m <= t.rows {
		most, least, shares = maxPanels, 1, workers
	}
	g := t.groupRows()
	total := int64(ceilDiv(t.m, g)) * n // (group of rows, panel) pairs
	for {
		lo := t.next.Load()
		if lo >= total {
			return
		}
		plo := lo % n
		size := min(n-plo, chunkSize(total-lo, most, least, shares))
		if !t.next.CompareAndSwap(lo, lo+size) {
			continue
		}
		r0 := int(lo/n) * g
		t.chunk(ws, r0, min(r0+g, t.m), int(plo), int(plo+size))
	}
}

// groupRows is the rows of a group: a tall product takes its prepared
// activations in groups of rows of at most groupBytes, and the workers claim
// all of a group's panels before the next group's, so that the chunks of
// panels re-read a group's activations from L2 and the VM's share of L3
// instead of all of them from further out: at 2048 rows down_proj's are
// 12 MiB, re-read by each of its 8 chunks (docs/performance.md, "Row
// groups"). The weights are then streamed once per group. Widened weights
// are not grouped: each group would widen every block again.
func (t *task) groupRows() int {
	if t.widen {
		return t.m
	}
	groups := ceilDiv(t.m*int(t.rowSize), groupBytes)
	return ceilDiv(ceilDiv(t.m, groups), t.rows) * t.rows
}

// groupBytes is a variable so that tests can make groups of a few rows.
var groupBytes = 2 << 20

// chunkSize is the next chunk's panels when remaining are left: guided by
// remaining/shares, between least and most.
func chunkSize(remaining, most, least, shares int64) int64 {
	return max(least, min(most, remaining/shares))
}

// minChunk is the smallest chunk of panels guided scheduling hands out to
// several row tiles, and chunkFLOP the most work (2·M·16·K per panel) below
// which a last chunk may be one panel: a 512-row product's 2-panel chunk is
// ~80 µs at K = 1024 and a single panel of down_proj (K = 3072) ~120 µs,
// where two panels would be 240.
const (
	minChunk  = 2
	chunkFLOP = 32 << 20
)

// chunk computes panels [plo, phi) of the task's product for rows [r0, r1).
func (t *task) chunk(ws *workerState, r0, r1, plo, phi int) {
	w := t.w
	if t.op != opSwiGLU {
		t.panels(ws, w, unsafe.Pointer(&t.y[plo*panelWidth]), uintptr(w.N*4), r0, r1, plo, phi, t.op == opAdd)
		return
	}
	n := w.N
	for p0 := plo; p0 < phi; p0 += swigluChunk {
		p1 := min(p0+swigluChunk, phi)
		t.panels(ws, w, unsafe.Pointer(&t.y[p0*panelWidth]), uintptr(n*4), r0, r1, p0, p1, false)
		t.panels(ws, t.w2, unsafe.Pointer(&ws.up[0]), swigluChunk*panelWidth*4, r0, r1, p0, p1, false)
		cols := min(p1*panelWidth, n) - p0*panelWidth
		for r := r0; r < r1; r++ {
			h := t.y[r*n+p0*panelWidth : r*n+p0*panelWidth+cols]
			t.c.ops.SiLUMul(h, h, ws.up[r*swigluChunk*panelWidth:])
		}
	}
}

// The int8 tiles of more than four rows prefetch their panels nearPrefetch
// bytes ahead where rows share the panels from L2 (prefill), and
// farPrefetch where one tile takes every row and so reads each panel once,
// from DRAM (a decode step's logits screen of four sequences is eight rows).
// There a step is 31 instructions for 128 bytes of weights, so the
// out-of-order window reaches under 2 KiB ahead, and 1 KiB left memory and
// arithmetic taking turns (34 against 50 GB/s for two rows); 3 KiB took
// 10-16 % off the product, where in prefill it cost int8 products 1-4 %
// (docs/performance.md, "The screened logits at batch 4").
const (
	nearPrefetch = 1024
	farPrefetch  = 3072
)

// panels computes panels [p0, p1) of w for rows [r0, r1) into y (the output of
// row 0, channel 16·p0), ldy bytes apart.
func (t *task) panels(ws *workerState, w *Weight, y unsafe.Pointer, ldy uintptr, r0, r1, p0, p1 int, add bool) {
	a := &ws.a
	a.ps, a.ks, a.ldy, a.lx = w.panelBytes(), w.steps, ldy, t.rowSize
	a.ahead = nearPrefetch
	if t.m <= t.rows {
		a.ahead = farPrefetch
	}
	if t.widen {
		a.ps, a.ks = uintptr(w.K*panelWidth*4), w.K
	}
	a.add = 0
	if add {
		a.add = 1
	}
	if w.kind == kindInt8 {
		a.sx = unsafe.Pointer(&t.c.sx[0])
	}
	a.coded = nil
	if t.coded != nil {
		a.coded = w.coded
	}
	full := p1 // panels [p0, full) have 16 real channels
	if p1 == w.panels && w.N%panelWidth != 0 {
		full--
	}
	for b0 := p0; b0 < p1; b0 += blockPanels {
		b1 := min(b0+blockPanels, p1)
		// Panel b0, or its block widened to f32 (a.ps is then the widened
		// panel's size: w.base() plus it would point past the weights, which
		// the garbage collector must never see).
		var base unsafe.Pointer
		if t.widen {
			base = t.widenBlock(ws, w, b0, b1)
		} else {
			base = unsafe.Add(w.base(), uintptr(b0)*a.ps)
		}
		for r0 := r0; r0 < r1; r0 += t.rows {
			rows := min(t.rows, r1-r0)
			a.x = unsafe.Add(t.xs, uintptr(r0)*t.rowSize)
			for p := b0; p < b1; {
				np := 1
				for np < maxPanels && p+np*2 <= min(b1, full) && t.kernels[rows][np*2] != nil {
					np *= 2
				}
				a.w = unsafe.Add(base, uintptr(p-b0)*a.ps)
				if p >= full {
					t.tail(ws, w, y, r0, rows, p-p0, p)
					p++
					continue
				}
				a.y = unsafe.Add(y, uintptr(r0)*ldy+uintptr((p-p0)*panelWidth*4))
				t.setInt8(a, w, r0, p)
				a.r, a.p, a.pi = rows, np, p
				k := t.kernels[rows][np]
				if a.coded != nil && np == maxPanels && t.coded[rows] != nil {
					k = t.coded[rows]
				}
				k(a)
				p += np
			}
		}
	}
}

// widenBlock widens panels [b0, b1) of bf16 weights w into the worker's
// f32 block and returns it.
func (t *task) widenBlock(ws *workerState, w *Weight, b0, b1 int) unsafe.Pointer {
	k, steps := w.K, w.steps
	for p := b0; p < b1; p++ {
		dst := ws.wide[(p-b0)*k*panelWidth : (p-b0+1)*k*panelWidth]
		src := w.pairs[p*steps*panelWidth : (p+1)*steps*panelWidth]
		if k >= 2 {
			t.c.set.widen(&dst[0], &src[0], k/2)
		}
		if k%2 == 1 { // the last k is the low half of a padded pair
			for c, v := range src[(k/2)*panelWidth : (k/2+1)*panelWidth] {
				dst[(k-1)*panelWidth+c] = even(v)
			}
		}
	}
	return unsafe.Pointer(&ws.wide[0])
}

// tail computes the partial last panel (a.w) through the worker's tail
// buffer, with the same kernel as any other panel.
func (t *task) tail(ws *workerState, w *Weight, y unsafe.Pointer, r0, rows, pi, p int) {
	a := &ws.a
	add, ldy := a.add, a.ldy
	a.y, a.ldy, a.add = unsafe.Pointer(&ws.tail[0]), panelWidth*4, 0
	t.setInt8(a, w, r0, p)
	a.r, a.p = rows, 1
	t.kernels[rows][1](a)
	a.ldy, a.add = ldy, add
	cols := w.N - p*panelWidth
	for r := range rows {
		dst := unsafe.Slice((*float32)(unsafe.Add(y, uintptr(r0+r)*ldy+uintptr(pi*panelWidth*4))), cols)
		src := ws.tail[r*panelWidth : r*panelWidth+cols]
		if add != 0 {
			for j, v := range src {
				dst[j] += v
			}
		} else {
			copy(dst, src)
		}
	}
}

func (t *task) setInt8(a *kargs, w *Weight, r0, p int) {
	if w.kind == kindInt8 {
		a.sx = unsafe.Pointer(&t.c.sx[r0])
		a.sw = unsafe.Pointer(&w.scale[p*panelWidth])
		a.wc = unsafe.Pointer(&w.corr[p*panelWidth])
	}
}
