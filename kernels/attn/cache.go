// Package attn is causal self-attention over the static KV cache: flash-style
// (online softmax over K/V tiles, no T×T matrix) for prefill chunks and
// decode steps alike, with grouped-query heads.
//
// Row invariance is the design constraint: the query at absolute position p
// visits cached positions in fixed tiles [64j, 64j+64) aligned to position 0,
// in order, with the same arithmetic for each tile, so its output is bit for
// bit the same whether it comes from a prefill of any length, a later chunk,
// a decode step, or a batch with other sequences.
//
// Kernels: generic is pure Go. avx2, avx512 and avx512bf16 share one
// arithmetic (16-lane FMA dot products folded in a fixed tree, the Exp32 of
// kernels/ops, V accumulated by FMA in position order), so they agree bit
// for bit; they need head_dim % 16 == 0 (else the Go kernel runs). With
// AVX-512, queries over the same positions are processed four or two per
// call so that each K/V vector loaded feeds several FMAs, and a decode step
// of a bf16 cache reads K/V in place (widening as it loads, prefetching the
// next tile) instead of widening the tile into scratch first. The kernels of
// each path are tested bit-identical to one another (grouped vs single,
// in place vs widened), which is what keeps rows invariant when the grouping
// of queries changes between a prefill and a decode step.
//
// An int8 cache is dequantized a tile at a time into the same f32 scratch a
// bf16 tile is widened into (value·scale, one rounding, the same bits on
// every path), for prefill and decode alike, so its rows are invariant in
// the same way; decode reads half the bytes of a bf16 cache from DRAM.
package attn

import (
	"fmt"
	"math"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/ops"
)

// DType is how a Cache holds K and V.
type DType uint8

const (
	// F32 holds K and V exactly as computed.
	F32 DType = iota
	// BF16 rounds them to bfloat16 (nearest even): half the bytes.
	BF16
	// Int8 quantizes each (position, kv head) row of head_dim values
	// symmetrically to int8 with one f32 scale (max |x| / 127), as
	// llama.cpp's q8_0 cache does with blocks of 32: a little over a quarter
	// of the f32 bytes. Attention dequantizes a tile at a time.
	Int8
)

