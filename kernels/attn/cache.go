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
package attn

import (
	"fmt"

	"github.com/ellm-dev/ellm/kernels/ops"
)

// Cache is one layer's K and V: [Slots][KVHeads][SeqLen][HeadDim] each,
// contiguous along the sequence axis, held as bf16 (K16, V16) or f32 (K32,
// V32). pkg/kvcache allocates the memory; Cache only indexes it.
type Cache struct {
	Slots, KVHeads, SeqLen, HeadDim int
	K16, V16                        []uint16
	K32, V32                        []float32
}

// NewCache allocates a cache on the Go heap (tests, small models; pkg/kvcache
// maps large ones).
func NewCache(slots, kvHeads, seqLen, headDim int, bf16 bool) *Cache {
	c := &Cache{Slots: slots, KVHeads: kvHeads, SeqLen: seqLen, HeadDim: headDim}
	n := slots * kvHeads * seqLen * headDim
	if bf16 {
		c.K16, c.V16 = make([]uint16, n), make([]uint16, n)
	} else {
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
	b, f := c.K16 != nil || c.V16 != nil, c.K32 != nil || c.V32 != nil
	switch {
	case b == f:
		return fmt.Errorf("kv cache: want either bf16 or f32 K/V slices")
	case b && (len(c.K16) != n || len(c.V16) != n):
		return fmt.Errorf("kv cache: bf16 K/V have %d/%d elements, want %d", len(c.K16), len(c.V16), n)
	case f && (len(c.K32) != n || len(c.V32) != n):
		return fmt.Errorf("kv cache: f32 K/V have %d/%d elements, want %d", len(c.K32), len(c.V32), n)
	}
	return nil
}

// BF16 reports whether K and V are stored as bf16.
func (c *Cache) BF16() bool { return c.K16 != nil }

// off is the element offset of (slot, kv head, pos).
func (c *Cache) off(slot, head, pos int) int {
	return ((slot*c.KVHeads+head)*c.SeqLen + pos) * c.HeadDim
}

// Store writes one token's K and V rows ([KVHeads·HeadDim] each, as the k/v
// projections produce them) at pos of slot, rounding to bf16 (nearest even)
// for a bf16 cache.
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
	if c.K16 != nil {
		ops.ToBF16(c.K16[dst:dst+hd], k)
		ops.ToBF16(c.V16[dst:dst+hd], v)
	} else {
		copy(c.K32[dst:dst+hd], k)
		copy(c.V32[dst:dst+hd], v)
	}
}
