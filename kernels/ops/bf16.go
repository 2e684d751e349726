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

// DotBF16 is one lane of VDPBF16PS as the Intel SDM defines it (acc plus the
// dot product of the bf16 pairs a and b, low half the even element): two FMAs,
// the odd (high) bf16 pair first, each with denormal inputs read as zero,
// the result rounded to nearest even and a denormal result flushed to zero.
func DotBF16(acc float32, a, b uint32) float32 {
	acc = fmaDAZ(acc, uint16(a>>16), uint16(b>>16))
	return fmaDAZ(acc, uint16(a), uint16(b))
}

// fmaDAZ returns acc + a·b rounded once to f32. The product of two bf16 is
// exact in f64, and the f64 sum cannot create a false f32 tie: a tie needs
// bits 2^-40 apart relative to the sum, which 24 + 16 significant bits
// cannot produce below f64 precision.
func fmaDAZ(acc float32, a, b uint16) float32 {
	s := float64(daz(acc)) + float64(daz(BF16ToF32(a)))*float64(daz(BF16ToF32(b)))
	return daz(float32(s))
}

// daz maps a denormal to the zero of its sign.
func daz(v float32) float32 {
	if b := math.Float32bits(v); b&0x7f800000 == 0 {
		return math.Float32frombits(b & 0x80000000)
	}
	return v
}
