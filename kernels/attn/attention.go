package attn

import (
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/threads"
)

// Tile is the number of cached positions attention visits at a time. Tiles
// are aligned to absolute position 0; their order and extent for a query
// depend only on its position (see the package comment).
const Tile = 64

// blockRows is how many query rows of one sequence share a pass over the K/V
// tiles: together with the group's heads they reuse each tile from cache.
const blockRows = 64

// Seq is one sequence's part of a Forward call: N query rows of cache slot
// Slot at absolute positions Start..Start+N-1, stored at rows Row..Row+N-1 of
// q and out. The K/V of positions 0..Start+N-1 must already be in the cache.
type Seq struct{ Slot, Start, N, Row int }

// Attention computes causal grouped-query attention with scratch allocated
// once. It is not safe for concurrent use.
type Attention struct {
	pool                                     *threads.Pool
	maxRows, qHeads, kvHeads, headDim, group int
	scale                                    float32
	k                                        kernelSet // bound by New
	mode                                     Mode      // over a bf16 cache

	items  []item
	claims threads.Claims
	ws     []scratch // per worker

	// the current call
	out, q []float32
	c      *Cache
	seqs   []Seq
}

// item is rows [lo, hi) (relative to the sequence's first row) of seqs[seq]
// for kv head head.
type item struct {
	cost              int64
	seq, lo, hi, head int32
}

// scratch is one worker's: the widened K/V tile of a bf16 or int8 cache and the
// online-softmax state of every (row, head) of a block.
type scratch struct {
	kt, vt []float32 // [Tile, headDim]
	ml     []float32 // [blockRows·group, 2]: running max, running sum
	acc    []float32 // [blockRows·group, headDim]
	s      []float32 // [groupQueries, Tile] scores, then probabilities
	pend   [groupQueries]query
	np, pn int     // pending queries, their number of positions
	all    []query // the block's queries in (row, head) order
	refs   [groupQueries]qref
	// allRefs: the block's queries as the dot kernels read them (dotRefs),
	// so that a full tile runs them four at a time without copying
	allRefs []qref
	// ModeBF16: the block's queries as bf16 ([blockRows·group, 2·headDim]),
	// the rounding's f32 scratch, the tile being read in place (element
	// offset), whether vt holds its V pair-interleaved (pairV), and the
	// stand-in state a lone query is paired with.
	qb     []uint16
	qtmp   []float32
	o      int
	inPl   bool
	vpairs bool
	alone  query
	_      [64]byte // keep workers' slice headers on separate cache lines
}

// New sizes an Attention for calls of at most maxRows query rows in total,
// with the kernels of the path active now (kernels.Active) and the mode of
// the attention path chosen now (ModeFor(kernels.PathFor(kernels.Attention))):
// kernels.Force and kernels.Choose apply to the Attentions built after them.
func New(pool *threads.Pool, maxRows, qHeads, kvHeads, headDim int) (*Attention, error) {
	return NewMode(pool, maxRows, qHeads, kvHeads, headDim, ModeFor(kernels.PathFor(kernels.Attention)))
}

// NewMode is New with the mode over a bf16 cache given: ModeBF16 runs the
// Go definition where the path has no VDPBF16PS kernels (the same bits,
// slowly), and falls back to ModeF32 for a head size that is not a
// multiple of 16 (Mode reports which).
func NewMode(pool *threads.Pool, maxRows, qHeads, kvHeads, headDim int, mode Mode) (*Attention, error) {
	if mode != ModeF32 && mode != ModeBF16 {
		return nil, fmt.Errorf("attention: mode %v", mode)
	}
	if headDim%16 != 0 {
		mode = ModeF32
	}
	if maxRows <= 0 || qHeads <= 0 || kvHeads <= 0 || qHeads%kvHeads != 0 || headDim <= 0 {
		return nil, fmt.Errorf("attention: %d rows, %d query heads, %d kv heads (want a divisor of the query heads), head_dim %d", maxRows, qHeads, kvHeads, headDim)
	}
	a := &Attention{
		pool: pool, maxRows: maxRows, qHeads: qHeads, kvHeads: kvHeads, headDim: headDim,
		group: qHeads / kvHeads, scale: float32(1 / math.Sqrt(float64(headDim))),
		// each sequence has ≥ 1 row, so at most maxRows sequences and
		// maxRows/blockRows + maxRows blocks
		items: make([]item, 0, (maxRows/blockRows+maxRows)*kvHeads),
		ws:    make([]scratch, pool.Size()),
		k:     bindKernels(kernels.Active(), headDim),
		mode:  mode,
	}
	for i := range a.ws {
		w := &a.ws[i]
		w.kt, w.vt = make([]float32, Tile*headDim), make([]float32, Tile*headDim)
		w.ml = make([]float32, 2*blockRows*a.group)
		w.acc = make([]float32, blockRows*a.group*headDim)
		w.s = make([]float32, groupQueries*Tile)
		w.all, w.allRefs = make([]query, blockRows*a.group), make([]qref, blockRows*a.group)
		w.qb, w.qtmp = make([]uint16, 2*blockRows*a.group*headDim), make([]float32, 2*headDim)
		w.alone = query{ml: make([]float32, 2), acc: make([]float32, headDim)}
	}
	return a, nil
}

