package kvcache

import "math"

// Layer is one layer's K and V: [Slots][KVHeads][SeqLen][HeadDim], either
// bf16 bits (K16, V16) or f32 (K32, V32). It has the field set of
// kernels/attn's Cache so that the attention kernel reads it in place.
type Layer struct {
	Slots, KVHeads, SeqLen, HeadDim int
	K16, V16                        []uint16
	K32, V32                        []float32
}

// Offset is the element index of (slot, head, pos, 0).
func (c *Layer) Offset(slot, head, pos int) int {
	return ((slot*c.KVHeads+head)*c.SeqLen + pos) * c.HeadDim
}

// Store writes one token's K and V rows ([KVHeads*HeadDim] each) at (slot, pos).
func (c *Layer) Store(slot, pos int, k, v []float32) {
	d := c.HeadDim
	for h := 0; h < c.KVHeads; h++ {
		o := c.Offset(slot, h, pos)
		kh, vh := k[h*d:(h+1)*d], v[h*d:(h+1)*d]
		if c.K32 != nil {
			copy(c.K32[o:o+d], kh)
			copy(c.V32[o:o+d], vh)
			continue
		}
		for i := 0; i < d; i++ {
			c.K16[o+i] = toBF16(kh[i])
			c.V16[o+i] = toBF16(vh[i])
		}
	}
}

// toBF16 rounds to nearest even; NaN stays a (quiet) NaN.
func toBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}