func (d DType) String() string {
	switch d {
	case F32:
		return "f32"
	case BF16:
		return "bf16"
	case Int8:
		return "int8"
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// Cache is one layer's K and V: [Slots][KVHeads][SeqLen][HeadDim] each,
// contiguous along the sequence axis, held as bf16 (K16, V16), f32 (K32,
// V32) or int8 (K8, V8) with the scales KS, VS of each (slot, kv head,
// position), [Slots][KVHeads][SeqLen]. pkg/kvcache allocates the memory;
// Cache only indexes it.
type Cache struct {
	Slots, KVHeads, SeqLen, HeadDim int
	K16, V16                        []uint16
	K32, V32                        []float32
	K8, V8                          []int8
	KS, VS                          []float32

	ops *ops.Kernels // rounds stores to bf16 (Init)
}

// Init binds the kernels a store rounds to bf16 with: those of the path
// active now (kernels.Active), as every kernel user binds its own when it is
// built. NewCache calls it; a Cache assembled field by field (pkg/kvcache
// maps its memory) must call it before its first store.
func (c *Cache) Init() { c.ops = ops.For(kernels.Active()) }

// NewCache allocates a cache on the Go heap (tests, small models; pkg/kvcache
// maps large ones).
func NewCache(slots, kvHeads, seqLen, headDim int, dt DType) *Cache {
	c := &Cache{Slots: slots, KVHeads: kvHeads, SeqLen: seqLen, HeadDim: headDim}
	c.Init()
	n := slots * kvHeads * seqLen * headDim
	switch dt {
	case BF16:
		c.K16, c.V16 = make([]uint16, n), make([]uint16, n)
	case Int8:
		c.K8, c.V8 = make([]int8, n), make([]int8, n)
		c.KS, c.VS = make([]float32, n/headDim), make([]float32, n/headDim)
	default:
		c.K32, c.V32 = make([]float32, n), make([]float32, n)
	}
	return c
}

// Validate checks that the slices match the shape and exactly one element
// type is present.
func (c *Cache) Validate() error {
	n := c.Slots * c.KVHeads * c.SeqLen * c.HeadDim
	if c.Slots <= 0 || c.KVHeads <= 0 || c.SeqLen <= 0 || c.HeadDim <= 0 {
		return fmt.Errorf("kv cache: shape %d×%d×%d×%d must be positive", c.Slots, c.KVHeads, c.SeqLen, c.HeadDim)
	}
	b, f, i := c.K16 != nil || c.V16 != nil, c.K32 != nil || c.V32 != nil, c.K8 != nil || c.V8 != nil
	switch {
	case b && f || b && i || f && i || !b && !f && !i:
		return fmt.Errorf("kv cache: want exactly one of bf16, f32 or int8 K/V slices")
	case b && (len(c.K16) != n || len(c.V16) != n):
		return fmt.Errorf("kv cache: bf16 K/V have %d/%d elements, want %d", len(c.K16), len(c.V16), n)
	case f && (len(c.K32) != n || len(c.V32) != n):
		return fmt.Errorf("kv cache: f32 K/V have %d/%d elements, want %d", len(c.K32), len(c.V32), n)
	case i && (len(c.K8) != n || len(c.V8) != n):
		return fmt.Errorf("kv cache: int8 K/V have %d/%d elements, want %d", len(c.K8), len(c.V8), n)
	case i && (len(c.KS) != n/c.HeadDim || len(c.VS) != n/c.HeadDim):
		return fmt.Errorf("kv cache: int8 K/V scales have %d/%d elements, want %d", len(c.KS), len(c.VS), n/c.HeadDim)
	}
	return nil
}

// DType reports how K and V are stored.
func (c *Cache) DType() DType {
	switch {
	case c.K16 != nil:
		return BF16
	case c.K8 != nil:
		return Int8
	}
	return F32
}

// off is the element offset of (slot, head, pos).
func (c *Cache) off(slot, head, pos int) int {
	return ((slot*c.KVHeads+head)*c.SeqLen + pos) * c.HeadDim
}

// Store writes one token's K and V rows ([KVHeads·HeadDim] each, as the k/v
// projections produce them) at pos of slot, rounding to bf16 (nearest even)
// or quantizing to int8 as the cache's type asks.
func (c *Cache) Store(slot, pos int, k, v []float32) { c.StoreRun(slot, pos, 1, k, v) }

// StoreRun writes n consecutive tokens' K and V ([n, KVHeads·HeadDim]) at
// positions pos..pos+n-1 of slot.
func (c *Cache) StoreRun(slot, pos, n int, k, v []float32) {
	d, hd := c.KVHeads*c.HeadDim, c.HeadDim
	if slot < 0 || slot >= c.Slots || pos < 0 || pos+n > c.SeqLen || len(k) < n*d || len(v) < n*d {
		panic(fmt.Sprintf("attn: store of %d tokens at slot %d position %d (k %d, v %d elements) outside a %d-slot, %d-position cache of %d-wide rows",
			n, slot, pos, len(k), len(v), c.Slots, c.SeqLen, d))
	}
	for t := range n {
		for h := range c.KVHeads {
			c.storeHead(slot, pos+t, h, k[t*d+h*hd:t*d+(h+1)*hd], v[t*d+h*hd:t*d+(h+1)*hd])
		}
	}
}

// StoreHead writes one token's K and V of kv head h ([HeadDim] each) at pos
// of slot, as Store does for every head.
func (c *Cache) StoreHead(slot, pos, h int, k, v []float32) {
	if slot < 0 || slot >= c.Slots || pos < 0 || pos >= c.SeqLen || h < 0 || h >= c.KVHeads || len(k) != c.HeadDim || len(v) != c.HeadDim {
		panic(fmt.Sprintf("attn: store of head %d at slot %d position %d (k %d, v %d elements) outside a %d-slot, %d-position cache of %d heads × %d",
			h, slot, pos, len(k), len(v), c.Slots, c.SeqLen, c.KVHeads, c.HeadDim))
	}
	c.storeHead(slot, pos, h, k, v)
}

func (c *Cache) storeHead(slot, pos, h int, k, v []float32) {
	hd := c.HeadDim
	dst := c.off(slot, h, pos)
	switch {
	case c.K16 != nil:
		if c.ops == nil {
			panic("attn: store into a bf16 Cache that was not Init")
		}
		c.ops.ToBF16(c.K16[dst:dst+hd], k)
		c.ops.ToBF16(c.V16[dst:dst+hd], v)
	case c.K8 != nil:
		c.KS[dst/hd] = Quantize(c.K8[dst:dst+hd], k)
		c.VS[dst/hd] = Quantize(c.V8[dst:dst+hd], v)
	default:
		copy(c.K32[dst:dst+hd], k)
		copy(c.V32[dst:dst+hd], v)
	}
}

// Quantize rounds x (one position of one kv head) to int8 in q, symmetric
// about zero with the scale it returns: q = round(x·127/max|x|), ties to
// even, so that x ≈ q·scale with error at most scale/2. An all-zero row has
// scale 0. A row holding NaN or ±Inf has no meaningful scale: it quantizes
// to NaN (every value of the row dequantizes to NaN), as a bf16 cache would
// propagate it.
func Quantize(q []int8, x []float32) float32 {
	var amax float32
	for _, v := range x {
		amax = max(amax, abs32(v))
	}
	if amax == 0 {
		clear(q)
		return 0
	}
	if amax != amax || amax > math.MaxFloat32 {
		clear(q)
		return float32(math.NaN())
	}
	// in float64, where 127/max|x| cannot overflow for a subnormal max
	inv := 127 / float64(amax)
	for i, v := range x {
		q[i] = int8(max(-127, min(127, math.RoundToEven(float64(v)*inv))))
	}
	return amax / 127
}

func abs32(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ (1 << 31)) }
