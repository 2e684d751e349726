package ops

import (
	"fmt"
	"math"
)

// BF16ToF32 widens one bfloat16 value exactly.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 rounds to the nearest bfloat16, ties to even (as torch's
// .to(torch.bfloat16) and VCVTNEPS2BF16 do); a NaN stays a NaN, made quiet.
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// ToF32 widens src into dst (len(dst) ≥ len(src)).
func (k *Kernels) ToF32(dst []float32, src []uint16) {
	dst = dst[:len(src)]
	i := k.lead16(len(src))
	if i > 0 {
		k.asm.toF32(&dst[0], &src[0], i)
	}
	for ; i < len(src); i++ {
		dst[i] = BF16ToF32(src[i])
	}
}

// ToBF16 rounds src into dst (len(dst) ≥ len(src)) with F32ToBF16.
func (k *Kernels) ToBF16(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	i := k.lead16(len(src))
	if i > 0 {
		k.asm.toBF16(&dst[0], &src[0], i)
	}
	for ; i < len(src); i++ {
		dst[i] = F32ToBF16(src[i])
	}
}

// Embed gathers the rows ids of a bf16 table [vocab, dim] into out [len(ids), dim].
func (k *Kernels) Embed(out []float32, table []uint16, dim int, ids []int32) error {
	if dim <= 0 || len(table)%dim != 0 || len(out) != len(ids)*dim {
		return fmt.Errorf("embed: table of %d elements, dim %d, out %d for %d ids", len(table), dim, len(out), len(ids))
	}
	vocab := len(table) / dim
	for t, id := range ids {
		if id < 0 || int(id) >= vocab {
			return fmt.Errorf("embed: token id %d outside the vocabulary [0, %d)", id, vocab)
		}
		k.ToF32(out[t*dim:(t+1)*dim], table[int(id)*dim:(int(id)+1)*dim])
	}
	return nil
}