// ScratchBytes is the memory of the scratch: per worker a K/V tile and one
// block of rows' softmax state and query lists, and the work-item list (a
// few per row).
func (a *Attention) ScratchBytes() int64 {
	var n, queries int
	for i := range a.ws {
		w := &a.ws[i]
		n += len(w.kt) + len(w.vt) + len(w.ml) + len(w.acc) + len(w.s) + len(w.qb)/2 + len(w.qtmp) + len(w.alone.ml) + len(w.alone.acc)
		queries += len(w.all)
	}
	// the work items: a few per row, which a long single-pass prefill pays
	return 4*int64(n) + int64(queries)*int64(unsafe.Sizeof(query{})+unsafe.Sizeof(qref{})) + int64(cap(a.items))*int64(unsafe.Sizeof(item{}))
}

// Forward writes attention outputs for seqs: q and out are [rows, qHeads,
// headDim] (q already normed and rotated); query head h reads kv head
// h/(qHeads/kvHeads). Each query attends to its own and all earlier positions
// of its slot, with scale 1/sqrt(headDim) and an f32 softmax.
//
// Violations of this contract (shapes, rows beyond maxRows, positions beyond
// the cache) are programming errors and panic.
func (a *Attention) Forward(out, q []float32, c *Cache, seqs []Seq) {
	a.check(out, q, c, seqs)
	a.items = a.items[:0]
	for si, s := range seqs {
		for lo := 0; lo < s.N; lo += blockRows {
			hi := min(lo+blockRows, s.N)
			// work ∝ rows × tiles visited
			cost := int64(hi-lo) * int64((s.Start+hi-1)/Tile+1)
			for h := range a.kvHeads {
				a.items = append(a.items, item{cost, int32(si), int32(lo), int32(hi), int32(h)})
			}
		}
	}
	// Longest first, so that dynamic scheduling ends evenly. Which worker runs
	// an item never changes its arithmetic.
	slices.SortStableFunc(a.items, func(x, y item) int { return int(y.cost - x.cost) })
	a.Begin(out, q, c, seqs)
	a.claims.Reset()
	a.pool.Run(a)
	a.End()
}

// Begin sets up a call like Forward's whose work the caller runs in a pool
// task of its own, one kv head at a time (Head), so that a worker can
// project and store a head's q/k/v and attend with it without a barrier in
// between. End finishes the call.
func (a *Attention) Begin(out, q []float32, c *Cache, seqs []Seq) {
	a.check(out, q, c, seqs)
	a.out, a.q, a.c, a.seqs = out, q, c, seqs
}

// Path is the kernel path the Attention was built with.
func (a *Attention) Path() kernels.Path { return a.k.path }

// Mode is the arithmetic the Attention runs over a bf16 cache.
func (a *Attention) Mode() Mode { return a.mode }

// Head computes the outputs of kv head h's query heads for every sequence
// of the call, on worker's scratch; each head must be run by one worker at
// a time, after its K/V are in the cache. The results are Forward's bits.
func (a *Attention) Head(worker, h int) {
	w := &a.ws[worker]
	for si, s := range a.seqs {
		for lo := 0; lo < s.N; lo += blockRows {
			a.block(w, item{seq: int32(si), lo: int32(lo), hi: int32(min(lo+blockRows, s.N)), head: int32(h)})
		}
	}
}

// End finishes a call begun by Begin.
func (a *Attention) End() { a.out, a.q, a.c, a.seqs = nil, nil, nil, nil }

// decodeInPlace runs a decode step's queries (one row, two or a multiple of
// four query heads per kv head) over the tile of a bf16 or int8 cache at
// element offset o, read in place: with so little reuse a widened copy of
// the tile costs more than it saves. It reports false, having done nothing,
// where the path has no such kernel (the first direct call decides; the
// others have the same arguments).
func (a *Attention) decodeInPlace(w *scratch, s Seq, it item, o, n int) bool {
	if a.k.direct == nil {
		return false
	}
	size := min(a.group, groupQueries)
	for j0 := 0; j0 < a.group; j0 += size {
		w.np, w.pn = size, n
		for j := range size {
			w.pend[j] = a.queryOf(w, s, it, int(it.lo), j0+j)
		}
		if !a.k.direct(w, a.c, o, n, a.scale) {
			return false
		}
	}
	return true
}

// query is one query head's online-softmax state and input (qb: q·scale
// as two bf16 rows, high and low part, in ModeBF16).
type query struct {
	ml, acc, q []float32
	qb         []uint16
}

// queryOf is query head j of kv head it.head for row r of sequence s.
func (a *Attention) queryOf(w *scratch, s Seq, it item, r, j int) query {
	hd, g := a.headDim, a.group
	i := (r-int(it.lo))*g + j
	qh := (int(it.head)*g + j) * hd
	qrow := (s.Row + r) * a.qHeads * hd
	return query{ml: w.ml[2*i : 2*i+2], acc: w.acc[i*hd : (i+1)*hd], q: a.q[qrow+qh : qrow+qh+hd], qb: w.qb[2*i*hd : 2*(i+1)*hd]}
}

// groupQueries is how many queries over the same positions one kernel call
// takes: each K/V vector loaded then feeds that many FMAs.
const groupQueries = 4

// flush runs the pending queries over the tile (k, v): in groups where the
// path has group kernels, the rest one call per query. Both give the same
// bits, so grouping never changes a row's result.
func (a *Attention) flush(w *scratch, k, v []float32) {
	if w.inPl {
		a.k.dot(w, a.c, w.o, w.pn)
		return
	}
	n, i := w.pn, 0
	if a.k.group != nil {
		i = a.k.group(w, 0, k, v, n, a.headDim, a.scale)
	}
	for ; i < w.np; i++ {
		p := &w.pend[i]
		a.k.tile(p.ml, p.acc, p.q, k, v, w.s[:Tile], n, a.scale)
	}
	w.np = 0
}

// flushAll runs the block's queries [i0, nq), which all cover the n
// positions of the tile (k, v), in the groups the pending queue would form:
// fours in order (straight from w.allRefs where the path can), then the
// rest as flush takes it.
func (a *Attention) flushAll(w *scratch, i0, nq int, k, v []float32, n int) {
	if w.inPl && a.k.dotAll != nil {
		i0 += a.k.dotAll(w, a.c, w.o, n, i0, nq-i0)
	}
	qs := w.all[i0:nq]
	for len(qs) > 0 {
		w.np, w.pn = copy(w.pend[:], qs), n
		qs = qs[w.np:]
		a.flush(w, k, v)
	}
}

func (a *Attention) check(out, q []float32, c *Cache, seqs []Seq) {
	if c.KVHeads != a.kvHeads || c.HeadDim != a.headDim {
		panic(fmt.Sprintf("attn: cache has %d kv heads of %d, attention was built for %d of %d", c.KVHeads, c.HeadDim, a.kvHeads, a.headDim))
	}
	rows := 0
	width := a.qHeads * a.headDim
	for _, s := range seqs {
		if s.N <= 0 || s.Start < 0 || s.Start+s.N > c.SeqLen || s.Slot < 0 || s.Slot >= c.Slots || s.Row < 0 || (s.Row+s.N)*width > min(len(q), len(out)) {
			panic(fmt.Sprintf("attn: sequence %+v does not fit a %d-slot %d-position cache and %d/%d-element q/out", s, c.Slots, c.SeqLen, len(q), len(out)))
		}
		rows += s.N
	}
	if rows > a.maxRows {
		panic(fmt.Sprintf("attn: %d query rows, attention was built for %d", rows, a.maxRows))
	}
}

// Run is one worker's share: items taken in order from a shared counter.
func (a *Attention) Run(worker, _ int) {
	w := &a.ws[worker]
	for {
		i, _, ok := a.claims.Next(len(a.items), 1)
		if !ok {
			return
		}
		a.block(w, a.items[i])
	}
}

// block computes rows [it.lo, it.hi) of one sequence for the query heads of
// kv head it.head.
func (a *Attention) block(w *scratch, it item) {
	s := a.seqs[it.seq]
	c, hd, g := a.c, a.headDim, a.group
	lo, hi := int(it.lo), int(it.hi)
	nq := (hi - lo) * g
	for i := range nq {
		w.ml[2*i], w.ml[2*i+1] = float32(math.Inf(-1)), 0
	}
	clear(w.acc[:nq*hd])
	for i := range nq {
		w.all[i] = a.queryOf(w, s, it, lo+i/g, i%g)
	}
	// ModeBF16 reads every tile of a bf16 cache in place, prefill and decode
	// alike, with the queries rounded once per block.
	w.inPl = a.mode == ModeBF16 && c.K16 != nil
	if w.inPl {
		for _, q := range w.all[:nq] {
			a.k.roundQ(q.qb, q.q, w.qtmp, a.scale)
		}
		if a.k.dotRefs != nil {
			a.k.dotRefs(w, nq)
		}
	}
	base := c.off(s.Slot, int(it.head), 0)
	last := s.Start + hi - 1 // position of the block's last row
	for t0 := 0; t0 <= last; t0 += Tile {
		t1 := min(t0+Tile, last+1)
		o0, o1 := base+t0*hd, base+t1*hd
		var k, v []float32
		switch {
		case w.inPl:
			// Prefill interleaves V's position pairs once per tile for all
			// the block's queries; a decode step's few read them in place.
			w.o, w.vpairs = o0, hi-lo > 1 && a.k.pairV != nil
			if w.vpairs {
				a.k.pairV(w.vt, c.V16[o0:o1], t1-t0, hd)
				// The block's rows take long enough over a tile for the next
				// one, which a turn over a long history reads from DRAM, to
				// arrive meanwhile.
				if a.k.prefetch != nil && t1 <= last {
					o2 := base + min(t1+Tile, last+1)*hd
					a.k.prefetch(c.K16[o1:o2])
					a.k.prefetch(c.V16[o1:o2])
				}
			}
		case c.K32 == nil && hi-lo == 1 && (g == 2 || g%4 == 0) && a.decodeInPlace(w, s, it, o0, t1-t0):
			continue
		case c.K16 != nil:
			k = a.k.widenK(w.kt, c.K16[o0:o1], nil, t1-t0, hd)
			v = a.k.widenV(w.vt, c.V16[o0:o1], nil, t1-t0, hd)
		case c.K8 != nil:
			k = a.k.dequantK(w.kt, c.K8[o0:o1], c.KS[o0/hd:o1/hd], t1-t0, hd)
			v = a.k.dequantV(w.vt, c.V8[o0:o1], c.VS[o0/hd:o1/hd], t1-t0, hd)
		default:
			k = a.k.widenK(w.kt, nil, c.K32[o0:o1], t1-t0, hd)
			v = a.k.widenV(w.vt, nil, c.V32[o0:o1], t1-t0, hd)
		}
		// Rows whose position precedes the tile are done with it. Queries
		// over the same number of positions go to the kernel in groups.
		w.np = 0
		if r0 := max(lo, t0-s.Start); s.Start+r0+1 >= t1 {
			// Every remaining row sees the whole tile (all but the diagonal
			// tile): the same groups, from the block's query list.
			a.flushAll(w, (r0-lo)*g, nq, k, v, t1-t0)
			continue
		}
		for r := max(lo, t0-s.Start); r < hi; r++ {
			n := min(t1, s.Start+r+1) - t0
			if w.np > 0 && n != w.pn {
				a.flush(w, k, v)
			}
			w.pn = n
			for j := range g {
				w.pend[w.np] = a.queryOf(w, s, it, r, j)
				if w.np++; w.np == len(w.pend) {
					a.flush(w, k, v)
				}
			}
		}
		a.flush(w, k, v)
	}
	for r := lo; r < hi; r++ {
		orow := (s.Row + r) * a.qHeads * hd
		for j := range g {
			qh := int(it.head)*g + j
			i := (r-lo)*g + j
			a.k.ops.Divide(a.out[orow+qh*hd:orow+(qh+1)*hd], w.acc[i*hd:(i+1)*hd], w.ml[2*i+1])
		}
	}
}
